package registry

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// counts reads the counter name from reader, keyed by its attributes
// written as "k=v,k=v".
func counts(t *testing.T, reader *sdkmetric.ManualReader, name string) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				key := ""
				for i, kv := range dp.Attributes.ToSlice() {
					if i > 0 {
						key += ","
					}
					key += string(kv.Key) + "=" + kv.Value.String()
				}
				out[key] += dp.Value
			}
		}
	}
	return out
}

func TestTelemetry_CardCacheAndFetches(t *testing.T) {
	t.Parallel()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	clk := newClock()
	s := newCardServer(t, card("Counted", `"streaming":true`))
	s.set(func(s *cardServer) { s.cacheControl = "max-age=60" })
	r := newTestRegistry(t, Config{Now: clk.Now, TracerProvider: tp, MeterProvider: mp})

	ctx, parent := tp.Tracer("test").Start(t.Context(), "caller")
	if _, err := r.Add(ctx, Spec{ID: "c", URL: s.URL}); err != nil {
		t.Fatal(err)
	}
	parent.End()
	if _, err := r.Refresh(t.Context(), "c"); err != nil { // 304: same card
		t.Fatal(err)
	}
	s.set(func(s *cardServer) { s.status = http.StatusServiceUnavailable })
	if _, err := r.Refresh(t.Context(), "c"); err == nil {
		t.Fatal("refresh against a 503 succeeded")
	}
	a, _ := r.Get("c")
	r.RecordUse(t.Context(), []*Agent{a}) // fresh: a hit
	clk.Advance(2 * time.Minute)
	r.RecordUse(t.Context(), []*Agent{a}) // expired: stale

	want := map[string]int64{"result=miss": 1, "result=stale": 2, "result=hit": 1}
	if got := counts(t, reader, "orchd.registry.card.cache"); !equal(got, want) {
		t.Errorf("card cache counts %v, want %v", got, want)
	}
	want = map[string]int64{"kind=initial,outcome=fetched": 1, "kind=revalidation,outcome=not_modified": 1, "kind=revalidation,outcome=error": 1}
	if got := counts(t, reader, "orchd.registry.card.fetches"); !equal(got, want) {
		t.Errorf("fetch counts %v, want %v", got, want)
	}

	spans := rec.Ended()
	if len(spans) != 4 { // caller + three fetches
		t.Fatalf("%d spans, want 4", len(spans))
	}
	first := spans[0]
	if first.Name() != "registry.fetch_card" || first.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("first fetch span %q is not the caller's child", first.Name())
	}
	var outcomes []string
	for _, sp := range spans {
		if sp.Name() != "registry.fetch_card" {
			continue
		}
		for _, kv := range sp.Attributes() {
			if kv.Key == attribute.Key("orchd.card.outcome") {
				outcomes = append(outcomes, kv.Value.AsString())
			}
		}
	}
	if diff := cmp.Diff([]string{"fetched", "not_modified", "error"}, outcomes); diff != "" {
		t.Errorf("fetch span outcomes (-want +got):\n%s", diff)
	}
}

func equal(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
