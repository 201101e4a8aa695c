package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/steering"
)

// The tools every MCP client can use. Each names a delegation by its id,
// the handle orchd_delegate returns (SEP-2567), checked against the
// caller on every call: another caller's delegation is not found, as one
// that does not exist. Descriptions are written for a model choosing and
// filling in the tools.

// Tool names.
const (
	ToolDelegate  = "orchd_delegate"
	ToolStatus    = "orchd_status"
	ToolWait      = "orchd_wait"
	ToolReply     = "orchd_reply"
	ToolSteer     = "orchd_steer"
	ToolInterrupt = "orchd_interrupt"
	ToolCancel    = "orchd_cancel"
	ToolAgents    = "orchd_agents"
)

// MaxWaitSeconds bounds waitSeconds: below the 60 s many clients give a
// tools/call that sends no progress.
const MaxWaitSeconds = 50

// DelegateInput is orchd_delegate's arguments.
type DelegateInput struct {
	Text           string   `json:"text" jsonschema:"the work, in plain words, as you would tell the agent"`
	Skill          string   `json:"skill,omitempty" jsonschema:"choose an agent with this skill id or tag (orchd_agents lists them); leave out to let orchd choose"`
	Agent          string   `json:"agent,omitempty" jsonschema:"send the work to this registered agent id (orchd_agents lists them)"`
	Requires       []string `json:"requires,omitempty" jsonschema:"capabilities the agent, and every agent it delegates to, must have, such as steerable or interruptible"`
	Deadline       string   `json:"deadline,omitempty" jsonschema:"when to give up on the work: an RFC 3339 time or a duration such as 30m"`
	IdempotencyKey string   `json:"idempotencyKey,omitempty" jsonschema:"a unique string for this piece of work: calling again with the same key returns the delegation the first call started instead of starting another; use one whenever the call might be retried"`
	WaitSeconds    *int     `json:"waitSeconds,omitempty" jsonschema:"how long to wait for the agent before returning the delegation to follow with orchd_wait, 0 to 50; default 45"`
}

// DelegationInput names a delegation.
type DelegationInput struct {
	Delegation string `json:"delegation" jsonschema:"the delegation's id, from orchd_delegate"`
}

// WaitInput is orchd_wait's arguments.
type WaitInput struct {
	Delegation  string `json:"delegation" jsonschema:"the delegation's id, from orchd_delegate"`
	AfterSeq    int64  `json:"afterSeq,omitempty" jsonschema:"return the events after this one: the seq of the last result you saw; 0 for all"`
	WaitSeconds *int   `json:"waitSeconds,omitempty" jsonschema:"how long to wait for a new event, 0 to 50; default 45"`
}

// WaitOutput is orchd_wait's result: the events after afterSeq, in order,
// and where the delegation stands.
type WaitOutput struct {
	Events []Event `json:"events" jsonschema:"the events after afterSeq, oldest first"`
	Status Status  `json:"status"`
}

// Event is one event of a delegation's log, as text.
type Event struct {
	Seq   int64  `json:"seq"`
	Kind  string `json:"kind" jsonschema:"state, message, artifact, steer or interrupt"`
	State string `json:"state"`
	Text  string `json:"text,omitempty"`
}

// ReplyInput is orchd_reply's arguments.
type ReplyInput struct {
	Delegation string `json:"delegation" jsonschema:"the delegation's id, from orchd_delegate"`
	Text       string `json:"text" jsonschema:"the answer to the agent's question"`
}

// SteerInput is orchd_steer's and orchd_interrupt's arguments.
type SteerInput struct {
	Delegation         string `json:"delegation" jsonschema:"the delegation's id, from orchd_delegate"`
	Text               string `json:"text,omitempty" jsonschema:"what the agent should do differently (steer); why it should stop (interrupt, optional)"`
	ReferenceMessageID string `json:"referenceMessageId,omitempty" jsonschema:"the id of the agent's output this reacts to, if any"`
	IdempotencyKey     string `json:"idempotencyKey,omitempty" jsonschema:"a unique string for this signal: sent again, it is delivered once and answered with the first receipt"`
}

// AgentsOutput is orchd_agents's result.
type AgentsOutput struct {
	Agents []AgentSummary `json:"agents"`
}

// AgentSummary is what a model needs to pick an agent.
type AgentSummary struct {
	ID            string   `json:"id"`
	Name          string   `json:"name"`
	Skills        []string `json:"skills,omitempty" jsonschema:"skill ids, for orchd_delegate's skill"`
	Versions      []string `json:"versions,omitempty" jsonschema:"A2A versions the agent serves"`
	Capabilities  []string `json:"capabilities,omitempty" jsonschema:"what the agent can do, with each capability's tier"`
	Steerable     bool     `json:"steerable"`
	Interruptible bool     `json:"interruptible"`
	Healthy       bool     `json:"healthy"`
	Unhealthy     string   `json:"unhealthy,omitempty"`
}

