package delegation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
)

// ErrUnknownAgent means a request pinned an agent id the registry does not
// hold.
var ErrUnknownAgent = errors.New("unknown agent")

// refusedCredentials is the refusal reason of an agent whose card requires
// credentials orchd has not got for it (registry.Agent.Credentials), as
// counted by orchd.delegation.refusals: nothing is sent to it.
const refusedCredentials = "credentials"

// choose decides which agents may take the work, best first. It never
// contacts an agent.
func (e *Engine) choose(ctx context.Context, req *Request, in, out Chain) (*Decision, []*registry.Agent, error) {
	var pool []*registry.Agent
	switch {
	case req.Agent != "":
		a, ok := e.reg.Get(req.Agent)
		if !ok {
			return nil, nil, fmt.Errorf("%w: %q", ErrUnknownAgent, req.Agent)
		}
		pool = []*registry.Agent{a}
	case out.Skill != "":
		pool = e.reg.BySkill(out.Skill)
	default:
		pool = e.reg.List()
	}

	e.reg.RecordUse(ctx, pool)
	d := &Decision{}
	var refused []Candidate
	var kinds []string
	eligible := make([]*registry.Agent, 0, len(pool))
	for _, a := range pool {
		reasons, why, err := prefilter(a, req, in, out, e.cfg.Self)
		if err != nil {
			return nil, nil, err
		}
		reasons, why = e.unhealthy(a, reasons, why)
		if a.Contained && a.Containment != nil {
			reasons, why = append(reasons, containedReason(a.Containment)), append(why, refusedContained)
		}
		if !a.Credentials.Satisfied {
			reasons, why = append(reasons, "credentials: "+a.Credentials.Reason), append(why, refusedCredentials)
		}
		if len(reasons) > 0 {
			refused = append(refused, Candidate{Agent: a.ID, Reasons: reasons})
			kinds = append(kinds, why...)
			continue
		}
		eligible = append(eligible, a)
	}

	set := e.policies.Set()
	ctx, span := e.instruments.start(ctx, "orchd.policy.evaluate")
	res := set.Evaluate(ctx, eligible, policies.Input{
		Request: policies.Request{Skill: out.Skill, Capabilities: out.Requires, Protocol: req.Protocol, Metadata: req.Metadata},
		Chain:   policies.Chain{Depth: in.Depth, MaxDepth: out.MaxDepth, Path: in.Path, RootTask: out.RootTask},
		Caller:  req.Caller,
		Now:     e.cfg.Now(),
	})
	e.instruments.decided(ctx, kinds, res)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("orchd.policy.set", set.Digest()), attribute.Int("orchd.candidates", len(eligible)),
			attribute.String("orchd.policy.winner", res.Winner))
	}
	span.End()
	d.PolicySet, d.Policy = res.PolicySet, res.Decisions
	byID := agentIndex(eligible)
	var allowed []*registry.Agent
	for _, pd := range res.Decisions {
		if pd.Allowed {
			d.Candidates = append(d.Candidates, Candidate{Agent: pd.Agent, Allowed: true, Rank: pd.Rank})
			allowed = append(allowed, agentByID(eligible, byID, pd.Agent))
			continue
		}
		refused = append(refused, Candidate{Agent: pd.Agent, Reasons: pd.Reasons})
	}
	slices.SortFunc(refused, func(a, b Candidate) int { return strings.Compare(a.Agent, b.Agent) })
	d.Candidates = append(d.Candidates, refused...)
	return d, allowed, nil
}

// agentIndex indexes a pool by agent id for agentByID, or is nil for a
// pool of a few, which most delegations have: looking through those costs
// less than building a map.
func agentIndex(pool []*registry.Agent) map[string]*registry.Agent {
	if len(pool) <= 8 {
		return nil
	}
	m := make(map[string]*registry.Agent, len(pool))
	for _, a := range pool {
		m[a.ID] = a
	}
	return m
}

// agentByID is the agent of pool with the id, through index when there is
// one (agentIndex).
func agentByID(pool []*registry.Agent, index map[string]*registry.Agent, id string) *registry.Agent {
	if index != nil {
		return index[id]
	}
	for _, a := range pool {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// prefilter returns why an agent cannot take the work whatever the
// policies say: it is an orchestrator already in the chain (by the
// identity its card advertises), orchd cannot speak its
// protocol, or it lacks a required capability. Each reason comes with its
// kind (refusedCycle, refusedProtocol or refusedCapability).
func prefilter(a *registry.Agent, req *Request, in, out Chain, self string) (reasons, kinds []string, err error) {
	refuse := func(kind, reason string) {
		reasons, kinds = append(reasons, reason), append(kinds, kind)
	}
	// A chained orchestrator is recognised by the identity its card
	// advertises, never by the id this registry gave it.
	if id, name := advertisedIdentity(a); id != "" && (id == self || slices.Contains(in.Path, id)) {
		refuse(refusedCycle, fmt.Sprintf("%s is already in the delegation path %s", hopName(id, name), out.PathString()))
	}
	if !a.ClientCompatible {
		refuse(refusedProtocol, "protocol: "+a.IncompatibleReason)
	}
	if req.Protocol != "" {
		ok, err := a.Compatible(req.Protocol)
		if err != nil {
			return nil, nil, fmt.Errorf("%w: protocol: %v", ErrBadRequest, err)
		}
		if !ok {
			refuse(refusedProtocol, fmt.Sprintf("protocol: speaks %s, the request needs %s", strings.Join(a.Versions(""), ", "), req.Protocol))
		}
	}
	for _, c := range out.Requires {
		if !a.Supports(c) {
			refuse(refusedCapability, "lacks required capability "+c)
		}
	}
	return reasons, kinds, nil
}
