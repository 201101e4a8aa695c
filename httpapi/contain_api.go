package httpapi

import (
	"net/http"

	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
)

// ContainRequest is the body of POST /v1/agents/{id}:contain.
type ContainRequest struct {
	// Reason says why the agent is contained: 1 to 500 bytes.
	Reason string `json:"reason"`
	// Cancel cancels the work running on the agent rather than
	// interrupting it.
	Cancel bool `json:"cancel,omitempty"`
}

// ContainmentAnswer is the body of POST /v1/agents/{id}:contain and
// POST /v1/agents/{id}:release.
type ContainmentAnswer struct {
	// Agent is the agent's id.
	Agent string `json:"agent"`
	// Contained says whether the agent is contained now.
	Contained bool `json:"contained"`
	// Changed is false when the agent already was as the call leaves it:
	// contained already (the containment in force is unchanged), or not
	// contained.
	Changed bool `json:"changed"`
	// Containment is the containment in force after a contain, or the one
	// a release ended; absent when a release found none.
	Containment *registry.Containment `json:"containment,omitempty"`
}

// contain serves POST /v1/agents/{id}:contain.
func (a *API) contain(w http.ResponseWriter, r *http.Request, id string) {
	if !a.allow(w, r, policies.ActionAgentsContain, policies.Resource{Kind: policies.ResourceAgent, ID: id}) {
		return
	}
	var body ContainRequest
	if err := decodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	c, created, err := a.delegations.Contain(r.Context(), id, a.authz.CallerOf(r.Context()).Principal, body.Reason, body.Cancel)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.reply(w, http.StatusOK, ContainmentAnswer{Agent: id, Contained: true, Changed: created, Containment: &c})
}

// release serves POST /v1/agents/{id}:release.
func (a *API) release(w http.ResponseWriter, r *http.Request, id string) {
	if !a.allow(w, r, policies.ActionAgentsContain, policies.Resource{Kind: policies.ResourceAgent, ID: id}) {
		return
	}
	var body struct{}
	if err := decodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	c, released, err := a.delegations.Release(r.Context(), id, a.authz.CallerOf(r.Context()).Principal)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	ans := ContainmentAnswer{Agent: id, Changed: released}
	if released {
		ans.Containment = &c
	}
	a.reply(w, http.StatusOK, ans)
}