// addTools registers the tools on srv.
func (s *Server) addTools(srv *mcp.Server) error {
	yes := true
	var errs []error
	// schema is In's input schema (inputSchema), its error kept.
	schema := func(in json.RawMessage, err error) json.RawMessage {
		errs = append(errs, err)
		return in
	}
	mcp.AddTool(srv, &mcp.Tool{Name: ToolDelegate, Title: "Delegate work to an agent",
		Description: "Hand a piece of work to one of the A2A agents orchd knows, chosen by skill or named, and wait up to waitSeconds for it. " +
			"Returns the agent's answer when it finishes in time; otherwise the delegation's id and state, to follow with orchd_wait, " +
			"answer with orchd_reply when the agent asks a question, steer with orchd_steer or stop with orchd_cancel. " +
			"Pass an idempotencyKey so that calling again after a dropped connection does not start the work twice.",
		InputSchema: schema(inputSchema[DelegateInput]())},
		s.delegate)
	mcp.AddTool(srv, &mcp.Tool{Name: ToolStatus, Title: "Where a delegation stands",
		Description: "Where a delegation stands: its state, the agent's latest words, what it produced, its open and resolved requests for input, and the receipts of the latest steers.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}, InputSchema: schema(inputSchema[DelegationInput]())},
		s.status)
	mcp.AddTool(srv, &mcp.Tool{Name: ToolWait, Title: "Wait for a delegation's next events",
		Description: "Wait up to waitSeconds for events of a delegation after afterSeq and return them in order with its state. " +
			"Call it again with afterSeq set to the last event's seq to follow the work without missing or repeating anything.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}, InputSchema: schema(inputSchema[WaitInput]())},
		s.wait)
	mcp.AddTool(srv, &mcp.Tool{Name: ToolReply, Title: "Answer the agent",
		Description: "Answer a delegation's agent when it asks for input (state input_required), or tell it you are done when it needed you to authenticate (auth_required). Then follow it with orchd_wait.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false)}, InputSchema: schema(inputSchema[ReplyInput]())},
		s.reply)
	mcp.AddTool(srv, &mcp.Tool{Name: ToolSteer, Title: "Steer running work",
		Description: "Tell the agent of a working delegation to change course without stopping it. Returns once every hop down the chain queued the steer, " +
			"with a receipt naming each hop and the steer's number there; refused, naming the hop, where a hop does not take steers.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), IdempotentHint: true}, InputSchema: schema(inputSchema[SteerInput]())},
		s.steer(steering.Steer))
	mcp.AddTool(srv, &mcp.Tool{Name: ToolInterrupt, Title: "Interrupt running work",
		Description: "Stop the agent of a working delegation at its next safe point without losing its work: it then waits for input (answer it with orchd_reply to go on). " +
			"Returns once every hop settled, with a receipt naming each hop.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: new(false), IdempotentHint: true}, InputSchema: schema(inputSchema[SteerInput]())},
		s.steer(steering.Interrupt))
	mcp.AddTool(srv, &mcp.Tool{Name: ToolCancel, Title: "Cancel a delegation",
		Description: "Cancel a delegation and everything it delegated further down the chain. The work cannot be resumed.",
		Annotations: &mcp.ToolAnnotations{DestructiveHint: &yes, IdempotentHint: true}, InputSchema: schema(inputSchema[DelegationInput]())},
		s.cancel)
	mcp.AddTool(srv, &mcp.Tool{Name: ToolAgents, Title: "List the agents",
		Description: "List the A2A agents orchd can delegate to: their skills (for orchd_delegate's skill), A2A versions, capabilities, whether they can be steered or interrupted, and whether they are healthy.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}, InputSchema: schema(inputSchema[struct{}]())},
		s.agents)
	return errors.Join(errs...)
}

// inputSchema is the input schema go-sdk infers for a tool taking In, as
// JSON. go-sdk reads a tool's input schema again on every tools/call (for
// the parameters it maps to headers), marshalling it to JSON first when it
// is a *jsonschema.Schema, as the one it infers is; given as JSON, it is
// only copied. go-sdk validates the arguments against it as against the
// schema it infers.
func inputSchema[In any]() (json.RawMessage, error) {
	schema, err := jsonschema.For[In](&jsonschema.ForOptions{})
	if err != nil {
		return nil, fmt.Errorf("input schema: %w", err)
	}
	return json.Marshal(schema)
}

// delegate serves orchd_delegate.
func (s *Server) delegate(ctx context.Context, req *mcp.CallToolRequest, in DelegateInput) (*mcp.CallToolResult, Status, error) {
	wait, err := s.waitOf(in.WaitSeconds)
	if err != nil {
		return nil, Status{}, err
	}
	if req.Params.RequestState != "" {
		return s.resume(ctx, req, in, wait)
	}
	rec, err := s.start(ctx, req, in)
	if err != nil {
		return nil, Status{}, err
	}
	return s.answer(ctx, req, rec, wait, in)
}

// start starts the delegation in asks for, or finds the one an earlier
// call with the same idempotency key started.
func (s *Server) start(ctx context.Context, req *mcp.CallToolRequest, in DelegateInput) (delegation.Record, error) {
	if dec := s.authz.Decide(ctx, policies.ActionDelegationsCreate, s.authz.Own(ctx, policies.ResourceDelegation)); !dec.Allowed {
		return delegation.Record{}, httpgate.Denied(policies.ActionDelegationsCreate, dec)
	}
	dr := delegation.Request{Text: in.Text, Skill: in.Skill, Agent: in.Agent, Requires: in.Requires,
		Caller: s.authz.CallerOf(ctx), Via: &delegation.Via{Front: "mcp", Client: clientName(req.ClientInfo())}}
	if in.Deadline != "" {
		t, err := parseDeadline(in.Deadline, time.Now())
		if err != nil {
			return delegation.Record{}, err
		}
		dr.Deadline = t
	}
	if in.IdempotencyKey == "" {
		d, err := s.engine.Delegate(ctx, dr)
		if err != nil {
			return delegation.Record{}, err
		}
		return d.Record(), nil
	}
	return s.keys.delegate(ctx, s, dr, in.IdempotencyKey)
}

// answer waits up to wait for the delegation of rec to end or ask for
// input, sending progress meanwhile, and answers with where it stands:
// the agent's question as an input request when the client can ask its
// user (mrtr.go), in being the call's arguments.
func (s *Server) answer(ctx context.Context, req *mcp.CallToolRequest, rec delegation.Record, wait time.Duration, in DelegateInput) (*mcp.CallToolResult, Status, error) {
	p := progressOf(req)
	rec, err := s.follow(ctx, rec, wait, p, settles)
	if err != nil {
		return nil, Status{}, err
	}
	st := s.describe(ctx, rec)
	if res := s.elicit(ctx, req, st, in); res != nil {
		return res, st, nil
	}
	return resultOf(st), st, nil
}

// settles reports whether a delegation in state s has stopped for its
// caller: it ended, or it waits for input.
func settles(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// status serves orchd_status.
func (s *Server) status(ctx context.Context, _ *mcp.CallToolRequest, in DelegationInput) (*mcp.CallToolResult, Status, error) {
	rec, err := s.authz.Read(ctx, s.engine, in.Delegation)
	if err != nil {
		return nil, Status{}, err
	}
	st := s.describe(ctx, rec)
	return resultOf(st), st, nil
}

// wait serves orchd_wait.
func (s *Server) wait(ctx context.Context, req *mcp.CallToolRequest, in WaitInput) (*mcp.CallToolResult, WaitOutput, error) {
	wait, err := s.waitOf(in.WaitSeconds)
	if err != nil {
		return nil, WaitOutput{}, err
	}
	if in.AfterSeq < 0 {
		return nil, WaitOutput{}, fmt.Errorf("%w: afterSeq %d is negative", delegation.ErrBadRequest, in.AfterSeq)
	}
	if _, err := s.authz.Lookup(ctx, s.engine, in.Delegation, policies.ActionDelegationsRead); err != nil {
		return nil, WaitOutput{}, err
	}
	evs, err := s.events(ctx, in.Delegation, in.AfterSeq, wait, progressOf(req))
	if err != nil {
		return nil, WaitOutput{}, err
	}
	rec, err := s.engine.Lookup(ctx, in.Delegation)
	if err != nil {
		return nil, WaitOutput{}, err
	}
	out := WaitOutput{Events: evs, Status: s.describe(ctx, rec)}
	if out.Events == nil {
		out.Events = []Event{}
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: waitText(out)}}}, out, nil
}

// reply serves orchd_reply.
func (s *Server) reply(ctx context.Context, _ *mcp.CallToolRequest, in ReplyInput) (*mcp.CallToolResult, Status, error) {
	if strings.TrimSpace(in.Text) == "" {
		return nil, Status{}, fmt.Errorf("%w: text is empty", delegation.ErrBadRequest)
	}
	if _, err := s.authz.Lookup(ctx, s.engine, in.Delegation, policies.ActionDelegationsSteer); err != nil {
		return nil, Status{}, err
	}
	rec, err := s.engine.Send(ctx, in.Delegation, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(in.Text)))
	if err != nil {
		return nil, Status{}, err
	}
	st := s.describe(ctx, rec)
	return resultOf(st), st, nil
}

// steer serves orchd_steer and orchd_interrupt.
func (s *Server) steer(c steering.Control) mcp.ToolHandlerFor[SteerInput, steering.Receipt] {
	return func(ctx context.Context, _ *mcp.CallToolRequest, in SteerInput) (*mcp.CallToolResult, steering.Receipt, error) {
		r, err := s.signal(ctx, in.Delegation, c, in.Text, in.ReferenceMessageID, in.IdempotencyKey)
		if err != nil {
			return nil, steering.Receipt{}, err
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: receiptText(r)}}}, r, nil
	}
}

// signal passes a steer or interrupt to delegation id for the caller of
// ctx and returns the receipt. key, when set, is the signal's message id,
// so a retry is delivered once.
func (s *Server) signal(ctx context.Context, id string, c steering.Control, text, ref, key string) (steering.Receipt, error) {
	if strings.TrimSpace(text) == "" {
		if c == steering.Steer {
			return steering.Receipt{}, fmt.Errorf("%w: a steer needs text", delegation.ErrBadRequest)
		}
		text = "interrupt"
	}
	if _, err := s.authz.Lookup(ctx, s.engine, id, policies.ActionDelegationsSteer); err != nil {
		return steering.Receipt{}, err
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	if key != "" {
		msg.ID = signalID(id, key)
	}
	if ref != "" {
		msg.Metadata = map[string]any{steering.ReferenceKey: ref}
	}
	return s.engine.Steer(ctx, id, c, msg)
}

// cancel serves orchd_cancel.
func (s *Server) cancel(ctx context.Context, _ *mcp.CallToolRequest, in DelegationInput) (*mcp.CallToolResult, Status, error) {
	if _, err := s.authz.Lookup(ctx, s.engine, in.Delegation, policies.ActionDelegationsCancel); err != nil {
		return nil, Status{}, err
	}
	rec, err := s.engine.Cancel(ctx, in.Delegation)
	if err != nil {
		return nil, Status{}, err
	}
	st := s.describe(ctx, rec)
	return resultOf(st), st, nil
}

// agents serves orchd_agents.
func (s *Server) agents(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, AgentsOutput, error) {
	if dec := s.authz.Decide(ctx, policies.ActionAgentsList, policies.Resource{Kind: policies.ResourceAgent}); !dec.Allowed {
		return nil, AgentsOutput{}, httpgate.Denied(policies.ActionAgentsList, dec)
	}
	out := AgentsOutput{Agents: []AgentSummary{}}
	for _, a := range s.registry.List() {
		sum := AgentSummary{ID: a.ID, Name: a.Name, Steerable: a.Steering.Steerable,
			Interruptible: a.Steering.Interruptible, Healthy: a.Healthy, Unhealthy: a.UnhealthyReason}
		for _, sk := range a.Skills {
			sum.Skills = append(sum.Skills, sk.ID)
		}
		for _, p := range a.Protocols {
			if v := p.Version; v != "" && !slices.Contains(sum.Versions, v) {
				sum.Versions = append(sum.Versions, v)
			}
		}
		for name, c := range a.Capabilities {
			sum.Capabilities = append(sum.Capabilities, name+" ("+c.Tier.String()+")")
		}
		slices.Sort(sum.Capabilities)
		out.Agents = append(out.Agents, sum)
	}
	return nil, out, nil
}

// waitOf is the wait waitSeconds asks for: the default when it is not
// given, an error naming the field when it is out of range.
func (s *Server) waitOf(waitSeconds *int) (time.Duration, error) {
	if waitSeconds == nil {
		return s.cfg.Wait, nil
	}
	if n := *waitSeconds; n < 0 || n > MaxWaitSeconds {
		return 0, fmt.Errorf("%w: waitSeconds %d is not between 0 and %d", delegation.ErrBadRequest, n, MaxWaitSeconds)
	}
	return time.Duration(*waitSeconds) * time.Second, nil
}

// parseDeadline reads a deadline as an RFC 3339 time or a duration from
// now.
func parseDeadline(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(d), nil
	}
	return time.Time{}, fmt.Errorf("%w: deadline %q is neither an RFC 3339 time nor a positive duration such as 30m", delegation.ErrBadRequest, s)
}

// clientName is the client's name and version as it gave them, bounded.
func clientName(impl *mcp.Implementation) string {
	if impl == nil {
		return ""
	}
	name := strings.TrimSpace(impl.Name + " " + impl.Version)
	if len(name) > maxClientName {
		name = name[:maxClientName]
	}
	return strings.ToValidUTF8(name, "")
}

// maxClientName bounds the client name a record keeps.
const maxClientName = 128
