package telemetry_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/grpclog"

	"github.com/orchd/orchd/telemetry"
)

// A program builds its telemetry once from its config and the OTEL_*
// environment, hands the providers to the packages it runs, mounts the
// scrape handler, and shuts the exporters down on exit.
func ExampleNew() {
	tel, err := telemetry.New(context.Background(), telemetry.Config{ServiceName: "my-orchestrator", Prometheus: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer func() { _ = tel.Shutdown(context.Background()) }()

	mux := http.NewServeMux()
	mux.Handle("GET /metrics", tel.MetricsHandler())
	mux.Handle("/a2a", tel.Handler(http.NotFoundHandler(), "A2A")) // traced only when an OTLP endpoint is set
	_ = &http.Client{Transport: tel.Transport(http.DefaultTransport)}

	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output: 200
}

// Records logged within a traced operation carry its trace_id and
// span_id; others are left as they are.
func ExampleLogHandler() {
	log := slog.New(telemetry.LogHandler(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime})))
	log.InfoContext(context.Background(), "no span here")
	// Output: level=INFO msg="no span here"
}

// noTime drops the time from the examples' log records, to keep their
// output stable.
func noTime(_ []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// A program routes what its libraries log on their own into its logger
// once it has one, before it uses gRPC.
func ExampleRouteProcessLogs() {
	telemetry.RouteProcessLogs(slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime})))
	grpclog.Warningf("transport: %s", "closing")   // as grpc-go logs
	slog.Info("some transports failed to connect") // as a2a-go's client logs
	// Output:
	// level=WARN msg="transport: closing" component=grpc
	// level=INFO msg="some transports failed to connect"
}

// Middleware outside Handler, an access log say, learns the trace of the
// server span Handler starts for a request.
func ExampleWithSpanNote() {
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tel := telemetry.WithProviders(tp, nil)
	traced := tel.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), "api")
	accessLog := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var span trace.SpanContext
		traced.ServeHTTP(w, r.WithContext(telemetry.WithSpanNote(r.Context(), &span)))
		fmt.Println("traced:", span.HasTraceID())
	})
	accessLog.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/v1/agents", nil))
	// Output: traced: true
}
