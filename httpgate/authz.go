package httpgate

import (
	"context"
	"fmt"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/policies"
)

// authorizer decides what callers may do with the authorization policies
// in force: the engine's current set, so a reload applies to the next
// request.
type authorizer struct {
	gate     *gate
	policies *policies.Engine
}

// decide asks the policies whether the caller of ctx may do action to res.
func (z authorizer) decide(ctx context.Context, action string, res policies.Resource) policies.AuthzDecision {
	return z.policies.Set().Authorize(policies.AuthzInput{Caller: z.gate.callerOf(ctx), Action: action, Resource: res})
}

// own is the resource of an action on something the caller is about to
// own or only lists: a delegation it creates, the delegations it lists.
func (z authorizer) own(ctx context.Context, kind string) policies.Resource {
	c := z.gate.callerOf(ctx)
	return policies.Resource{Kind: kind, Owner: c.Principal, Tenant: c.Tenant, OwnerMethod: c.Method, OwnerIssuer: c.Issuer}
}

// delegationResource is a delegation as authorization sees it: its id
// and whoever created it, authenticated how and vouched for by whom. An
// owner recorded before owners carried their method has none, and so
// is no caller's.
func delegationResource(rec delegation.Record) policies.Resource {
	res := policies.Resource{Kind: policies.ResourceDelegation, ID: rec.ID}
	if o := rec.Owner; o != nil {
		res.Owner, res.Tenant, res.OwnerMethod, res.OwnerIssuer = o.ID, o.Tenant, o.Method, o.Issuer
	}
	return res
}

// visible returns the filter that keeps, in a listing, the delegations
// the caller of ctx may read.
func (z authorizer) visible(ctx context.Context) func(delegation.Record) bool {
	set, c := z.policies.Set(), z.gate.callerOf(ctx)
	return func(rec delegation.Record) bool {
		return set.Authorize(policies.AuthzInput{Caller: c, Action: policies.ActionDelegationsRead, Resource: delegationResource(rec)}).Allowed
	}
}

// metrics serves h to callers the policies let read the metrics.
func (z authorizer) metrics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dec := z.decide(r.Context(), policies.ActionMetricsRead, policies.Resource{Kind: policies.ResourceMetrics}); !dec.Allowed {
			writeAPIError(w, denied(policies.ActionMetricsRead, dec))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// denied is the API error for a refused action: 403 with the policy's
// reason.
func denied(action string, dec policies.AuthzDecision) *apiError {
	return &apiError{status: http.StatusForbidden, code: "permission_denied", msg: fmt.Sprintf("not allowed to %s: %s", action, dec.Reason)}
}

// allow answers 403 and returns false unless the caller of r may do
// action to res.
func (a *api) allow(w http.ResponseWriter, r *http.Request, action string, res policies.Resource) bool {
	dec := a.authz.decide(r.Context(), action, res)
	if !dec.Allowed {
		a.fail(w, r, denied(action, dec))
	}
	return dec.Allowed
}

// delegationFor reads the delegation named in the path for action. A
// delegation the caller may not act on is answered as one that does not
// exist (404), so callers learn nothing of others' work.
func (a *api) delegationFor(w http.ResponseWriter, r *http.Request, id, action string) (delegation.Record, bool) {
	rec, err := a.authz.lookup(r.Context(), a.delegations, id, action)
	if err != nil {
		a.fail(w, r, err)
		return delegation.Record{}, false
	}
	return rec, true
}

// lookup reads the delegation id for action by the caller of ctx. A
// delegation the caller may not act on is not found (ErrNotFound), as
// one that does not exist: callers learn nothing of others' work. It is
// decided on the record without the artifacts a stored one keeps in its
// log (LookupHead); read them, with Lookup, once the caller may read the
// delegation.
func (z authorizer) lookup(ctx context.Context, engine *delegation.Engine, id, action string) (delegation.Record, error) {
	rec, err := engine.LookupHead(ctx, id)
	if err == nil && !z.decide(ctx, action, delegationResource(rec)).Allowed {
		err = fmt.Errorf("%w: %q", delegation.ErrNotFound, id)
	}
	if err != nil {
		return delegation.Record{}, err
	}
	return rec, nil
}

// read is lookup for delegations.read, with the delegation's artifacts.
func (z authorizer) read(ctx context.Context, engine *delegation.Engine, id string) (delegation.Record, error) {
	if _, err := z.lookup(ctx, engine, id, policies.ActionDelegationsRead); err != nil {
		return delegation.Record{}, err
	}
	return engine.Lookup(ctx, id)
}

// authorizeA2A refuses an A2A call its caller may not make, with A2A's
// unauthorized error (-31403). Calls on one task are further kept to the
// task's owner by the task store, which answers others "task not found".
type authorizeA2A struct {
	a2asrv.PassthroughCallInterceptor
	authz authorizer
}

func (i authorizeA2A) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	newTask := true
	if smr, ok := req.Payload.(*a2a.SendMessageRequest); ok && smr.Message != nil && smr.Message.TaskID != "" {
		newTask = false
	}
	action, ok := policies.A2AAction(cc.Method(), newTask)
	if !ok {
		return ctx, nil, a2a.NewError(a2a.ErrUnauthorized, fmt.Sprintf("%s is not an A2A method orchd authorizes", cc.Method()))
	}
	// The task store keeps tasks to their owners; the resource is the
	// caller's own.
	kind := policies.ResourceDelegation
	if action == policies.ActionAgentsRead {
		kind = policies.ResourceAgent
	}
	if dec := i.authz.decide(ctx, action, i.authz.own(ctx, kind)); !dec.Allowed {
		return ctx, nil, a2a.NewError(a2a.ErrUnauthorized, fmt.Sprintf("not allowed to %s: %s", action, dec.Reason))
	}
	return ctx, nil, nil
}
