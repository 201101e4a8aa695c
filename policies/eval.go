package policies

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"

	"github.com/orchd/orchd/registry"
)

// Result is the outcome of evaluating a set against candidates: every
// candidate's decision, allowed ones first in order of preference.
type Result struct {
	// Decisions lists allowed candidates by rank (highest first, ties by
	// id), then refused ones by id.
	Decisions []Decision `json:"decisions"`
	// Winner is the id of the preferred allowed candidate, or "" when
	// none is allowed.
	Winner string `json:"winner"`
	// PolicySet is the digest of the set that decided.
	PolicySet string `json:"policySet"`
}

// Decision is one candidate's verdict and its explanation.
type Decision struct {
	// Agent is the candidate's id.
	Agent string `json:"agent"`
	// Allowed is true when every policy allows the candidate.
	Allowed bool `json:"allowed"`
	// Rank is the sum of the candidate's matching rank rules.
	Rank float64 `json:"rank"`
	// Reasons says why a refused candidate was refused, one entry per
	// matching deny rule, failed rule or default-deny policy.
	Reasons []string `json:"reasons,omitempty"`
	// Rules explains every rule (and policy default) for this candidate.
	Rules []RuleResult `json:"rules"`
}

// RuleResult explains one rule, or one policy's default or when, for one
// candidate.
type RuleResult struct {
	// Policy names the rule's policy.
	Policy string `json:"policy"`
	// Rule names the rule; it is empty for a policy-level entry.
	Rule string `json:"rule,omitempty"`
	// Kind is allow, deny, rank, or for policy-level entries when or
	// default.
	Kind string `json:"kind"`
	// Applied is false when the rule's (or policy's) when was false.
	Applied bool `json:"applied"`
	// Matched is true when an allow or deny expression held, when a rank
	// rule applied and gave its rank, or when a policy's default decided.
	Matched bool `json:"matched"`
	// Rank is what a matched rank rule contributed; it is absent when zero,
	// and always for a rule that did not match.
	Rank float64 `json:"rank,omitempty"`
	// Reason is the reason of a matching allow or deny, or of a default.
	Reason string `json:"reason,omitempty"`
	// Error is set when evaluating the rule failed; the candidate is then
	// refused.
	Error string `json:"error,omitempty"`
}

// activation binds the policy variables for one candidate. One activation
// serves a whole Evaluate call; only agent changes between candidates.
type activation struct {
	// agent is the candidate wrapped as a CEL value once, so member
	// functions called on it do not wrap it again.
	agent   ref.Val
	request *Request
	chain   *Chain
	caller  *Caller
	now     ref.Val
}

func (a *activation) ResolveName(name string) (any, bool) {
	switch name {
	case "agent":
		return a.agent, a.agent != nil
	case "request":
		return a.request, true
	case "chain":
		return a.chain, true
	case "caller":
		return a.caller, true
	case "now":
		return a.now, true
	}
	return nil, false
}

func (a *activation) Parent() interpreter.Activation { return nil }

// deadlineFreeCandidates is how many candidates a set without tracked
// programs evaluates before the timeout is checked at all.
const deadlineFreeCandidates = 64

// requestValue is a per-request program's outcome.
type requestValue struct {
	val ref.Val
	err error
}

// evaluation is the state of one Evaluate call. Evaluations are pooled:
// the per-call state would otherwise cost more allocations than a small
// policy costs to evaluate.
type evaluation struct {
	in  Input
	set *Set
	// ctx interrupts tracked programs; deadline bounds the whole call.
	ctx      context.Context
	deadline time.Time
	act      activation
	// frame runs the untracked programs over act: one frame serves the
	// whole call instead of one per expression evaluated.
	frame    *interpreter.ExecutionFrame
	perReq   []requestValue
	timedOut bool
	explain  bool
}

// Evaluate decides every candidate under the set's policies and explains
// each decision rule by rule. It never fails: an expression that errs,
// exceeds the cost limit or runs past the timeout refuses the candidate
// with a reason saying so. Candidates must have profiles.
func (s *Set) Evaluate(ctx context.Context, candidates []*registry.Agent, in Input) *Result {
	return s.evaluate(ctx, candidates, in, true)
}

// Choose is Evaluate without the rule-by-rule explanation: decisions keep
// their rank and the reasons for every refusal, and Rules is nil. It is
// the form for delegating, where only the outcome is needed.
func (s *Set) Choose(ctx context.Context, candidates []*registry.Agent, in Input) *Result {
	return s.evaluate(ctx, candidates, in, false)
}

