package policies

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
	"cel.dev/cel-go/interpreter"
)

// Authorize decides whether the caller may do the action to the resource
// under the set's authorization policies: a matching deny rule in any
// policy denies; otherwise a matching allow rule in any policy allows;
// otherwise the request is denied. It never fails: an unknown action, or a
// rule that errs, exceeds the cost limit or runs past the timeout, denies
// with a reason saying so (a failing allow rule only allows nothing). It
// stops at the first rule that decides and leaves Explain empty; it is
// safe for concurrent use.
func (s *Set) Authorize(in AuthzInput) AuthzDecision {
	return s.authorize(in, false)
}

// ExplainAuthorization is Authorize that evaluates every rule and lists
// each one's outcome in Explain, policy by policy as written. Its decision
// is always the one Authorize reaches.
func (s *Set) ExplainAuthorization(in AuthzInput) AuthzDecision {
	return s.authorize(in, true)
}

// authzActivation binds the authorization variables, each wrapped as a CEL
// value once per call.
type authzActivation struct {
	caller, action, resource, now ref.Val
}

func (a *authzActivation) ResolveName(name string) (any, bool) {
	switch name {
	case "caller":
		return a.caller, true
	case "action":
		return a.action, true
	case "resource":
		return a.resource, true
	case "now":
		return a.now, a.now != nil
	}
	return nil, false
}

func (a *authzActivation) Parent() interpreter.Activation { return nil }

// whenState caches a policy's when for one call.
type whenState uint8

const (
	whenUnknown whenState = iota
	whenTrue
	whenFalse
	whenFailed
)

// authzEval is the state of one authorization. They are pooled, so an
// authorization costs only the values it wraps.
type authzEval struct {
	in      AuthzInput
	set     *Set
	ctx     context.Context
	act     authzActivation
	when    []whenState
	whenErr []error
}

var authzEvals = sync.Pool{New: func() any { return new(authzEval) }}

// outcome is one rule's result.
type outcome struct {
	matched bool
	// applied is false when the rule's or its policy's when was false.
	applied bool
	reason  string
	err     error
}

func (s *Set) authorize(in AuthzInput, explain bool) AuthzDecision {
	dec := AuthzDecision{PolicySet: s.digest}
	action := slices.Index(actions, in.Action)
	if action < 0 {
		dec.Reason = fmt.Sprintf("unknown action %q", in.Action)
		return dec
	}
	if why := oversized(&in); why != "" {
		dec.Reason = "authorization input too large: " + why
		return dec
	}
	az := &s.authz
	if in.Now.IsZero() && az.readsNow {
		in.Now = time.Now()
	}
	ev := authzEvals.Get().(*authzEval)
	defer ev.release()
	ev.in, ev.set, ev.ctx = in, s, context.Background()
	if az.tracked {
		// Only programs whose cost is not bounded at load (over claims,
		// say) can run long enough to need interrupting.
		var cancel context.CancelFunc
		ev.ctx, cancel = context.WithTimeout(ev.ctx, s.opts.Timeout)
		defer cancel()
	}
	ev.act = authzActivation{
		caller:   nativeRef[Caller]{&ev.in.Caller},
		action:   actionValues[action],
		resource: nativeRef[Resource]{&ev.in.Resource},
	}
	if az.readsNow {
		ev.act.now = types.Timestamp{Time: in.Now}
	}
	n := len(az.policies)
	ev.when = append(ev.when[:0], make([]whenState, n)...)
	ev.whenErr = append(ev.whenErr[:0], make([]error, n)...)

	if explain {
		return ev.explained(dec)
	}
	var denies, allows []*authzRule
	if az.denies != nil { // nil when the set has no authorization rules
		denies, allows = az.denies[action], az.allows[action]
	}
	var failed *authzRule
	var failure error
	for _, r := range denies {
		o := ev.rule(r)
		if o.matched {
			return decided(dec, r, false, o.reason)
		}
		if o.err != nil && failed == nil {
			failed, failure = r, o.err
		}
	}
	if failed != nil {
		return decided(dec, failed, false, failedReason(failed, failure))
	}
	for _, r := range allows {
		o := ev.rule(r)
		if o.matched {
			return decided(dec, r, true, o.reason)
		}
		if o.err != nil && failed == nil {
			failed, failure = r, o.err
		}
	}
	if failed != nil {
		return decided(dec, failed, false, failedReason(failed, failure))
	}
	dec.Reason = nothingAllows(&ev.in)
	return dec
}

// explained evaluates every rule, noting each, and reaches the decision
// authorize's short cut would.
func (ev *authzEval) explained(dec AuthzDecision) AuthzDecision {
	az := &ev.set.authz
	dec.Explain = make([]RuleResult, 0, az.rules+len(az.policies))
	var deny, denyFailed, allow, allowFailed *authzRule
	var denyReason, allowReason string
	var denyErr, allowErr error
	for _, p := range az.policies {
		if p.when != nil {
			st, err := ev.policyWhen(p)
			rr := RuleResult{Policy: p.name, Kind: "when", Applied: st == whenTrue}
			if err != nil {
				rr.Error = err.Error()
			}
			dec.Explain = append(dec.Explain, rr)
		}
		for _, r := range p.rules {
			o := ev.rule(r)
			rr := RuleResult{Policy: p.name, Rule: r.name, Kind: "allow", Applied: o.applied, Matched: o.matched}
			if r.deny {
				rr.Kind = "deny"
			}
			if o.matched {
				rr.Reason = o.reason
			}
			if o.err != nil {
				rr.Error = o.err.Error()
			}
			dec.Explain = append(dec.Explain, rr)
			switch {
			case r.deny && o.matched && deny == nil:
				deny, denyReason = r, o.reason
			case r.deny && o.err != nil && denyFailed == nil:
				denyFailed, denyErr = r, o.err
			case !r.deny && o.matched && allow == nil:
				allow, allowReason = r, o.reason
			case !r.deny && o.err != nil && allowFailed == nil:
				allowFailed, allowErr = r, o.err
			}
		}
	}
	switch {
	case deny != nil:
		return decided(dec, deny, false, denyReason)
	case denyFailed != nil:
		return decided(dec, denyFailed, false, failedReason(denyFailed, denyErr))
	case allow != nil:
		return decided(dec, allow, true, allowReason)
	case allowFailed != nil:
		return decided(dec, allowFailed, false, failedReason(allowFailed, allowErr))
	}
	dec.Reason = nothingAllows(&ev.in)
	return dec
}

