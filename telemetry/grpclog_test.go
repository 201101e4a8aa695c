package telemetry

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/grpclog"

	"github.com/orchd/orchd/internal/syncbuf"
)

// TestRouteGRPCLogs logs through grpc-go's own logger and finds the
// records in the configured JSON logger at their levels, the info only at
// debug; a second call moves them to another logger. Not parallel: it sets
// grpc-go's process-wide logger.
func TestRouteGRPCLogs(t *testing.T) {
	first, second := &syncbuf.Buffer{}, &syncbuf.Buffer{}
	for _, tc := range []struct {
		buf   *syncbuf.Buffer
		level slog.Level
		want  map[string]string // message: level
	}{
		{buf: first, level: slog.LevelInfo, want: map[string]string{"E 1": "ERROR", "W 2": "WARN"}},
		{buf: second, level: slog.LevelDebug, want: map[string]string{"E 1": "ERROR", "W 2": "WARN", "I 3": "DEBUG"}},
	} {
		log, err := NewLogger(tc.buf, "json", tc.level)
		if err != nil {
			t.Fatal(err)
		}
		RouteGRPCLogs(log)
		if got, want := grpclog.V(0), tc.level == slog.LevelDebug; got != want || grpclog.V(2) {
			t.Errorf("at %s: V(0) = %v, want %v; V(2) = %v, want false", tc.level, got, want, grpclog.V(2))
		}
		grpclog.Errorf("E %d", 1)
		grpclog.Warningf("W %d", 2)
		grpclog.Infof("I %d", 3)
		got := map[string]string{}
		for line := range strings.Lines(tc.buf.String()) {
			var r map[string]string
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if r["component"] != "grpc" {
				t.Errorf("record %v, want component grpc", r)
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
	if strings.Contains(first.String(), "I 3") || strings.Count(first.String(), "\n") != 2 {
		t.Errorf("the first logger got records after the second call:\n%s", first)
	}
}
