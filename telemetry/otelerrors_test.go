package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/orchd/orchd/internal/syncbuf"
	"github.com/orchd/orchd/internal/testwait"
)

// TestNew_ExportErrorsGoToTheLog points the OTLP exporter at a closed port
// and finds the failed export as a JSON record of the configured logger,
// with OpenTelemetry's own complaint about a malformed variable, and
// nothing written the standard library's way. Not parallel: it sets the
// environment and OpenTelemetry's process-wide hooks.
func TestNew_ExportErrorsGoToTheLog(t *testing.T) {
	clearEnv(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://"+closed+"/v1/traces")
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "no-equals-sign")
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "10")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2000")
	var raw bytes.Buffer
	std := log.Writer()
	log.SetOutput(&raw)
	t.Cleanup(func() { log.SetOutput(std) })
	logs := &syncbuf.Buffer{}
	logger, err := NewLogger(logs, "json", slog.LevelInfo)
	if err != nil {
		t.Fatal(err)
	}

	tel, err := New(t.Context(), Config{Log: logger})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "op")
	span.End()
	var exportErr, headerErr map[string]any
	testwait.Succeeds(t, 10*time.Second, "an export error and a header complaint in the log", func() error {
		for line := range strings.Lines(logs.String()) {
			var r map[string]any
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("log line %q is not JSON: %v", line, err)
			}
			switch r["msg"] {
			case "OpenTelemetry export failed":
				exportErr = r
			case "parse headers":
				headerErr = r
			}
		}
		if exportErr == nil || headerErr == nil {
			return fmt.Errorf("the log has\n%s", logs)
		}
		return nil
	})
	if exportErr["level"] != "ERROR" || !strings.Contains(exportErr["error"].(string), closed) {
		t.Errorf("export error record %v, want level ERROR and an error naming %s", exportErr, closed)
	}
	if headerErr["level"] != "ERROR" {
		t.Errorf("header complaint %v, want level ERROR", headerErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_ = tel.Shutdown(ctx) // its last export fails too
	if raw.Len() > 0 {
		t.Errorf("written by the log package, outside the configured logger:\n%s", raw.String())
	}
}
