package telemetry

import (
	"encoding/json"
	"log"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/grpclog"

	"github.com/orchd/orchd/internal/syncbuf"
)

// TestRouteProcessLogs logs through grpc-go's own logger, slog's default
// logger and the log package, and finds the records in the configured JSON
// logger at their levels, grpc-go's info only at debug; a second call
// moves them to another logger. Not parallel: it sets process-wide
// loggers.
func TestRouteProcessLogs(t *testing.T) {
	prev, flags, out := slog.Default(), log.Flags(), log.Writer()
	t.Cleanup(func() { slog.SetDefault(prev); log.SetOutput(out); log.SetFlags(flags) })
	first, second := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	for _, tc := range []struct {
		buf   *syncbuf.Buffer
		level slog.Level
		want  map[string]string // message: level
	}{
		{buf: first, level: slog.LevelInfo, want: map[string]string{"E 1": "ERROR", "W 2": "WARN", "S 4": "INFO", "L 5": "INFO"}},
		{buf: second, level: slog.LevelDebug, want: map[string]string{"E 1": "ERROR", "W 2": "WARN", "I 3": "DEBUG", "S 4": "INFO", "L 5": "INFO"}},
	} {
		logger, err := NewLogger(tc.buf, "json", tc.level)
		if err != nil {
			t.Fatal(err)
		}
		RouteProcessLogs(logger)
		if got, want := grpclog.V(0), tc.level == slog.LevelDebug; got != want || grpclog.V(2) {
			t.Errorf("at %s: V(0) = %v, want %v; V(2) = %v, want false", tc.level, got, want, grpclog.V(2))
		}
		grpclog.Errorf("E %d", 1)
		grpclog.Warningf("W %d", 2)
		grpclog.Infof("I %d", 3)
		slog.Info("S 4")
		log.Print("L 5")
		got := map[string]string{}
		for line := range strings.Lines(tc.buf.String()) {
			var r map[string]string
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if fromGRPC := strings.HasPrefix(r["msg"], "E ") || strings.HasPrefix(r["msg"], "W ") || strings.HasPrefix(r["msg"], "I "); fromGRPC != (r["component"] == "grpc") {
				t.Errorf("record %v: component grpc for grpc-go's records only", r)
			}
			got[r["msg"]] = r["level"]
		}
		if len(got) != len(tc.want) {
			t.Errorf("at %s: records %v, want %v", tc.level, got, tc.want)
		}
		for msg, level := range tc.want {
			if got[msg] != level {
				t.Errorf("at %s: %q logged at %q, want %s", tc.level, msg, got[msg], level)
			}
		}
	}
	if strings.Contains(first.String(), "I 3") || strings.Count(first.String(), "\n") != 4 {
		t.Errorf("the first logger got records after the second call:\n%s", first)
	}
}
