package delegation

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/steering"
)

// instrumentation is the import path spans and metrics are recorded under.
const instrumentation = "github.com/orchd/orchd/delegation"

// Refusal reasons, as counted by orchd.delegation.refusals.
const (
	refusedCycle      = "cycle"
	refusedProtocol   = "protocol"
	refusedCapability = "capability"
	refusedPolicy     = "policy"
	refusedDepth      = "depth"
	refusedDeadline   = "deadline"
	refusedUnknown    = "unknown_agent"
	refusedNoAgent    = "no_candidates"
)

// instruments are the engine's spans and metrics. From no-op providers
// they cost next to nothing.
type instruments struct {
	tracer      trace.Tracer
	delegations metric.Int64Counter
	ended       metric.Int64Counter
	refusals    metric.Int64Counter
	rules       metric.Int64Counter
	signals     metric.Int64Counter
	inflight    metric.Int64UpDownCounter
	downstream  metric.Float64Histogram
}

func newInstruments(tp trace.TracerProvider, mp metric.MeterProvider) *instruments {
	if tp == nil {
		tp = tracenoop.NewTracerProvider()
	}
	if mp == nil {
		mp = metricnoop.NewMeterProvider()
	}
	m := mp.Meter(instrumentation)
	// Instrument constructors fail only for invalid names; these are
	// constant and valid, and on error they still return usable no-ops.
	in := &instruments{tracer: tp.Tracer(instrumentation)}
	in.delegations, _ = m.Int64Counter("orchd.delegations",
		metric.WithDescription("Delegation requests by outcome: accepted, refused (before anything was sent), failed (no agent accepted) or invalid."))
	in.ended, _ = m.Int64Counter("orchd.delegations.ended",
		metric.WithDescription("Accepted delegations that ended, by final state."))
	in.refusals, _ = m.Int64Counter("orchd.delegation.refusals",
		metric.WithDescription("Refusals by reason: cycle, protocol, capability, policy, depth, deadline, unknown_agent, no_candidates; one per refused candidate."))
	in.rules, _ = m.Int64Counter("orchd.policy.decisions",
		metric.WithDescription("Policy rules that had a say in a candidate's decision (an allow or deny that matched, a rank rule that moved the rank, a default that decided), by policy, rule and kind."))
	in.signals, _ = m.Int64Counter("orchd.steering.signals",
		metric.WithDescription("Steers and interrupts by control and outcome (routed or refused) with the reason for refusals."))
	in.inflight, _ = m.Int64UpDownCounter("orchd.delegations.inflight",
		metric.WithDescription("Accepted delegations that have not ended."))
	in.downstream, _ = m.Float64Histogram("orchd.downstream.duration", metric.WithUnit("s"),
		metric.WithDescription("A2A calls to agents by agent, method and outcome: the whole call, or until the first event of a stream."))
	return in
}

// refusalReason classifies an error that refused a request outright.
func refusalReason(err error) string {
	switch {
	case errors.Is(err, ErrCycle):
		return refusedCycle
	case errors.Is(err, ErrTooDeep):
		return refusedDepth
	case errors.Is(err, ErrDeadline):
		return refusedDeadline
	case errors.Is(err, ErrUnknownAgent):
		return refusedUnknown
	}
	return ""
}

