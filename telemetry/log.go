package telemetry

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// NewLogger returns the logger the daemon logs with: records at level and
// above, written to w as text or json (format, either case), carrying the
// trace ids of traced operations (LogHandler). orchd's command line and
// the benchmarks that measure the daemon as it runs build it here alike.
func NewLogger(w io.Writer, format string, level slog.Leveler) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(format) {
	case "text":
		return slog.New(LogHandler(slog.NewTextHandler(w, opts))), nil
	case "json":
		return slog.New(LogHandler(slog.NewJSONHandler(w, opts))), nil
	}
	return nil, fmt.Errorf("log format %q: want text or json", format)
}

// LogHandler wraps h so that every record logged with a context carrying a
// span gets the span's trace_id and span_id attributes: a log line can be
// found from its trace and the other way round.
func LogHandler(h slog.Handler) slog.Handler { return traceHandler{h} }

type traceHandler struct{ slog.Handler }

func (h traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return traceHandler{h.Handler.WithAttrs(as)}
}

func (h traceHandler) WithGroup(name string) slog.Handler {
	return traceHandler{h.Handler.WithGroup(name)}
}
