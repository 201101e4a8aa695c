package delegation

import (
	"context"
	"errors"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/credentials"
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

// agentFault reports whether a failed call counts against the agent's
// health: the agent could not be reached, the connection broke, it did not
// answer within the call's own timeout, or it answered with an HTTP 5xx
// status or an A2A internal or server error. What the caller caused does
// not count: its context ended, the chain's deadline passed (ErrDeadline),
// an HTTP 4xx status, or any other A2A error (TaskNotFound, InvalidParams,
// …), which says the agent is there and answering. Neither does a refusal
// of orchd's credentials (401, 403) nor a credential orchd could not get.
func agentFault(ctx context.Context, err error) bool {
	if ctx.Err() != nil || errors.Is(err, context.Canceled) || errors.Is(err, ErrDeadline) {
		return false // the caller gave up, or the chain's deadline passed
	}
	if errors.Is(err, a2a.ErrUnauthenticated) || errors.Is(err, a2a.ErrUnauthorized) || errors.Is(err, credentials.ErrUnavailable) {
		return false // the agent answered; orchd's credentials are at fault
	}
	switch {
	case errors.Is(err, a2a.ErrInternalError), errors.Is(err, a2a.ErrServerError):
		return true
	case errors.As(err, new(*a2a.Error)):
		return false // any other answer in A2A terms
	}
	return errors.Is(err, context.DeadlineExceeded) || unreachable(err)
}
