package console

import (
	"context"
	"errors"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// Source is what the console reads and does, each time on behalf of the
// caller whose request's context ctx is. An implementation authorizes
// every call as the API authorizes the same caller: a delegation the
// caller may not read is not found, and an action the caller may not do
// fails with an error its Classify maps to 403.
type Source interface {
	// Agents returns the registered agents, sorted by id, and the
	// configured ones not registered yet.
	Agents(ctx context.Context) ([]*registry.Agent, []registry.Pending, error)
	// Agent returns one registered agent, or an error wrapping
	// registry.ErrNotFound.
	Agent(ctx context.Context, id string) (*registry.Agent, error)
	// Delegations returns one page of the delegations the caller may
	// read, newest first; q.Visible is the source's to set.
	Delegations(ctx context.Context, q delegation.Query) (delegation.Page, error)
	// Delegation returns a delegation the caller may read, or an error
	// wrapping delegation.ErrNotFound.
	Delegation(ctx context.Context, id string) (delegation.Record, error)
	// Events returns up to limit events of the delegation after seq, and
	// whether the log is complete, as delegation.Engine.Events does.
	Events(ctx context.Context, id string, after int64, limit int) ([]delegation.Event, bool, error)
	// Policies returns the policies in force and the last reload's error.
	Policies(ctx context.Context) (policies.Status, error)
	// Evaluate decides the agents under the policies in force without
	// delegating anything: request is a body of POST /v1/policy:evaluate,
	// read as the API reads it, and the answer is the API's. It returns
	// how many candidates were considered; a request that cannot be read
	// fails with an error its Classify maps to 400.
	Evaluate(ctx context.Context, request string) (int, *policies.Result, error)
	// Steer passes a steer or an interrupt with text to the delegation
	// and returns the receipt.
	Steer(ctx context.Context, id string, c steering.Control, text string) (steering.Receipt, error)
	// Cancel cancels the delegation.
	Cancel(ctx context.Context, id string) (delegation.Record, error)
	// Send answers a delegation waiting for input with text.
	Send(ctx context.Context, id string, text string) (delegation.Record, error)
}

// ErrLogin is returned by a Config.Login that refused the token.
var ErrLogin = errors.New("credentials refused")