func decided(dec AuthzDecision, r *authzRule, allowed bool, reason string) AuthzDecision {
	dec.Allowed, dec.Policy, dec.Rule, dec.Reason = allowed, r.policy.name, r.name, reason
	return dec
}

func failedReason(r *authzRule, err error) string {
	return fmt.Sprintf("policy %q rule %q failed: %v", r.policy.name, r.name, err)
}

// nothingAllows says why a request no rule matched is denied. It runs on
// every such denial, so it builds the string in one allocation.
func nothingAllows(in *AuthzInput) string {
	who := ""
	if !in.Caller.Authenticated && in.Caller.Method != MethodNone {
		who = "an unauthenticated caller to "
	}
	on := ""
	if in.Resource.ID != "" {
		on = " on " + in.Resource.Kind + " " + strconv.Quote(in.Resource.ID)
	}
	return "no authorization rule allows " + who + in.Action + on
}

// release clears what the evaluation refers to and returns it to the pool.
func (ev *authzEval) release() {
	clear(ev.whenErr)
	when, whenErr := ev.when[:0], ev.whenErr[:0]
	*ev = authzEval{when: when, whenErr: whenErr}
	authzEvals.Put(ev)
}

// policyWhen evaluates a policy's when once per call.
func (ev *authzEval) policyWhen(p *authzPolicy) (whenState, error) {
	if st := ev.when[p.index]; st != whenUnknown {
		return st, ev.whenErr[p.index]
	}
	ok, err := ev.boolean(p.when)
	st := whenFalse
	switch {
	case err != nil:
		st = whenFailed
		err = fmt.Errorf("policy when: %w", err)
		ev.whenErr[p.index] = err
	case ok:
		st = whenTrue
	}
	ev.when[p.index] = st
	return st, err
}

// rule evaluates one rule: its policy's when, its own when, its body and
// its reason.
func (ev *authzEval) rule(r *authzRule) outcome {
	if r.policy.when != nil {
		st, err := ev.policyWhen(r.policy)
		if err != nil {
			return outcome{applied: true, err: err}
		}
		if st == whenFalse {
			return outcome{}
		}
	}
	if r.when != nil {
		ok, err := ev.boolean(r.when)
		if err != nil {
			return outcome{applied: true, err: fmt.Errorf("when: %w", err)}
		}
		if !ok {
			return outcome{}
		}
	}
	ok, err := ev.boolean(r.body)
	if err != nil || !ok {
		return outcome{applied: true, err: err}
	}
	o := outcome{applied: true, matched: true, reason: r.reason}
	if r.reasonExpr != nil {
		v, err := ev.run(r.reasonExpr)
		if err != nil {
			return outcome{applied: true, err: fmt.Errorf("reasonExpression: %w", err)}
		}
		s, isStr := v.(types.String)
		if !isStr {
			return outcome{applied: true, err: fmt.Errorf("reasonExpression is %s, not a string", v.Type().TypeName())}
		}
		o.reason = cmp.Or(string(s), r.fallback)
	}
	return o
}

func (ev *authzEval) boolean(p *program) (bool, error) { return asBool(ev.run(p)) }

func (ev *authzEval) run(p *program) (ref.Val, error) {
	return evalProgram(ev.ctx, p, &ev.act, ev.set.opts)
}

// oversized says which part of the input exceeds the bounds the cost
// estimates assume, or "" when none does.
func oversized(in *AuthzInput) string {
	c, r := &in.Caller, &in.Resource
	if len(c.Roles) > AuthzMaxRoles {
		return fmt.Sprintf("the caller has %d roles (at most %d)", len(c.Roles), AuthzMaxRoles)
	}
	for _, f := range [...]struct {
		name, v string
	}{{"action", in.Action}, {"caller principal", c.Principal}, {"caller tenant", c.Tenant}, {"caller method", c.Method},
		{"caller issuer", c.Issuer}, {"resource kind", r.Kind}, {"resource id", r.ID}, {"resource owner", r.Owner},
		{"resource tenant", r.Tenant}, {"resource owner method", r.OwnerMethod}, {"resource owner issuer", r.OwnerIssuer}} {
		if len(f.v) > AuthzMaxString {
			return fmt.Sprintf("the %s is %d bytes (at most %d)", f.name, len(f.v), AuthzMaxString)
		}
	}
	for _, role := range c.Roles {
		if len(role) > AuthzMaxString {
			return fmt.Sprintf("a caller role is %d bytes (at most %d)", len(role), AuthzMaxString)
		}
	}
	return ""
}
