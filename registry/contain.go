package registry

import (
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// MaxContainmentReason bounds a containment's reason, in bytes.
const MaxContainmentReason = 500

// Containment is an operator's hold on an agent: while it lasts no new
// work is sent to the agent, and the work running on it is interrupted,
// or canceled when Cancel is set (package delegation acts on it). The
// registry only carries it on the agent ([Agent.Contained]), so that
// everything reading agents, policies included, sees it; where it is kept
// is the delegation engine's business.
type Containment struct {
	// Agent is the contained agent's id.
	Agent string `json:"agent"`
	// Reason is why the agent was contained, as the operator gave it.
	Reason string `json:"reason"`
	// By is who contained it: the caller's principal, or "anonymous".
	By string `json:"by"`
	// At is when it was contained.
	At time.Time `json:"at"`
	// Cancel is set when running work is canceled rather than interrupted.
	Cancel bool `json:"cancel,omitempty"`
}

// String says who contained the agent, when, why, and what happens to
// its running work: "contained by ops at 2026-12-06T12:00:00Z (running
// work interrupted): leaks data".
func (c Containment) String() string {
	work := "running work interrupted"
	if c.Cancel {
		work = "running work canceled"
	}
	return fmt.Sprintf("contained by %s at %s (%s): %s", c.By, c.At.UTC().Format(time.RFC3339), work, c.Reason)
}

// ValidContainmentReason reports whether reason may be a containment's:
// 1 to MaxContainmentReason bytes of UTF-8.
func ValidContainmentReason(reason string) bool {
	return reason != "" && len(reason) <= MaxContainmentReason && utf8.ValidString(reason)
}

// same reports whether c and o are the same containment.
func (c *Containment) same(o *Containment) bool {
	if c == nil || o == nil {
		return c == o
	}
	return c.Agent == o.Agent && c.Reason == o.Reason && c.By == o.By && c.At.Equal(o.At) && c.Cancel == o.Cancel
}

// SetContainment records that agent id is contained (c) or not (nil),
// and reports whether that changed anything. The containment holds for
// the id, not for one registration: an agent registered under the id
// later, or again, is contained too.
func (r *Registry) SetContainment(id string, c *Containment) bool {
	if c != nil {
		cp := *c
		cp.Agent = id
		c = &cp
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.contained[id].same(c) {
		return false
	}
	if c == nil {
		delete(r.contained, id)
	} else {
		r.contained[id] = c
	}
	if a, ok := r.byID[id]; ok {
		next := *a
		next.Contained, next.Containment = c != nil, c
		r.replace(a, &next)
	}
	return true
}

// Containment returns the containment agent id is under, or nil: the one
// recorded now, whether or not an agent is registered under the id.
func (r *Registry) Containment(id string) *Containment {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.contained[id]
}

// contain sets a's containment from the registry's; callers hold mu, and
// a is not published yet.
func (r *Registry) contain(a *Agent) {
	a.Containment = r.contained[a.ID]
	a.Contained = a.Containment != nil
}

// Containments returns the containments recorded now, sorted by agent id.
func (r *Registry) Containments() []Containment {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if len(r.contained) == 0 {
		return nil
	}
	out := make([]Containment, 0, len(r.contained))
	for _, c := range r.contained {
		out = append(out, *c)
	}
	slices.SortFunc(out, func(a, b Containment) int { return strings.Compare(a.Agent, b.Agent) })
	return out
}
