package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetricgrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// Config says which exporters to run. The zero Config exports nothing.
type Config struct {
	// ServiceName is the service.name resource attribute; OTEL_SERVICE_NAME
	// and OTEL_RESOURCE_ATTRIBUTES override it. Default "orchd".
	ServiceName string
	// Prometheus enables the Prometheus scrape handler (MetricsHandler).
	Prometheus bool
	// Getenv reads the OTEL_* environment variables; nil means os.Getenv.
	Getenv func(string) string
	// Log, when set, receives what OpenTelemetry reports on its own, failed
	// exports first, instead of stderr (otelerrors.go). OpenTelemetry's
	// hooks for that are process-wide: New sets them whenever it builds an
	// exporter, so the last such Telemetry with a Log gets the reports of
	// every provider in the process. Nil leaves the hooks as they are.
	Log *slog.Logger
}

// Telemetry holds the providers orchd's packages take their tracers and
// meters from, and the exporters behind them. Its methods are safe for
// concurrent use.
type Telemetry struct {
	tracer   trace.TracerProvider
	meter    metric.MeterProvider
	metrics  http.Handler
	tracing  bool
	shutdown []func(context.Context) error
}

// Disabled returns telemetry that records and exports nothing: no-op
// providers, no scrape handler.
func Disabled() *Telemetry {
	return &Telemetry{tracer: tracenoop.NewTracerProvider(), meter: metricnoop.NewMeterProvider()}
}

// New builds the providers cfg and the environment ask for. Traces are
// recorded only when an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT
// or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); metrics when cfg.Prometheus is
// set or an OTLP metrics endpoint is. Whatever is not configured is a
// no-op provider, so instrumented code costs next to nothing.
// OTEL_SDK_DISABLED=true turns everything off; OTEL_TRACES_EXPORTER=none
// and OTEL_METRICS_EXPORTER=none turn off the OTLP exporters.
func New(ctx context.Context, cfg Config) (*Telemetry, error) {
	getenv := cfg.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	t := Disabled()
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") {
		return t, nil
	}
	name := cfg.ServiceName
	if name == "" {
		name = "orchd"
	}
	if cfg.Log != nil && (cfg.Prometheus || otlpWanted(getenv, "TRACES") || otlpWanted(getenv, "METRICS")) {
		routeOTelLogs(cfg.Log)
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", name)), resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("telemetry resource: %w", err)
	}

	if otlpWanted(getenv, "TRACES") {
		exp, err := traceExporter(ctx, otlpProtocol(getenv, "TRACES"))
		if err != nil {
			return nil, err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
		t.tracer, t.tracing = tp, true
		t.shutdown = append(t.shutdown, tp.Shutdown)
	}

	var readers []sdkmetric.Option
	if cfg.Prometheus {
		reg := prometheus.NewRegistry()
		exp, err := otelprom.New(otelprom.WithRegisterer(reg))
		if err != nil {
			return nil, t.fail(ctx, fmt.Errorf("prometheus exporter: %w", err))
		}
		// The Go runtime's and the process's own figures (go_goroutines,
		// go_memstats_*, process_resident_memory_bytes, open fds...), read
		// at each scrape: what an operator looks at first when a daemon
		// grows.
		for _, c := range []prometheus.Collector{collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
			if err := reg.Register(c); err != nil {
				return nil, t.fail(ctx, fmt.Errorf("prometheus runtime metrics: %w", err))
			}
		}
		readers = append(readers, sdkmetric.WithReader(exp))
		t.metrics = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	}
	if otlpWanted(getenv, "METRICS") {
		exp, err := metricExporter(ctx, otlpProtocol(getenv, "METRICS"))
		if err != nil {
			return nil, t.fail(ctx, err)
		}
		readers = append(readers, sdkmetric.WithReader(sdkmetric.NewPeriodicReader(exp)))
	}
	if len(readers) > 0 {
		mp := sdkmetric.NewMeterProvider(append(readers, sdkmetric.WithResource(res))...)
		t.meter = mp
		t.shutdown = append(t.shutdown, mp.Shutdown)
	}
	return t, nil
}

// otlpWanted reports whether an OTLP endpoint is configured for signal
// (TRACES or METRICS) and its exporter is not switched off.
func otlpWanted(getenv func(string) string, signal string) bool {
	if strings.EqualFold(getenv("OTEL_"+signal+"_EXPORTER"), "none") {
		return false
	}
	return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_"+signal+"_ENDPOINT") != ""
}

// otlpProtocol is the OTLP protocol for signal: its own variable, else the
// general one, else http/protobuf.
func otlpProtocol(getenv func(string) string, signal string) string {
	if p := getenv("OTEL_EXPORTER_OTLP_" + signal + "_PROTOCOL"); p != "" {
		return p
	}
	if p := getenv("OTEL_EXPORTER_OTLP_PROTOCOL"); p != "" {
		return p
	}
	return "http/protobuf"
}

// The exporters read the rest of the OTEL_EXPORTER_OTLP_* variables
// (endpoint, headers, timeout, TLS) themselves.
func traceExporter(ctx context.Context, protocol string) (sdktrace.SpanExporter, error) {
	switch protocol {
	case "http/protobuf":
		return otlptracehttp.New(ctx)
	case "grpc":
		return otlptracegrpc.New(ctx)
	}
	return nil, fmt.Errorf("OTLP traces: protocol %q is not supported; use http/protobuf or grpc", protocol)
}

func metricExporter(ctx context.Context, protocol string) (sdkmetric.Exporter, error) {
	switch protocol {
	case "http/protobuf":
		return otlpmetrichttp.New(ctx)
	case "grpc":
		return otlpmetricgrpc.New(ctx)
	}
	return nil, fmt.Errorf("OTLP metrics: protocol %q is not supported; use http/protobuf or grpc", protocol)
}

// fail shuts down what was built before err and returns err.
func (t *Telemetry) fail(ctx context.Context, err error) error {
	return errors.Join(err, t.Shutdown(ctx))
}

// WithProviders returns telemetry using the given providers, for programs
// and tests that build their own (an SDK provider with an in-memory span
// recorder, say). A nil provider is a no-op one. Shutdown leaves them to
// their owner.
func WithProviders(tp trace.TracerProvider, mp metric.MeterProvider) *Telemetry {
	t := Disabled()
	if tp != nil {
		t.tracer, t.tracing = tp, true
	}
	if mp != nil {
		t.meter = mp
	}
	return t
}

// TracerProvider is where orchd's packages get their tracers.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.tracer }

// MeterProvider is where orchd's packages get their meters.
func (t *Telemetry) MeterProvider() metric.MeterProvider { return t.meter }

// Tracing reports whether spans are recorded; without it orchd skips its
// HTTP tracing middleware altogether.
func (t *Telemetry) Tracing() bool { return t.tracing }

// Propagator carries W3C trace context and baggage across A2A calls.
func (t *Telemetry) Propagator() propagation.TextMapPropagator {
	return propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
}

// MetricsHandler serves the Prometheus scrape endpoint, or is nil when
// Prometheus is not enabled.
func (t *Telemetry) MetricsHandler() http.Handler { return t.metrics }

// Shutdown flushes and stops the exporters. It is safe to call more than
// once.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	var errs []error
	for _, f := range t.shutdown {
		errs = append(errs, f(ctx))
	}
	t.shutdown = nil
	return errors.Join(errs...)
}
