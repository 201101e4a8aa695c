package httpgate

import (
	"context"
	"fmt"
	"net/http"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/policies"
)

// Authorizer decides what callers may do with the authorization policies
// in force: the engine's current set, so a reload applies to the next
// request. Every front authorizes its callers with it.
type Authorizer struct {
	gate     *Gate
	policies *policies.Engine
}

// NewAuthorizer returns the authorizer of the callers g authenticates
// under the policies of engine.
func NewAuthorizer(g *Gate, engine *policies.Engine) Authorizer {
	return Authorizer{gate: g, policies: engine}
}

// Gate is the gate that says who the callers are.
func (z Authorizer) Gate() *Gate { return z.gate }

// CallerOf returns the caller of ctx as policies see it (Gate.CallerOf).
func (z Authorizer) CallerOf(ctx context.Context) policies.Caller { return z.gate.CallerOf(ctx) }

// Decide asks the policies whether the caller of ctx may do action to res.
func (z Authorizer) Decide(ctx context.Context, action string, res policies.Resource) policies.AuthzDecision {
	return z.policies.Set().Authorize(policies.AuthzInput{Caller: z.gate.CallerOf(ctx), Action: action, Resource: res})
}

// Own is the resource of an action on something the caller is about to
// own or only lists: a delegation it creates, the delegations it lists.
func (z Authorizer) Own(ctx context.Context, kind string) policies.Resource {
	c := z.gate.CallerOf(ctx)
	return policies.Resource{Kind: kind, Owner: c.Principal, Tenant: c.Tenant, OwnerMethod: c.Method, OwnerIssuer: c.Issuer}
}

// DelegationResource is a delegation as authorization sees it: its id
// and whoever created it, authenticated how and vouched for by whom. An
// owner recorded before owners carried their method has none, and so
// is no caller's.
func DelegationResource(rec delegation.Record) policies.Resource {
	res := policies.Resource{Kind: policies.ResourceDelegation, ID: rec.ID}
	if o := rec.Owner; o != nil {
		res.Owner, res.Tenant, res.OwnerMethod, res.OwnerIssuer = o.ID, o.Tenant, o.Method, o.Issuer
	}
	return res
}

// Visible returns the filter that keeps, in a listing, the delegations
// the caller of ctx may read.
func (z Authorizer) Visible(ctx context.Context) func(delegation.Record) bool {
	set, c := z.policies.Set(), z.gate.CallerOf(ctx)
	return func(rec delegation.Record) bool {
		return set.Authorize(policies.AuthzInput{Caller: c, Action: policies.ActionDelegationsRead, Resource: DelegationResource(rec)}).Allowed
	}
}

// Metrics serves h to callers the policies let read the metrics.
func (z Authorizer) Metrics(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if dec := z.Decide(r.Context(), policies.ActionMetricsRead, policies.Resource{Kind: policies.ResourceMetrics}); !dec.Allowed {
			WriteError(w, Denied(policies.ActionMetricsRead, dec))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// Denied is the error for a refused action: 403 with the policy's
// reason.
func Denied(action string, dec policies.AuthzDecision) *Error {
	return &Error{Status: http.StatusForbidden, Code: "permission_denied", Msg: fmt.Sprintf("not allowed to %s: %s", action, dec.Reason)}
}

// Lookup reads the delegation id for action by the caller of ctx. A
// delegation the caller may not act on is not found (ErrNotFound), as
// one that does not exist: callers learn nothing of others' work. It is
// decided on the record without the artifacts a stored one keeps in its
// log (LookupHead); read them, with Lookup, once the caller may read the
// delegation.
func (z Authorizer) Lookup(ctx context.Context, engine *delegation.Engine, id, action string) (delegation.Record, error) {
	rec, err := engine.LookupHead(ctx, id)
	if err == nil && !z.Decide(ctx, action, DelegationResource(rec)).Allowed {
		err = fmt.Errorf("%w: %q", delegation.ErrNotFound, id)
	}
	if err != nil {
		return delegation.Record{}, err
	}
	return rec, nil
}

// Read is Lookup for delegations.read, with the delegation's artifacts.
func (z Authorizer) Read(ctx context.Context, engine *delegation.Engine, id string) (delegation.Record, error) {
	if _, err := z.Lookup(ctx, engine, id, policies.ActionDelegationsRead); err != nil {
		return delegation.Record{}, err
	}
	return engine.Lookup(ctx, id)
}
