package telemetry

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc/grpclog"
)

// RouteProcessLogs sends to log what the libraries orchd runs on log on
// their own, past the loggers orchd hands them: slog's default logger
// (and the log package, which writes through it), where a2a-go's client
// reports a body it failed to close or a transport that failed to
// connect; and grpc-go's log, by default its errors raw on stderr, with
// its errors and warnings at their levels and its info at debug, as it is
// chatty. It is for programs, such as orchd serve, to call once they have
// their logger and before they use gRPC.
//
// Both are process-wide. grpc-go's logger may be set only before gRPC
// runs (grpclog.SetLoggerV2 is not safe to call while it does), so the
// first call installs a logger that forwards to the one given, and later
// calls only change, atomically, where it forwards: the last call's log
// wins. This and the OpenTelemetry hooks New sets (otelerrors.go) are the
// only process-wide state orchd's packages touch, as the libraries offer
// no other way.
func RouteProcessLogs(log *slog.Logger) {
	slog.SetDefault(log)
	grpcLogs.target.Store(log)
	grpcLogs.once.Do(func() { grpclog.SetLoggerV2(&grpcLogs) })
}

// grpcLogs is the logger RouteProcessLogs installs for grpc-go.
var grpcLogs grpcLogger

// grpcLogger is a grpclog.LoggerV2 writing to the slog logger it holds.
type grpcLogger struct {
	once   sync.Once
	target atomic.Pointer[slog.Logger]
}

var _ grpclog.LoggerV2 = (*grpcLogger)(nil)

func (g *grpcLogger) log(level slog.Level, msg string) {
	if l := g.target.Load(); l != nil {
		l.Log(context.Background(), level, msg, "component", "grpc")
	}
}

// The grpclog.LoggerV2 methods: info at debug, warnings and errors at
// their levels.
func (g *grpcLogger) Info(args ...any)   { g.log(slog.LevelDebug, fmt.Sprint(args...)) }
func (g *grpcLogger) Infoln(args ...any) { g.log(slog.LevelDebug, fmt.Sprint(args...)) }
func (g *grpcLogger) Infof(format string, args ...any) {
	g.log(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (g *grpcLogger) Warning(args ...any)   { g.log(slog.LevelWarn, fmt.Sprint(args...)) }
func (g *grpcLogger) Warningln(args ...any) { g.log(slog.LevelWarn, fmt.Sprint(args...)) }
func (g *grpcLogger) Warningf(format string, args ...any) {
	g.log(slog.LevelWarn, fmt.Sprintf(format, args...))
}
func (g *grpcLogger) Error(args ...any)   { g.log(slog.LevelError, fmt.Sprint(args...)) }
func (g *grpcLogger) Errorln(args ...any) { g.log(slog.LevelError, fmt.Sprint(args...)) }
func (g *grpcLogger) Errorf(format string, args ...any) {
	g.log(slog.LevelError, fmt.Sprintf(format, args...))
}

// Fatal logs at error level and exits, as grpc-go expects of it.
func (g *grpcLogger) Fatal(args ...any) { g.log(slog.LevelError, fmt.Sprint(args...)); os.Exit(1) }

// Fatalln is Fatal.
func (g *grpcLogger) Fatalln(args ...any) { g.Fatal(args...) }

// Fatalf is Fatal with a format.
func (g *grpcLogger) Fatalf(format string, args ...any) { g.Fatal(fmt.Sprintf(format, args...)) }

// V reports whether grpc-go's verbose logging at level l is on: never
// beyond level 0, which is its ordinary info, logged at debug.
func (g *grpcLogger) V(l int) bool {
	t := g.target.Load()
	return l <= 0 && t != nil && t.Enabled(context.Background(), slog.LevelDebug)
}
