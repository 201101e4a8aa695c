// Package telemetry builds the OpenTelemetry providers orchd records its
// traces and metrics with, from a small config and the standard OTEL_*
// environment variables: a Prometheus scrape handler when asked for, OTLP
// exporters when an endpoint is set, and no-op providers otherwise, so an
// orchd with nothing configured exports nothing and pays next to nothing.
//
// orchd's other packages depend only on the OpenTelemetry API: they take a
// trace.TracerProvider and a metric.MeterProvider in their configs. This
// package is where the daemon chooses the implementations. It also offers
// the HTTP middleware that carries W3C trace context across A2A calls (and
// passes a caller's trace headers on unchanged when tracing is off), the
// daemon's logger, a slog handler that stamps log records with trace and
// span ids, and the routing of what OpenTelemetry and grpc-go log on their
// own into that logger.
//
// The spans and metrics orchd records are listed in docs/observability.md.
package telemetry
