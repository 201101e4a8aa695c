package delegation

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/policies"
)

// Request is a piece of work to delegate.
type Request struct {
	// Text is the work as plain text. Exactly one of Text and Message is
	// set.
	Text string `json:"text,omitempty"`
	// Message is the work as an A2A message.
	Message *a2a.Message `json:"message,omitempty"`
	// Skill selects candidates by skill id or tag.
	Skill string `json:"skill,omitempty"`
	// Agent pins the work to one registered agent id.
	Agent string `json:"agent,omitempty"`
	// Requires lists capabilities the chosen agent, and every agent after
	// it, must have.
	Requires []string `json:"requires,omitempty"`
	// Protocol is an A2A version constraint the agent must satisfy, such as
	// ">= 1.0".
	Protocol string `json:"protocol,omitempty"`
	// Metadata is passed to policies and on to the agent.
	Metadata map[string]any `json:"metadata,omitempty"`
	// Deadline is when the caller stops waiting; it travels down the
	// chain. Zero means none (an incoming chain's deadline still applies).
	Deadline time.Time `json:"deadline,omitzero"`

	// Chain is the incoming chain context when the work arrived over A2A
	// from another orchestrator; nil at the root.
	Chain *Chain `json:"-"`
	// Caller is who asked, for policies; its principal and tenant own the
	// delegation (Record.Owner).
	Caller policies.Caller `json:"-"`
	// Peer is the authenticated principal of the orchestrator that sent
	// Chain, set only when the receiver trusts it as a peer: it verifies
	// the path's last entry (Chain.Verified).
	Peer string `json:"-"`
	// ChainIgnored says why an incoming chain context was not believed
	// (the caller is not a trusted peer), so the work started a new chain;
	// it is kept in the record.
	ChainIgnored string `json:"-"`
	// Via says through which front, and which client, the work came,
	// when the front tells; it is kept in the record.
	Via *Via `json:"-"`
}

// Via is the front a delegation came through and the client that used
// it, as the client named itself: for people reading records, never for
// decisions (the client's name is not authenticated).
type Via struct {
	// Front is "api" (the HTTP API), "a2a" (the A2A server) or "mcp"
	// (the MCP endpoint).
	Front string `json:"front"`
	// Client is the client's name and version, as it gave them.
	Client string `json:"client,omitempty"`
}

// owner is the principal the delegation belongs to: the caller's, with
// its method and issuer, nil when no one was authenticated.
func (r *Request) owner() *Principal {
	if r.Caller.Principal == "" {
		return nil
	}
	return &Principal{ID: r.Caller.Principal, Tenant: r.Caller.Tenant, Method: r.Caller.Method, Issuer: r.Caller.Issuer}
}

// ErrBadRequest marks requests that cannot be delegated as written.
var ErrBadRequest = errors.New("bad delegation request")

// validate checks the request's shape.
func (r *Request) validate() error {
	switch {
	case r.Message == nil && strings.TrimSpace(r.Text) == "":
		return fmt.Errorf("%w: text or message is required", ErrBadRequest)
	case r.Message != nil && r.Text != "":
		return fmt.Errorf("%w: give text or message, not both", ErrBadRequest)
	case r.Message != nil && len(r.Message.Parts) == 0:
		return fmt.Errorf("%w: message.parts is empty", ErrBadRequest)
	}
	for i, c := range r.Requires {
		if strings.TrimSpace(c) == "" {
			return fmt.Errorf("%w: requires[%d] is empty", ErrBadRequest, i)
		}
	}
	return nil
}

// message returns the outbound message: a copy of Message, or Text as a
// user message.
func (r *Request) message() *a2a.Message {
	if r.Message == nil {
		return a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(r.Text))
	}
	m := *r.Message
	if m.ID == "" {
		m.ID = a2a.NewMessageID()
	}
	if m.Role == "" {
		m.Role = a2a.MessageRoleUser
	}
	if m.Metadata != nil {
		md := make(map[string]any, len(m.Metadata))
		for k, v := range m.Metadata {
			md[k] = v
		}
		m.Metadata = md
	}
	return &m
}
