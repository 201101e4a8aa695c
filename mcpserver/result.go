package mcpserver

import (
	"context"
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/steering"
)

// What a tool answers: the Status as structured content, and text a model
// reads first: the agent's answer, its question, or what to call next.

// resultOf is the tool result of st. Work that failed or was rejected is
// a tool error (isError), which a model sees and can act on; every other
// state, a still-running one included, is an ordinary result.
func resultOf(st Status) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: statusText(st)}},
		IsError: st.State == stateName(a2a.TaskStateFailed) || st.State == stateName(a2a.TaskStateRejected)}
}

// statusText is st as text for a model.
func statusText(st Status) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Delegation %s is %s", st.Delegation, st.State)
	if st.Agent != "" {
		fmt.Fprintf(&b, " (agent %s)", st.Agent)
	}
	b.WriteString(".")
	switch {
	case st.Error != "":
		fmt.Fprintf(&b, "\nError: %s", st.Error)
	case st.Message != "":
		fmt.Fprintf(&b, "\n\n%s", st.Message)
	}
	for _, a := range st.Artifacts {
		name := a.Name
		if name == "" {
			name = "artifact"
		}
		fmt.Fprintf(&b, "\n\n[%s]\n%s", name, a.Text)
	}
	if st.Next != "" {
		fmt.Fprintf(&b, "\n\n%s", st.Next)
	}
	return b.String()
}

// waitText is out as text for a model.
func waitText(out WaitOutput) string {
	var b strings.Builder
	if len(out.Events) == 0 {
		b.WriteString("No new events.\n")
	}
	for _, e := range out.Events {
		fmt.Fprintf(&b, "#%d %s (%s)", e.Seq, e.Kind, e.State)
		if e.Text != "" {
			fmt.Fprintf(&b, ": %s", e.Text)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
	b.WriteString(statusText(out.Status))
	return b.String()
}

// receiptText is r as text for a model.
func receiptText(r steering.Receipt) string {
	hops := make([]string, 0, len(r.Hops))
	for _, h := range r.Hops {
		hops = append(hops, fmt.Sprintf("%s #%d", h.Agent, h.Seq))
	}
	s := fmt.Sprintf("The %s was accepted by every hop: %s.", r.Control, strings.Join(hops, " → "))
	if r.Duplicate {
		s += " It was a retry of one already delivered, so it was not delivered again."
	}
	return s
}

// describe is what the tools say of rec: statusOf(rec), with the agent's
// latest words and its requests for input, read from the delegation's
// log, and its steering state.
func (s *Server) describe(ctx context.Context, rec delegation.Record) Status {
	st := statusOf(rec)
	v := s.view(ctx, rec, st.Message == "")
	st.Requests = v.requests
	if st.Message == "" {
		st.Message = v.latest
	}
	st.Steerable, st.Interruptible, st.Receipts = v.steerable, v.interruptible, v.receipts
	st.Next = next(st)
	return st
}

// logView is what describe reads of a delegation beyond its record: from
// its log, its requests for input and, when wanted, the agent's latest
// words; and its steering state, with the latest receipts.
type logView struct {
	requests                 []Request
	latest                   string
	steerable, interruptible bool
	receipts                 []steering.Receipt
}

// view reads the logView of the delegation of rec; latest says whether
// the agent's latest words are wanted. A delegation that has ended
// changes no more once its log holds the record's last event (a late
// receipt comes with an event of its own), so its view is read once and
// kept (ended.go); any other is read each time.
func (s *Server) view(ctx context.Context, rec delegation.Record, latest bool) logView {
	key := endedKey{id: rec.ID, lastEvent: rec.LastEvent, latest: latest}
	if rec.State.Terminal() {
		if v, ok := s.ended.get(key); ok {
			return v
		}
	}
	var v logView
	// The steering state first: a receipt given after the log is read
	// comes with an event past the record's last.
	steered := false
	if ss, err := s.engine.SteeringOf(ctx, rec.ID); err == nil {
		steered = true
		v.steerable, v.interruptible, v.receipts = ss.Steerable, ss.Interruptible, ss.Receipts
		if n := len(v.receipts); n > maxReceiptsShown {
			v.receipts = v.receipts[n-maxReceiptsShown:]
		}
	}
	log, last, err := s.scan(ctx, rec.ID)
	if err != nil {
		s.log.WarnContext(ctx, "read the log of a delegation", "delegation", rec.ID, "error", err)
	}
	v.requests = log.list
	if latest {
		v.latest = log.latest
	}
	if rec.State.Terminal() && steered && err == nil && last == rec.LastEvent {
		s.ended.put(key, v)
	}
	return v
}

// maxScannedEvents bounds the events read to list a delegation's
// requests: a longer log lists those of its first events only.
const maxScannedEvents = 20000

// scan folds delegation id's log (requestLog), and returns the number of
// the last event it read.
func (s *Server) scan(ctx context.Context, id string) (requestLog, int64, error) {
	var r requestLog
	after := int64(0)
	for after < maxScannedEvents {
		evs, _, err := s.engine.Events(ctx, id, after, eventBatch)
		if err != nil {
			return r, after, err
		}
		for _, ev := range evs {
			r.add(ev)
			after = ev.Seq
		}
		if len(evs) < eventBatch {
			break
		}
	}
	return r, after, nil
}

// requestLog folds a delegation's events into the agent's latest words
// and its requests for input: a request opens when the state turns
// INPUT_REQUIRED or AUTH_REQUIRED and is resolved by the caller's input,
// or by the agent going on without it or the work ending.
type requestLog struct {
	// latest is the text of the agent's latest status or message.
	latest string
	list   []Request
	// open is the index in list of the open request, -1 (or list empty)
	// when none is open.
	open int
}

// add folds ev in.
func (r *requestLog) add(ev delegation.Event) {
	if ev.Message != nil && ev.Message.Role != a2a.MessageRoleUser {
		r.latest = text(ev.Message.Parts)
	}
	open := len(r.list) > 0 && r.list[r.open].State == "blocked"
	switch {
	case !open && (ev.State == a2a.TaskStateInputRequired || ev.State == a2a.TaskStateAuthRequired):
		req := Request{ID: fmt.Sprintf("input-%d", ev.Seq), Kind: "input", State: "blocked"}
		switch {
		case ev.State == a2a.TaskStateAuthRequired:
			req.Kind = "auth"
		case ev.Metadata[steering.InterruptedKey] == true:
			req.Kind = "interrupt"
		}
		if ev.Message != nil {
			req.Message = text(ev.Message.Parts)
		}
		r.list = append(r.list, req)
		r.open = len(r.list) - 1
	case open && ev.Kind == "message" && ev.Message != nil && ev.Message.Role == a2a.MessageRoleUser:
		r.resolve("answered", ev.Seq)
	case open && ev.State.Terminal():
		r.resolve("ended", ev.Seq)
	case open && ev.State != a2a.TaskStateInputRequired && ev.State != a2a.TaskStateAuthRequired:
		r.resolve("withdrawn", ev.Seq)
	}
}

// resolve resolves the open request at event seq.
func (r *requestLog) resolve(how string, seq int64) {
	req := &r.list[r.open]
	req.State, req.Resolution, req.ResolvedAt = "resolved", how, seq
}
