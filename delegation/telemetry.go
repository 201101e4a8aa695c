package delegation

import (
	"context"
	"errors"
	"sync"
	"time"

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
	tracer trace.Tracer
	// tracing is false for a no-op tracer provider: spans are then not
	// started at all, sparing a context per span.
	tracing     bool
	delegations metric.Int64Counter
	ended       metric.Int64Counter
	refusals    metric.Int64Counter
	decisions   metric.Int64Counter
	signals     metric.Int64Counter
	inflight    metric.Int64UpDownCounter
	downstream  metric.Float64Histogram
	// containments counts agents contained and released; heldBack the
	// delegations stopped for a containment, by outcome.
	containments metric.Int64Counter
	heldBack     metric.Int64Counter
	// observe, when set, is also told of every call's outcome (see
	// Engine.observe).
	observe func(ctx context.Context, agent string, err error)

	// Attribute sets are built once per distinct value: building one per
	// measurement would allocate on every delegation.
	one    attrCache[[2]string]    // a single attribute: key, value
	calls  attrCache[callLabels]   // downstream calls
	rules  attrCache[ruleLabels]   // policy rules
	steers attrCache[signalLabels] // steering signals
}

// signalLabels are the attributes of orchd.steering.signals; reason is
// left out when empty.
type signalLabels struct{ control, outcome, reason string }

// callLabels are the attributes of orchd.downstream.duration.
type callLabels struct{ agent, method, outcome string }

// ruleLabels are the attributes of orchd.policy.decisions.
type ruleLabels struct{ policy, rule, kind string }

// attrCache keeps the measurement options of each distinct attribute
// combination, up to maxAttrSets of them; past that it builds them anew.
type attrCache[K comparable] struct {
	mu   sync.RWMutex
	m    map[K]measure
	make func(K) []attribute.KeyValue
}

// measure is an attribute set as the options of an Add and of a Record,
// kept in slices that a measurement passes on as they are: a single
// option passed to the instrument's interface method would be put in a
// new slice every time.
type measure struct {
	add    []metric.AddOption
	record []metric.RecordOption
}

const maxAttrSets = 4096

func (c *attrCache[K]) get(k K) measure {
	c.mu.RLock()
	o, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return o
	}
	opt := metric.WithAttributeSet(attribute.NewSet(c.make(k)...))
	o = measure{add: []metric.AddOption{opt}, record: []metric.RecordOption{opt}}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[K]measure{}
	}
	if len(c.m) < maxAttrSets {
		c.m[k] = o
	}
	c.mu.Unlock()
	return o
}

// attr is the options for one attribute key=value.
func (ins *instruments) attr(key, value string) measure {
	return ins.one.get([2]string{key, value})
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
	_, noop := tp.(tracenoop.TracerProvider)
	ins := &instruments{tracer: tp.Tracer(instrumentation), tracing: !noop}
	ins.one.make = func(kv [2]string) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String(kv[0], kv[1])}
	}
	ins.calls.make = func(l callLabels) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("agent", l.agent), attribute.String("method", l.method), attribute.String("outcome", l.outcome)}
	}
	ins.steers.make = func(l signalLabels) []attribute.KeyValue {
		kvs := []attribute.KeyValue{attribute.String("control", l.control), attribute.String("outcome", l.outcome)}
		if l.reason != "" {
			kvs = append(kvs, attribute.String("reason", l.reason))
		}
		return kvs
	}
	ins.rules.make = func(l ruleLabels) []attribute.KeyValue {
		return []attribute.KeyValue{attribute.String("policy", l.policy), attribute.String("rule", l.rule), attribute.String("kind", l.kind)}
	}
	ins.delegations, _ = m.Int64Counter("orchd.delegations",
		metric.WithDescription("Delegation requests by outcome: accepted, refused (before anything was sent), failed (no agent accepted) or invalid."))
	ins.ended, _ = m.Int64Counter("orchd.delegations.ended",
		metric.WithDescription("Accepted delegations that ended, by final state."))
	ins.refusals, _ = m.Int64Counter("orchd.delegation.refusals",
		metric.WithDescription("Refusals by reason: cycle, protocol, capability, unhealthy, contained, policy, depth, deadline, unknown_agent, no_candidates, one per refused candidate; max_running, max_running_per_caller, open_files, one per request over a limit (nothing was sent)."))
	ins.decisions, _ = m.Int64Counter("orchd.policy.decisions",
		metric.WithDescription("Policy rules that had a say in a candidate's decision (an allow or deny that matched, a rank rule that moved the rank, a default that decided), by policy, rule and kind."))
	ins.signals, _ = m.Int64Counter("orchd.steering.signals",
		metric.WithDescription("Steers and interrupts by control and outcome (routed or refused) with the reason for refusals."))
	ins.inflight, _ = m.Int64UpDownCounter("orchd.delegations.inflight",
		metric.WithDescription("Accepted delegations that have not ended."))
	ins.downstream, _ = m.Float64Histogram("orchd.downstream.duration", metric.WithUnit("s"),
		metric.WithDescription("A2A calls to agents by agent, method and outcome: the whole call, or until the first event of a stream."))
	ins.containments, _ = m.Int64Counter("orchd.agent.containments",
		metric.WithDescription("Agents contained or released, by action (contain, release), counted by the process that kept the change."))
	ins.heldBack, _ = m.Int64Counter("orchd.delegations.contained",
		metric.WithDescription("Running delegations stopped because an agent they reach was contained, by outcome: interrupted, canceled, waiting (left waiting for input), failed (the cancel failed)."))
	return ins
}

