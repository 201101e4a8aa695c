package delegation

import (
	"context"

	"github.com/orchd/orchd/registry"
)

// refusedUnhealthy is the refusal reason of an agent whose circuit breaker
// is open, as counted by orchd.delegation.refusals.
const refusedUnhealthy = "unhealthy"

// observe feeds the outcome of a call to agent's A2A endpoint to the
// agent's circuit breaker in the registry. ctx is the context the call was
// made for: when it ended first the failure was the caller's doing.
func (e *Engine) observe(ctx context.Context, agent string, err error) {
	switch {
	case err == nil:
		e.reg.CallSucceeded(agent)
	case agentFault(ctx, err):
		e.reg.CallFailed(agent, err)
	default:
		e.reg.CallAbandoned(agent)
	}
}

// unhealthy adds to an agent's refusals its open circuit breaker, if it
// is open.
func (e *Engine) unhealthy(a *registry.Agent, reasons, kinds []string) ([]string, []string) {
	if why := e.reg.CallRefusal(a); why != "" {
		return append(reasons, "unhealthy: "+why), append(kinds, refusedUnhealthy)
	}
	return reasons, kinds
}
