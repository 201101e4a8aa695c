package delegation

import (
	"fmt"
	"strings"

	"github.com/orchd/orchd/policies"
)

// Decision records how a delegation chose its agent.
type Decision struct {
	// Candidates lists every agent considered, allowed ones first in order
	// of preference, each with the reasons it was refused.
	Candidates []Candidate `json:"candidates"`
	// Chosen is the agent that accepted the work, or "" when none did.
	Chosen string `json:"chosen,omitempty"`
	// Attempts lists the agents tried, in order, with why each that did
	// not accept the work failed.
	Attempts []Attempt `json:"attempts,omitempty"`
	// PolicySet is the digest of the policies that decided.
	PolicySet string `json:"policySet,omitempty"`
	// Policy is the policies' rule-by-rule explanation per candidate.
	Policy []policies.Decision `json:"policy,omitempty"`
}

// Candidate is one agent considered for the work.
type Candidate struct {
	// Agent is the registry id.
	Agent string `json:"agent"`
	// Allowed is true when nothing refused the agent.
	Allowed bool `json:"allowed"`
	// Rank is the policies' rank for allowed agents.
	Rank float64 `json:"rank,omitempty"`
	// Reasons say why the agent was refused: it is already in the chain,
	// orchd cannot speak its protocol version, it lacks a required
	// capability, its circuit breaker is open ("unhealthy: …"), or policy
	// rules.
	Reasons []string `json:"reasons,omitempty"`
}

// Attempt is one try at handing the work to an agent.
type Attempt struct {
	// Agent is the registry id.
	Agent string `json:"agent"`
	// Error is why the agent did not accept the work; empty for the agent
	// that did.
	Error string `json:"error,omitempty"`
}

// RefusedError is returned when no candidate qualifies, before anything is
// sent.
type RefusedError struct {
	// Decision lists every candidate and why it was refused.
	Decision *Decision
	// Skill is the skill the work was routed by, or "" when it named
	// none; the error names it.
	Skill string
}

// Error is the Summary followed by every refused candidate with its
// reasons.
func (e *RefusedError) Error() string {
	if len(e.Decision.Candidates) == 0 {
		return e.Summary()
	}
	parts := make([]string, 0, len(e.Decision.Candidates))
	for _, c := range e.Decision.Candidates {
		parts = append(parts, fmt.Sprintf("%s: %s", c.Agent, strings.Join(c.Reasons, "; ")))
	}
	return e.Summary() + ": " + strings.Join(parts, "; ")
}

// Summary says that no agent can take the work, naming the skill, without
// the candidates' reasons, for callers that show those apart: `no agent
// with skill "research" can take the work`, or `no agent has skill
// "nosuch"` when no agent was a candidate at all.
func (e *RefusedError) Summary() string {
	switch {
	case len(e.Decision.Candidates) == 0 && e.Skill != "":
		return fmt.Sprintf("no agent has skill %q", e.Skill)
	case len(e.Decision.Candidates) == 0:
		return "no agent is registered"
	case e.Skill != "":
		return fmt.Sprintf("no agent with skill %q can take the work", e.Skill)
	}
	return "no agent can take the work"
}

// FailedError is returned when every allowed candidate that was tried
// failed before accepting the work.
type FailedError struct {
	// Decision lists the candidates and every attempt.
	Decision *Decision
	// Err is the last attempt's error, as the agent's client returned it:
	// an A2A error the agent answered with is found in it with errors.Is
	// (a2a.ErrTaskNotFound, ...), so orchd can answer its own caller with
	// the same error.
	Err error
}

// Unwrap returns the last attempt's error.
func (e *FailedError) Unwrap() error { return e.Err }

// Error lists the failed attempts.
func (e *FailedError) Error() string {
	parts := make([]string, 0, len(e.Decision.Attempts))
	for _, a := range e.Decision.Attempts {
		parts = append(parts, fmt.Sprintf("%s: %s", a.Agent, a.Error))
	}
	return "every agent tried failed before accepting the work: " + strings.Join(parts, "; ")
}
