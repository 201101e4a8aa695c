package registry

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// instrumentation is the import path spans and metrics are recorded under.
const instrumentation = "github.com/orchd/orchd/registry"

// instruments are the registry's spans and metrics. From no-op providers
// they cost next to nothing.
type instruments struct {
	tracer  trace.Tracer
	cache   metric.Int64Counter
	fetches metric.Int64Counter
	latency metric.Float64Histogram
}

// Cache results counted by orchd.registry.card.cache.
var (
	cacheHit   = metric.WithAttributes(attribute.String("result", "hit"))
	cacheMiss  = metric.WithAttributes(attribute.String("result", "miss"))
	cacheStale = metric.WithAttributes(attribute.String("result", "stale"))
)

func newInstruments(tp trace.TracerProvider, mp metric.MeterProvider) instruments {
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter(instrumentation)
	// Instrument constructors fail only for invalid names; these are
	// constant and valid, and on error they still return usable no-ops.
	cache, _ := m.Int64Counter("orchd.registry.card.cache",
		metric.WithDescription("Cards served by the cache: hit (fresh), stale (expired, or kept after a failed refresh), miss (none cached: fetched)."))
	fetches, _ := m.Int64Counter("orchd.registry.card.fetches",
		metric.WithDescription("Card fetches by kind (initial or revalidation) and outcome (fetched, not_modified, error)."))
	latency, _ := m.Float64Histogram("orchd.registry.card.fetch.duration", metric.WithUnit("s"),
		metric.WithDescription("Card fetch latency by kind and outcome."))
	return instruments{tracer: tp.Tracer(instrumentation), cache: cache, fetches: fetches, latency: latency}
}

// fetchSpan starts the span of one card fetch under the caller's trace
// (parent) but the cache's own cancellation (ctx).
func (in instruments) fetchSpan(ctx, parent context.Context, base string, revalidation bool) (context.Context, trace.Span) {
	ctx = trace.ContextWithSpanContext(ctx, trace.SpanContextFromContext(parent))
	return in.tracer.Start(ctx, "registry.fetch_card", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("orchd.agent.url", base), attribute.Bool("orchd.card.revalidation", revalidation)))
}

// fetched records the outcome of one card fetch on its span and metrics.
func (in instruments) fetched(ctx context.Context, span trace.Span, start time.Time, revalidation, notModified bool, err error) {
	kind, outcome := "initial", "fetched"
	if revalidation {
		kind = "revalidation"
	}
	switch {
	case err != nil:
		outcome = "error"
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case notModified:
		outcome = "not_modified"
	}
	span.SetAttributes(attribute.String("orchd.card.outcome", outcome))
	span.End()
	attrs := metric.WithAttributes(attribute.String("kind", kind), attribute.String("outcome", outcome))
	in.fetches.Add(ctx, 1, attrs)
	in.latency.Record(ctx, time.Since(start).Seconds(), attrs)
}

// RecordUse counts cards the cache served to a caller that used them, such
// as the candidates of a delegation: fresh ones as hits, expired ones (in
// use while the refresher revalidates them) as stale.
func (r *Registry) RecordUse(ctx context.Context, agents []*Agent) {
	now := r.cfg.Now()
	fresh := 0
	for _, a := range agents {
		if now.Before(a.ExpiresAt) {
			fresh++
		}
	}
	if fresh > 0 {
		r.cache.in.cache.Add(ctx, int64(fresh), cacheHit)
	}
	if stale := len(agents) - fresh; stale > 0 {
		r.cache.in.cache.Add(ctx, int64(stale), cacheStale)
	}
}