func (s *Set) evaluate(ctx context.Context, candidates []*registry.Agent, in Input, explain bool) *Result {
	if in.Now.IsZero() {
		in.Now = time.Now()
	}
	// Untracked programs cannot loop, so a short candidate list cannot run
	// long; reading the clock costs more than evaluating a small policy.
	var deadline time.Time
	if s.tracked || len(candidates) > deadlineFreeCandidates {
		deadline = time.Now().Add(s.opts.Timeout)
	}
	if s.tracked {
		// Only programs with comprehensions can run long enough to need
		// interrupting; creating a deadline context costs more than
		// evaluating a simple policy.
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	ev := evaluations.Get().(*evaluation)
	defer ev.release()
	ev.in, ev.set, ev.ctx, ev.deadline, ev.timedOut, ev.explain = in, s, ctx, deadline, false, explain
	ev.act = activation{request: &ev.in.Request, chain: &ev.in.Chain, caller: &ev.in.Caller}
	if s.readsNow {
		ev.act.now = types.Timestamp{Time: in.Now}
	}
	// An activation (unlike a map) never fails to make a frame.
	ev.frame, _ = interpreter.NewExecutionFrame(&ev.act)
	ev.perReq = slices.Grow(ev.perReq[:0], len(s.requestPrograms))[:len(s.requestPrograms)]
	for i, p := range s.requestPrograms {
		ev.perReq[i].val, ev.perReq[i].err = ev.run(p)
	}

	res := newResult(s.digest, len(candidates))
	var backing []RuleResult
	if explain {
		backing = make([]RuleResult, 0, len(candidates)*s.nResults)
	}
	for i, a := range candidates {
		d := &res.Decisions[i]
		d.Agent = a.ID
		if explain {
			d.Rules = backing[len(backing) : len(backing) : len(backing)+s.nResults]
		}
		ev.decide(i, a, d)
		backing = backing[:len(backing)+len(d.Rules)]
	}
	slices.SortFunc(res.Decisions, func(a, b Decision) int {
		switch {
		case a.Allowed != b.Allowed:
			if a.Allowed {
				return -1
			}
			return 1
		case a.Allowed && a.Rank != b.Rank:
			return cmp.Compare(b.Rank, a.Rank)
		}
		return strings.Compare(a.Agent, b.Agent)
	})
	if len(res.Decisions) > 0 && res.Decisions[0].Allowed {
		res.Winner = res.Decisions[0].Agent
	}
	return res
}

// newResult returns a result with n decisions. A result of one decision,
// the common case of a delegation pinned to an agent, is made in one
// allocation.
func newResult(digest string, n int) *Result {
	if n == 1 {
		one := &struct {
			res Result
			d   [1]Decision
		}{}
		one.res = Result{PolicySet: digest, Decisions: one.d[:]}
		return &one.res
	}
	return &Result{PolicySet: digest, Decisions: make([]Decision, n)}
}

var evaluations = sync.Pool{New: func() any { return new(evaluation) }}

// release clears what the evaluation refers to and returns it to the pool.
func (ev *evaluation) release() {
	if ev.frame != nil {
		ev.frame.Close()
	}
	clear(ev.perReq)
	perReq := ev.perReq
	*ev = evaluation{perReq: perReq[:0]}
	evaluations.Put(ev)
}

// decide evaluates every policy for the i-th candidate.
func (ev *evaluation) decide(i int, a *registry.Agent, d *Decision) {
	ev.act.agent = ev.set.agents.value(ev.set.adapter, a)
	d.Allowed = true
	refuse := func(reason string) {
		d.Allowed = false
		d.Reasons = append(d.Reasons, reason)
	}
	if !ev.timedOut && ev.checkDeadline(i) && (ev.ctx.Err() != nil || time.Now().After(ev.deadline)) {
		ev.timedOut = true
	}
	if ev.timedOut {
		refuse(fmt.Sprintf("policy evaluation timed out after %s", ev.set.opts.Timeout))
		return
	}
	for _, p := range ev.set.policies {
		if p.when != nil {
			ok, err := ev.boolean(p.when)
			if err != nil {
				ev.note(d, RuleResult{Policy: p.name, Kind: "when", Error: err.Error()})
				refuse(fmt.Sprintf("policy %q: when failed: %v", p.name, err))
				continue
			}
			if !ok {
				ev.note(d, RuleResult{Policy: p.name, Kind: "when"})
				continue
			}
		}
		allowed, denied := false, false
		for _, r := range p.rules {
			o := ev.rule(r)
			switch {
			case o.err != nil:
				denied = true
				refuse(fmt.Sprintf("policy %q rule %q failed: %v", p.name, r.name, o.err))
			case o.matched && r.kind == kindDeny:
				denied = true
				refuse(o.reason)
			case o.matched && r.kind == kindAllow:
				allowed = true
			}
			d.Rank += o.rank
			if ev.explain {
				rr := RuleResult{Policy: p.name, Rule: r.name, Kind: r.kind.String(), Applied: o.applied,
					Matched: o.matched, Rank: o.rank, Reason: o.reason}
				if o.err != nil {
					rr.Error = o.err.Error()
				}
				d.Rules = append(d.Rules, rr)
			}
		}
		if !allowed && !denied {
			if !p.defaultAllow {
				refuse(p.defaultReason)
			}
			ev.note(d, RuleResult{Policy: p.name, Kind: "default", Applied: true, Matched: true, Reason: p.defaultReason})
		}
	}
	if !d.Allowed {
		d.Rank = 0
	}
}

// checkDeadline reports whether the clock is read before the i-th
// candidate. A set with tracked programs reads it before every candidate;
// a set without them reads it before every deadlineFreeCandidates-th, as
// many as such a set evaluates without reading it at all.
func (ev *evaluation) checkDeadline(i int) bool {
	if ev.deadline.IsZero() {
		return false
	}
	return ev.set.tracked || i%deadlineFreeCandidates == 0
}

// note records one rule's explanation when the caller asked for them.
func (ev *evaluation) note(d *Decision, rr RuleResult) {
	if ev.explain {
		d.Rules = append(d.Rules, rr)
	}
}

// ruleOutcome is what one rule decided for one candidate: the parts of a
// RuleResult that the decision needs, so that an evaluation that explains
// nothing builds no RuleResult.
type ruleOutcome struct {
	// applied is false when the rule's when was false.
	applied, matched bool
	rank             float64
	reason           string
	err              error
}

// rule evaluates one rule.
func (ev *evaluation) rule(r *rule) ruleOutcome {
	o := ruleOutcome{applied: true}
	if r.when != nil {
		ok, err := ev.boolean(r.when)
		if err != nil {
			o.err = fmt.Errorf("when: %w", err)
			return o
		}
		if !ok {
			o.applied = false
			return o
		}
	}
	if r.kind == kindRank {
		v, err := ev.run(r.body)
		if err != nil {
			o.err = err
			return o
		}
		switch n := v.(type) {
		case types.Int:
			o.rank = float64(n)
		case types.Uint:
			o.rank = float64(n)
		case types.Double:
			o.rank = float64(n)
		default:
			o.err = fmt.Errorf("rank is %s, not a number", v.Type().TypeName())
			return o
		}
		o.matched = true
		return o
	}
	ok, err := ev.boolean(r.body)
	if err != nil || !ok {
		o.err = err
		return o
	}
	o.matched = true
	o.reason = r.reason
	if r.reasonExpr != nil {
		v, err := ev.run(r.reasonExpr)
		if err != nil {
			o.err = fmt.Errorf("reasonExpression: %w", err)
			return o
		}
		s, isStr := v.(types.String)
		if !isStr {
			o.err = fmt.Errorf("reasonExpression is %s, not a string", v.Type().TypeName())
			return o
		}
		o.reason = string(s)
	}
	return o
}

func (ev *evaluation) boolean(p *program) (bool, error) { return asBool(ev.run(p)) }

// run evaluates a program for the current candidate, or returns its
// per-request value.
func (ev *evaluation) run(p *program) (ref.Val, error) {
	if p.perRequest && ev.perReq != nil && ev.act.agent != nil {
		r := ev.perReq[p.slot]
		return r.val, r.err
	}
	var (
		v   ref.Val
		err error
	)
	if !p.tracked && ev.frame != nil {
		// An untracked program has no cost tracker or interrupt to set up,
		// so it runs in the call's frame.
		v, _, err = p.prg.Eval(ev.frame)
		v, err = evalResult(ev.ctx, v, err, ev.set.opts)
	} else {
		v, err = evalProgram(ev.ctx, p, &ev.act, ev.set.opts)
	}
	if err != nil && errors.Is(err, errTimedOut) {
		ev.timedOut = true
	}
	return v, err
}

// errTimedOut marks an evaluation that ran out of Options.Timeout.
var errTimedOut = errors.New("timed out")

// evalProgram runs p over act, bounded by ctx when p is cost-tracked, and
// rewords cel-go's errors for the limits orchd sets (errTimedOut for the
// timeout).
func evalProgram(ctx context.Context, p *program, act interpreter.Activation, opts Options) (ref.Val, error) {
	var (
		v   ref.Val
		err error
	)
	if p.tracked {
		v, _, err = p.prg.ContextEval(ctx, act)
	} else {
		v, _, err = p.prg.Eval(act)
	}
	return evalResult(ctx, v, err, opts)
}

// evalResult is a program's outcome, with cel-go's errors for the limits
// orchd sets reworded (see evalProgram).
func evalResult(ctx context.Context, v ref.Val, err error, opts Options) (ref.Val, error) {
	if err == nil {
		return v, nil
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "cost limit exceeded"):
		return nil, fmt.Errorf("exceeded the cost limit of %d", opts.CostLimit)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || strings.Contains(msg, "operation interrupted"):
		return nil, fmt.Errorf("%w after %s", errTimedOut, opts.Timeout)
	}
	return nil, err
}

// asBool is an expression's value as a bool, or why it is not one.
func asBool(v ref.Val, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	b, ok := v.(types.Bool)
	if !ok {
		return false, fmt.Errorf("expression is %s, not a bool", v.Type().TypeName())
	}
	return bool(b), nil
}