// outcome records how a Delegate call ended on its span and metrics.
func (in *instruments) outcome(ctx context.Context, span trace.Span, dec *Decision, err error) {
	outcome := "accepted"
	var refused *RefusedError
	switch {
	case errors.As(err, &refused):
		outcome = refusedOutcome
		if len(refused.Decision.Candidates) == 0 {
			in.refusals.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", refusedNoAgent)))
		}
	case refusalReason(err) != "":
		outcome = refusedOutcome
		in.refusals.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", refusalReason(err))))
	case errors.As(err, new(*FailedError)):
		outcome = "failed"
	case err != nil:
		outcome = "invalid"
	}
	in.delegations.Add(ctx, 1, metric.WithAttributes(attribute.String("outcome", outcome)))
	span.SetAttributes(attribute.String("orchd.outcome", outcome))
	if dec != nil {
		span.SetAttributes(attribute.Int("orchd.candidates", len(dec.Candidates)), attribute.String("orchd.chosen", dec.Chosen))
		if rules := decidingRules(dec); len(rules) > 0 {
			span.SetAttributes(attribute.StringSlice("orchd.policy.rules", rules))
		}
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

const refusedOutcome = "refused"

// decidingRules names the policy rules that matched the chosen agent, or,
// when none was chosen, those that refused the candidates.
func decidingRules(dec *Decision) []string {
	var out []string
	for _, pd := range dec.Policy {
		if dec.Chosen != "" && pd.Agent != dec.Chosen {
			continue
		}
		for _, r := range pd.Rules {
			if decided(r) && (dec.Chosen != "" || r.Kind == "deny") {
				out = append(out, r.Policy+"/"+ruleName(r))
			}
		}
	}
	return out
}

// decided reports whether a rule had a say in a candidate's decision: an
// allow or deny that matched, a default that decided, or a rank rule that
// moved the rank.
func decided(r policies.RuleResult) bool {
	return r.Matched || (r.Kind == "rank" && r.Applied && r.Rank != 0)
}

// ruleName names a rule result; a policy's default decision has no rule
// name and is called by its kind.
func ruleName(r policies.RuleResult) string {
	if r.Rule == "" {
		return r.Kind
	}
	return r.Rule
}

// decided counts the candidates refused before the policies ran (by
// reason) and every rule that matched a candidate.
func (in *instruments) decided(ctx context.Context, prefiltered []string, res *policies.Result) {
	for _, reason := range prefiltered {
		in.refusals.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
	}
	for _, pd := range res.Decisions {
		if !pd.Allowed {
			in.refusals.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", refusedPolicy)))
		}
		for _, r := range pd.Rules {
			if decided(r) {
				in.rules.Add(ctx, 1, metric.WithAttributes(attribute.String("policy", r.Policy),
					attribute.String("rule", ruleName(r)), attribute.String("kind", r.Kind)))
			}
		}
	}
}

// steered records a steer or interrupt on its span and metrics.
func (in *instruments) steered(ctx context.Context, span trace.Span, c steering.Control, err error) {
	outcome, reason := "routed", ""
	if err != nil {
		outcome = refusedOutcome
		switch {
		case errors.Is(err, ErrNotFound):
			reason = "not_found"
		case errors.Is(err, ErrEnded):
			reason = "ended"
		case errors.Is(err, ErrBadRequest):
			reason = "bad_request"
		case errors.Is(err, ErrNotSteerable) && strings.Contains(err.Error(), "does not advertise"):
			reason = "mode_not_advertised"
		case errors.Is(err, ErrNotSteerable):
			reason = "not_working"
		default:
			reason = "hop_refused"
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	attrs := []attribute.KeyValue{attribute.String("control", string(c)), attribute.String("outcome", outcome)}
	if reason != "" {
		attrs = append(attrs, attribute.String("reason", reason))
	}
	span.SetAttributes(attribute.String("orchd.outcome", outcome), attribute.String("orchd.reason", reason))
	span.End()
	in.signals.Add(ctx, 1, metric.WithAttributes(attrs...))
}

// callTimer is an a2a-go client interceptor measuring the calls to one
// agent: unary calls whole, streams until their first event.
type callTimer struct {
	a2aclient.PassthroughInterceptor
	in    *instruments
	agent string
}

type callStartKey struct{}

type callStart struct {
	at   time.Time
	done atomic.Bool
}

func (t callTimer) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	return context.WithValue(ctx, callStartKey{}, &callStart{at: time.Now()}), nil, nil
}

func (t callTimer) After(ctx context.Context, resp *a2aclient.Response) error {
	cs, ok := ctx.Value(callStartKey{}).(*callStart)
	if !ok || cs.done.Swap(true) {
		return nil
	}
	outcome := "ok"
	if resp.Err != nil {
		outcome = "error"
	}
	t.in.downstream.Record(ctx, time.Since(cs.at).Seconds(), metric.WithAttributes(attribute.String("agent", t.agent),
		attribute.String("method", resp.Method), attribute.String("outcome", outcome)))
	return nil
}
