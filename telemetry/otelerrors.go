package telemetry

import (
	"log/slog"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
)

// routeOTelLogs sends what OpenTelemetry reports on its own to log: the
// errors its SDK and exporters hand to the global error handler (an export
// that failed: a collector that is down, refuses or times out) as records at
// error level, and what it logs through its global logger (a malformed
// OTEL_* variable, say) at the levels it gives them. Without this both go to
// stderr raw, outside the configured format.
//
// OpenTelemetry offers only these process-wide hooks (otel.SetErrorHandler,
// otel.SetLogger), so this changes them for the whole process: the last
// Telemetry built with a Config.Log receives everything any provider in the
// process reports.
func routeOTelLogs(log *slog.Logger) {
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		log.Error("OpenTelemetry export failed", "error", err)
	}))
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
}
