package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// Source is the API's reads and actions as Go calls, for a front that
// shows a caller what the API shows it (the console, whose Source it
// is): each is authorized as the API authorizes it, and fails with
// errors Classify maps as the API answers them.
type Source struct{ a *API }

// Source returns the API's reads and actions as Go calls.
func (a *API) Source() Source { return Source{a} }

// check fails with the API's 403 unless the caller of ctx may do action
// to res.
func (s Source) check(ctx context.Context, action string, res policies.Resource) error {
	if dec := s.a.authz.Decide(ctx, action, res); !dec.Allowed {
		return httpgate.Denied(action, dec)
	}
	return nil
}

// Agents returns the registered agents, sorted by id, and the configured
// ones not registered yet, as GET /v1/agents does.
func (s Source) Agents(ctx context.Context) ([]*registry.Agent, []registry.Pending, error) {
	if err := s.check(ctx, policies.ActionAgentsList, policies.Resource{Kind: policies.ResourceAgent}); err != nil {
		return nil, nil, err
	}
	return s.a.reg.List(), s.a.reg.Pending(), nil
}

// Agent returns the agent id, as GET /v1/agents/{id} does.
func (s Source) Agent(ctx context.Context, id string) (*registry.Agent, error) {
	if err := s.check(ctx, policies.ActionAgentsRead, policies.Resource{Kind: policies.ResourceAgent, ID: id}); err != nil {
		return nil, err
	}
	ag, ok := s.a.reg.Get(id)
	if !ok {
		return nil, fmt.Errorf("%w: %q", registry.ErrNotFound, id)
	}
	return ag, nil
}

// Delegations returns a page of the delegations the caller may read, as
// GET /v1/delegations does.
func (s Source) Delegations(ctx context.Context, q delegation.Query) (delegation.Page, error) {
	if err := s.check(ctx, policies.ActionDelegationsList, s.a.authz.Own(ctx, policies.ResourceDelegation)); err != nil {
		return delegation.Page{}, err
	}
	q.Visible = s.a.authz.Visible(ctx)
	return s.a.delegations.List(ctx, q)
}

// Delegation returns the delegation id, as GET /v1/delegations/{id}
// does.
func (s Source) Delegation(ctx context.Context, id string) (delegation.Record, error) {
	return s.a.authz.Read(ctx, s.a.delegations, id)
}

// Events returns the delegation's events after the sequence number after,
// at most limit of them (0: all), and whether it has ended.
func (s Source) Events(ctx context.Context, id string, after int64, limit int) ([]delegation.Event, bool, error) {
	if _, err := s.a.authz.Lookup(ctx, s.a.delegations, id, policies.ActionDelegationsRead); err != nil {
		return nil, false, err
	}
	return s.a.delegations.Events(ctx, id, after, limit)
}

// Policies returns the policies in force, as GET /v1/policies does.
func (s Source) Policies(ctx context.Context) (policies.Status, error) {
	if err := s.check(ctx, policies.ActionPoliciesRead, policies.Resource{Kind: policies.ResourcePolicies}); err != nil {
		return policies.Status{}, err
	}
	return s.a.policies.Status(), nil
}

// Evaluate dry-runs the policies on request, the JSON body of POST
// /v1/policy:evaluate, and returns how many candidates it considered
// and the result.
func (s Source) Evaluate(ctx context.Context, request string) (int, *policies.Result, error) {
	if err := s.check(ctx, policies.ActionPoliciesEvaluate, dryRunAs(s.a.authz.CallerOf(ctx))); err != nil {
		return 0, nil, err
	}
	var req EvaluateRequest
	if err := decodeJSON(strings.NewReader(request), &req); err != nil {
		return 0, nil, &httpgate.Error{Status: http.StatusBadRequest, Code: "invalid_argument", Msg: "the request is not valid JSON for a dry run: " + err.Error()}
	}
	res, err := s.a.dryRun(ctx, req)
	if err != nil {
		return 0, nil, err
	}
	return res.Candidates, res.Result, nil
}

// Steer passes a steer or an interrupt with text to the delegation id,
// as POST /v1/delegations/{id}:steer and :interrupt do.
func (s Source) Steer(ctx context.Context, id string, c steering.Control, text string) (steering.Receipt, error) {
	if _, err := s.a.authz.Lookup(ctx, s.a.delegations, id, policies.ActionDelegationsSteer); err != nil {
		return steering.Receipt{}, err
	}
	if text == "" {
		text = string(c) // an interrupt may give no reason, as over the API
	}
	return s.a.delegations.Steer(ctx, id, c, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text)))
}

// Cancel cancels the delegation id, as POST /v1/delegations/{id}:cancel
// does.
func (s Source) Cancel(ctx context.Context, id string) (delegation.Record, error) {
	if _, err := s.a.authz.Lookup(ctx, s.a.delegations, id, policies.ActionDelegationsCancel); err != nil {
		return delegation.Record{}, err
	}
	return s.a.delegations.Cancel(ctx, id)
}

// Send passes the caller's text to the delegation id, waiting for input,
// as POST /v1/delegations/{id}/messages does.
func (s Source) Send(ctx context.Context, id string, text string) (delegation.Record, error) {
	if _, err := s.a.authz.Lookup(ctx, s.a.delegations, id, policies.ActionDelegationsSteer); err != nil {
		return delegation.Record{}, err
	}
	return s.a.delegations.Send(ctx, id, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text)))
}
