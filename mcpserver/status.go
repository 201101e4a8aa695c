package mcpserver

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/steering"
)

// Status is what the tools say of a delegation: its handle, where it
// stands, and what to call next. Every tool that names a delegation
// answers with it, as structured content and as text.
type Status struct {
	// Delegation is the handle every other tool takes.
	Delegation string `json:"delegation" jsonschema:"the delegation's id: pass it as delegation to orchd_status, orchd_wait, orchd_reply, orchd_steer, orchd_interrupt and orchd_cancel"`
	// State is the delegation's state, lower case without the A2A prefix.
	State string `json:"state" jsonschema:"submitted, working, input_required, auth_required, completed, failed, canceled or rejected"`
	// Agent is the registered agent doing the work.
	Agent string `json:"agent,omitempty" jsonschema:"the agent doing the work"`
	// Message is the agent's latest words: its question while input is
	// required, its answer once completed, its status otherwise.
	Message string `json:"message,omitempty" jsonschema:"the agent's latest words: its question when input is required, its answer when completed"`
	// Artifacts are what the agent produced, as text.
	Artifacts []Artifact `json:"artifacts,omitempty" jsonschema:"what the agent produced"`
	// Error says why a failed delegation failed.
	Error string `json:"error,omitempty"`
	// Seq is the number of the delegation's latest event: orchd_wait
	// with afterSeq set to it returns only what happens next.
	Seq int64 `json:"seq" jsonschema:"the latest event's number; pass it as afterSeq to orchd_wait"`
	// Steerable and Interruptible say whether the chain takes steers and
	// interrupts (every hop's card advertises the mode).
	Steerable     bool `json:"steerable" jsonschema:"whether orchd_steer can reach the work"`
	Interruptible bool `json:"interruptible" jsonschema:"whether orchd_interrupt can reach the work"`
	// Requests are the agent's requests for input, open and resolved,
	// oldest first; a request is never removed, only resolved.
	Requests []Request `json:"requests,omitempty" jsonschema:"the agent's requests for input: open ones are blocked; resolved ones say how"`
	// Receipts are the latest steers' and interrupts' receipts.
	Receipts []steering.Receipt `json:"receipts,omitempty"`
	// Next says what to call next, for a model.
	Next string `json:"next,omitempty"`
}

// Artifact is an artifact as text: its text parts one after the other,
// as the agent streamed them, other parts as JSON on lines of their own.
type Artifact struct {
	Name string `json:"name,omitempty"`
	Text string `json:"text"`
}

// Request is one request of the agent for input, as the landscape of MCP
// steering asks for them: never removed, resolved with a reason.
type Request struct {
	// ID names the request: "input-" and the number of the event that
	// asked.
	ID string `json:"id"`
	// Kind is "input" (the agent asked a question), "auth" (it needs the
	// caller to authenticate somewhere) or "interrupt" (the work was
	// interrupted and waits to be told what next).
	Kind string `json:"kind"`
	// State is "blocked" while the work waits for the answer, then
	// "resolved".
	State string `json:"state"`
	// Message is what the agent asked.
	Message string `json:"message,omitempty"`
	// Resolution says how a resolved request was resolved: "answered"
	// (input was sent), "withdrawn" (the agent went on without it) or
	// "ended" (the work ended first).
	Resolution string `json:"resolution,omitempty"`
	// ResolvedAt is the number of the event that resolved it.
	ResolvedAt int64 `json:"resolvedAt,omitempty"`
}

// stateName is an A2A state as the tools name it: "TASK_STATE_INPUT_REQUIRED"
// is "input_required".
func stateName(s a2a.TaskState) string {
	return strings.ToLower(strings.TrimPrefix(string(s), "TASK_STATE_"))
}

// statusOf is what the tools say of rec alone, without what its log and
// steering state add, nor what to call next, which depends on them
// (Server.describe).
func statusOf(rec delegation.Record) Status {
	st := Status{Delegation: rec.ID, State: stateName(rec.State), Agent: rec.Downstream.Agent, Error: rec.Error, Seq: rec.LastEvent}
	if rec.Result != nil {
		st.Message = text(rec.Result.Parts)
	}
	for _, a := range rec.Artifacts {
		st.Artifacts = append(st.Artifacts, Artifact{Name: a.Name, Text: artifactText(a.Parts)})
	}
	return st
}

// maxReceiptsShown bounds the receipts a status lists: the latest.
const maxReceiptsShown = 8

// next says what a model calls next for a delegation in st's state.
func next(st Status) string {
	id := st.Delegation
	switch st.State {
	case "submitted", "working":
		s := "Still working. Call orchd_wait with delegation=" + id + " and afterSeq=" + strconv.FormatInt(st.Seq, 10) + " to follow it"
		if st.Steerable {
			s += ", orchd_steer to change its course"
		}
		return s + ", or orchd_cancel to stop it."
	case "input_required":
		return "The agent asks for input. Call orchd_reply with delegation=" + id + " and the answer as text."
	case "auth_required":
		return "The agent needs the user to authenticate as its message says. Once done, call orchd_reply with delegation=" + id + "."
	}
	return ""
}

// text joins the text of parts, a part to a line; a part that is not
// text is written as JSON.
func text(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		writePart(&b, p)
	}
	return b.String()
}

// artifactText is the text of an artifact's parts. An agent streams an
// artifact in chunks, which the delegation keeps as one part each
// (delegation.FoldArtifact), so text parts follow each other as they
// came, with nothing put between them; a part that is not text is
// written as JSON on a line of its own.
func artifactText(parts a2a.ContentParts) string {
	var b strings.Builder
	wasText := true
	for _, p := range parts {
		_, isText := p.Content.(a2a.Text)
		if b.Len() > 0 && !(isText && wasText) {
			b.WriteString("\n")
		}
		writePart(&b, p)
		wasText = isText
	}
	return b.String()
}

// writePart writes p to b: its text, or, for a part that is not text,
// the part as JSON.
func writePart(b *strings.Builder, p *a2a.Part) {
	if t, ok := p.Content.(a2a.Text); ok {
		b.WriteString(string(t))
		return
	}
	if j, err := json.Marshal(p); err == nil {
		b.Write(j)
	}
}
