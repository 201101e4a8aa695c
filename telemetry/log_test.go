package telemetry

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func TestNewLogger_FormatsLevelsAndTraceIDs(t *testing.T) {
	t.Parallel()
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(t.Context(), "op")
	defer span.End()
	traceID := span.SpanContext().TraceID().String()
	for _, tc := range []struct {
		format string
		level  slog.Level
		want   []string // in the one record written
	}{
		{"text", slog.LevelInfo, []string{"level=INFO", "msg=kept", "trace_id=" + traceID}},
		{"JSON", slog.LevelInfo, []string{`"level":"INFO"`, `"msg":"kept"`, `"trace_id":"` + traceID + `"`}},
		{"json", slog.LevelDebug, []string{`"level":"INFO"`, `"msg":"kept"`}},
	} {
		t.Run(tc.format+"/"+tc.level.String(), func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			log, err := NewLogger(&buf, tc.format, tc.level)
			if err != nil {
				t.Fatal(err)
			}
			log.DebugContext(ctx, "dropped")
			log.InfoContext(ctx, "kept")
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if tc.level == slog.LevelDebug {
				if len(lines) != 2 || !strings.Contains(lines[0], "dropped") {
					t.Fatalf("at debug level wrote %q, want both records", lines)
				}
				lines = lines[1:]
			}
			if len(lines) != 1 {
				t.Fatalf("wrote %q, want one record", lines)
			}
			for _, w := range tc.want {
				if !strings.Contains(lines[0], w) {
					t.Errorf("record %q lacks %q", lines[0], w)
				}
			}
		})
	}
	if _, err := NewLogger(&bytes.Buffer{}, "xml", slog.LevelInfo); err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Errorf("format xml: error %v, want one naming it", err)
	}
}
