package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.opentelemetry.io/otel/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// clearEnv unsets the OTEL variables New reads, for the test's duration.
func clearEnv(t *testing.T) {
	for _, k := range []string{"OTEL_SDK_DISABLED", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		"OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_TRACES_EXPORTER", "OTEL_METRICS_EXPORTER"} {
		t.Setenv(k, "")
	}
}

func TestNew_NothingConfiguredRecordsNothing(t *testing.T) {
	clearEnv(t)
	tel, err := New(t.Context(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	if tel.Tracing() || tel.MetricsHandler() != nil {
		t.Errorf("tracing %v, metrics handler %v; want neither", tel.Tracing(), tel.MetricsHandler())
	}
	_, span := tel.TracerProvider().Tracer("test").Start(t.Context(), "x")
	if span.IsRecording() {
		t.Error("a span records with nothing configured")
	}
	// With tracing off, Handler and Transport only pass the caller's
	// trace headers on (passthrough_test.go): no span, even for a caller
	// that sent a trace context.
	srv := httptest.NewServer(tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if span := trace.SpanFromContext(r.Context()); span.IsRecording() || span.SpanContext().IsValid() {
			t.Error("Handler started a span with tracing off")
		}
	}), "op"))
	defer srv.Close()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL, nil)
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	resp, err := (&http.Client{Transport: tel.Transport(ownTransport(t))}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
}

// otlpReceiver is an HTTP server taking OTLP/HTTP exports.
type otlpReceiver struct {
	*httptest.Server
	mu    sync.Mutex
	paths map[string]int
}

func newReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{paths: map[string]int{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		if req.Header.Get("Content-Type") == "application/x-protobuf" {
			r.paths[req.URL.Path]++
		}
		r.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) got(path string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.paths[path]
}

func TestNew_ExportsOverOTLPWhenTheEnvironmentSaysSo(t *testing.T) {
	clearEnv(t)
	recv := newReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", recv.URL)
	tel, err := New(t.Context(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	if !tel.Tracing() {
		t.Fatal("tracing is off with an OTLP endpoint set")
	}
	_, span := tel.TracerProvider().Tracer("test").Start(t.Context(), "x")
	span.End()
	c, _ := tel.MeterProvider().Meter("test").Int64Counter("orchd.test")
	c.Add(t.Context(), 1)
	if err := tel.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	if recv.got("/v1/traces") == 0 || recv.got("/v1/metrics") == 0 {
		t.Errorf("exports received: %v; want traces and metrics", recv.paths)
	}
}

func TestNew_SwitchesAndErrors(t *testing.T) {
	for _, tc := range []struct {
		name     string
		env      map[string]string
		tracing  bool
		errorHas string
	}{
		{name: "traces endpoint only", env: map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces"}, tracing: true},
		{name: "traces exporter none", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}},
		{name: "SDK disabled", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"}},
		{name: "grpc", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, tracing: true},
		{name: "unknown protocol", env: map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
			errorHas: `OTLP traces: protocol "http/json" is not supported`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clearEnv(t)
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			tel, err := New(t.Context(), Config{Prometheus: true})
			if tc.errorHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errorHas) {
					t.Fatalf("err = %v, want %q", err, tc.errorHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				// Nothing listens at the endpoint: do not wait out the
				// exporters' retries.
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				defer cancel()
				_ = tel.Shutdown(ctx)
			}()
			if tel.Tracing() != tc.tracing {
				t.Errorf("tracing = %v, want %v", tel.Tracing(), tc.tracing)
			}
			if (tel.MetricsHandler() == nil) != (tc.env["OTEL_SDK_DISABLED"] == "true") {
				t.Errorf("metrics handler = %v with Prometheus asked for", tel.MetricsHandler())
			}
		})
	}
}

func TestPrometheusHandler_ServesRecordedMetrics(t *testing.T) {
	clearEnv(t)
	tel, err := New(t.Context(), Config{Prometheus: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()
	c, _ := tel.MeterProvider().Meter("test").Int64Counter("orchd.widgets")
	c.Add(t.Context(), 3, metric.WithAttributes())
	srv := httptest.NewServer(tel.MetricsHandler())
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if !strings.Contains(buf.String(), "orchd_widgets_total{") || !strings.Contains(buf.String(), "} 3") {
		t.Errorf("scrape lacks the counter:\n%s", buf.String())
	}
	for _, m := range []string{"\ngo_goroutines ", "\ngo_memstats_heap_alloc_bytes ", "\nprocess_resident_memory_bytes "} {
		if !strings.Contains(buf.String(), m) {
			t.Errorf("scrape lacks the runtime's %s", strings.TrimSpace(m))
		}
	}
}

func TestHandlerAndTransport_CarryTheTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tel := WithProviders(tp, nil)

	srv := httptest.NewServer(tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		NameSpan(r.Context(), "A2A SendMessage")
	}), "A2A"))
	defer srv.Close()
	client := &http.Client{Transport: tel.Transport(ownTransport(t))}
	ctx, parent := tp.Tracer("test").Start(t.Context(), "caller")
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/a2a", nil)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	parent.End()

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
	}
	server, client2 := spans["A2A SendMessage"], spans["HTTP POST"]
	if server == nil || client2 == nil {
		t.Fatalf("spans %v; want the renamed server span and the client span", keys(spans))
	}
	if server.Parent().SpanID() != client2.SpanContext().SpanID() || client2.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Error("the server span is not the client span's child, or the client span not the caller's")
	}
	if server.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Error("the server span is in another trace")
	}
}

func keys(m map[string]sdktrace.ReadOnlySpan) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestLogHandler_StampsTraceAndSpanIDs(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	ctx, span := tp.Tracer("test").Start(t.Context(), "op")
	log.InfoContext(ctx, "inside")
	span.End()
	log.Info("outside")

	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("log:\n%s", buf.String())
	}
	var in, out map[string]any
	_ = json.Unmarshal([]byte(lines[0]), &in)
	_ = json.Unmarshal([]byte(lines[1]), &out)
	want := map[string]any{"trace_id": span.SpanContext().TraceID().String(), "span_id": span.SpanContext().SpanID().String(), "component": "test"}
	if diff := cmp.Diff(want, in, cmpopts.IgnoreMapEntries(func(k string, _ any) bool { _, checked := want[k]; return !checked })); diff != "" {
		t.Errorf("the record inside the span (-want +got):\n%s", diff)
	}
	if _, ok := out["trace_id"]; ok {
		t.Errorf("outside any span: %v", out)
	}
}