// start starts a span named name, or returns ctx and a span that records
// nothing when tracing is off.
func (ins *instruments) start(ctx context.Context, name string) (context.Context, trace.Span) {
	if !ins.tracing {
		return ctx, tracenoop.Span{}
	}
	return ins.tracer.Start(ctx, name)
}

// refusalReason classifies an error that refused a request outright.
func refusalReason(err error) string {
	var limit *LimitError
	switch {
	case errors.As(err, &limit):
		return limit.reason()
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
func (ins *instruments) outcome(ctx context.Context, span trace.Span, dec *Decision, err error) {
	outcome := "accepted"
	var refused *RefusedError
	switch {
	case err == nil: // before errors.As, whose targets escape
	case errors.As(err, &refused):
		outcome = refusedOutcome
		if len(refused.Decision.Candidates) == 0 {
			ins.refusals.Add(ctx, 1, ins.attr("reason", refusedNoAgent).add...)
		}
	case refusalReason(err) != "":
		outcome = refusedOutcome
		ins.refusals.Add(ctx, 1, ins.attr("reason", refusalReason(err)).add...)
	case errors.As(err, new(*FailedError)):
		outcome = "failed"
	case err != nil:
		outcome = "invalid"
	}
	ins.delegations.Add(ctx, 1, ins.attr("outcome", outcome).add...)
	defer span.End()
	if !span.IsRecording() {
		return
	}
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
	return r.Matched && (r.Kind != "rank" || r.Rank != 0)
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
func (ins *instruments) decided(ctx context.Context, prefiltered []string, res *policies.Result) {
	for _, reason := range prefiltered {
		ins.refusals.Add(ctx, 1, ins.attr("reason", reason).add...)
	}
	for _, pd := range res.Decisions {
		if !pd.Allowed {
			ins.refusals.Add(ctx, 1, ins.attr("reason", refusedPolicy).add...)
		}
		for _, r := range pd.Rules {
			if decided(r) {
				ins.decisions.Add(ctx, 1, ins.rules.get(ruleLabels{r.Policy, ruleName(r), r.Kind}).add...)
			}
		}
	}
}

// steered records a steer or interrupt on its span and metrics.
func (ins *instruments) steered(ctx context.Context, span trace.Span, c steering.Control, err error) {
	outcome, reason := "routed", ""
	var refused refusedSignalError
	if err != nil {
		outcome = refusedOutcome
		switch {
		case errors.Is(err, ErrNotFound):
			reason = "not_found"
		case errors.Is(err, ErrEnded):
			reason = "ended"
		case errors.Is(err, ErrBadRequest):
			reason = "bad_request"
		case errors.As(err, &refused) && refused.notAdvertised:
			reason = "mode_not_advertised"
		case errors.Is(err, ErrNotSteerable):
			reason = "not_working"
		default:
			reason = "hop_refused"
		}
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	ins.signals.Add(ctx, 1, ins.steers.get(signalLabels{string(c), outcome, reason}).add...)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("orchd.outcome", outcome), attribute.String("orchd.reason", reason))
	}
	span.End()
}

// called records one A2A call to an agent that started at start: a unary
// call whole, a stream until its first event. It is where every call's
// outcome is seen, so it also hands it to observe.
func (ins *instruments) called(ctx context.Context, agent, method string, start time.Time, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "error"
	}
	ins.downstream.Record(ctx, time.Since(start).Seconds(), ins.calls.get(callLabels{agent, method, outcome}).record...)
	if ins.observe != nil {
		ins.observe(ctx, agent, err)
	}
}
