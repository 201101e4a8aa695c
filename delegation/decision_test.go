package delegation

import "testing"

// TestRefusedError_Error checks that a refusal names the skill the work
// was routed by and says once that no agent can take it.
func TestRefusedError_Error(t *testing.T) {
	t.Parallel()
	two := &Decision{Candidates: []Candidate{
		{Agent: "a", Reasons: []string{"lacks required capability steerable"}},
		{Agent: "b", Reasons: []string{"unhealthy: circuit breaker open", "already in the chain"}},
	}}
	tests := []struct {
		name string
		err  *RefusedError
		want string
	}{
		{"unknown skill", &RefusedError{Decision: &Decision{}, Skill: "nosuch"}, `no agent has skill "nosuch"`},
		{"no agents", &RefusedError{Decision: &Decision{}}, "no agent is registered"},
		{"refused with skill", &RefusedError{Decision: two, Skill: "research"},
			`no agent with skill "research" can take the work: a: lacks required capability steerable; b: unhealthy: circuit breaker open; already in the chain`},
		{"refused without skill", &RefusedError{Decision: two},
			"no agent can take the work: a: lacks required capability steerable; b: unhealthy: circuit breaker open; already in the chain"},
	}
	for _, tt := range tests {
		if got := tt.err.Error(); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
