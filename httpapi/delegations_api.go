package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/steering"
)

// sseBatch is how many events an event stream reads at a time.
const sseBatch = 256

// InputRequest is the body of POST /v1/delegations/{id}/messages.
type InputRequest struct {
	// Text is the input as plain text; give it or Message.
	Text string `json:"text,omitempty"`
	// Message is the input as an A2A message.
	Message *a2a.Message `json:"message,omitempty"`
}

// DelegationList is the body of GET /v1/delegations.
type DelegationList struct {
	// Delegations are the matching delegations, newest first.
	Delegations []delegation.Record `json:"delegations"`
	// NextPageToken, passed as ?pageToken=, continues the listing; it is
	// absent on the last page.
	NextPageToken string `json:"nextPageToken,omitempty"`
}

func (a *API) delegate(w http.ResponseWriter, r *http.Request) {
	// The body is a delegation.Request: its JSON fields are the API's, and
	// the chain and caller, which only A2A callers set, are not in JSON.
	var body delegation.Request
	if err := decodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	if !a.allow(w, r, policies.ActionDelegationsCreate, a.authz.Own(r.Context(), policies.ResourceDelegation)) {
		return
	}
	body.Caller = a.authz.CallerOf(r.Context())
	body.Via = &delegation.Via{Front: "api"}
	d, err := a.delegations.Delegate(r.Context(), body)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	w.Header().Set("Location", "/v1/delegations/"+d.ID())
	a.reply(w, http.StatusCreated, d.Record())
}

func (a *API) listDelegations(w http.ResponseWriter, r *http.Request) {
	state, err := parseState(r.URL.Query().Get("state"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	if !a.allow(w, r, policies.ActionDelegationsList, a.authz.Own(r.Context(), policies.ResourceDelegation)) {
		return
	}
	q := delegation.Query{State: state, PageToken: r.URL.Query().Get("pageToken"), Visible: a.authz.Visible(r.Context())}
	if s := r.URL.Query().Get("pageSize"); s != "" {
		if q.PageSize, err = strconv.Atoi(s); err != nil || q.PageSize == 0 {
			a.fail(w, r, fmt.Errorf("%w: pageSize %q is not between 1 and %d", delegation.ErrBadRequest, s, delegation.MaxPageSize))
			return
		}
	}
	page, err := a.delegations.List(r.Context(), q)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.reply(w, http.StatusOK, DelegationList{Delegations: page.Records, NextPageToken: page.NextPageToken})
}

// parseState accepts "working" or "TASK_STATE_WORKING".
func parseState(s string) (a2a.TaskState, error) {
	if s == "" {
		return a2a.TaskStateUnspecified, nil
	}
	st := a2a.TaskState(strings.ToUpper(s))
	if !strings.HasPrefix(string(st), "TASK_STATE_") {
		st = "TASK_STATE_" + st
	}
	switch st {
	case a2a.TaskStateSubmitted, a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateAuthRequired,
		a2a.TaskStateCompleted, a2a.TaskStateFailed, a2a.TaskStateCanceled, a2a.TaskStateRejected:
		return st, nil
	}
	return "", &httpgate.Error{Status: http.StatusBadRequest, Code: "invalid_argument", Msg: fmt.Sprintf("state %q: want submitted, working, input_required, auth_required, completed, failed, canceled or rejected", s)}
}

func (a *API) getDelegation(w http.ResponseWriter, r *http.Request) {
	rec, err := a.authz.Read(r.Context(), a.delegations, r.PathValue("id"))
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.reply(w, http.StatusOK, rec)
}

func (a *API) delegationInput(w http.ResponseWriter, r *http.Request) {
	var body InputRequest
	if err := decodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	if _, ok := a.delegationFor(w, r, r.PathValue("id"), policies.ActionDelegationsSteer); !ok {
		return
	}
	msg := body.Message
	switch {
	case msg == nil && strings.TrimSpace(body.Text) == "":
		a.fail(w, r, &httpgate.Error{Status: http.StatusBadRequest, Code: "invalid_argument", Msg: "body needs text or message"})
		return
	case msg != nil && body.Text != "":
		a.fail(w, r, &httpgate.Error{Status: http.StatusBadRequest, Code: "invalid_argument", Msg: "give text or message, not both"})
		return
	case msg == nil:
		msg = a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(body.Text))
	}
	rec, err := a.delegations.Send(r.Context(), r.PathValue("id"), msg)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.reply(w, http.StatusOK, rec)
}

// SteerRequest is the body of POST /v1/delegations/{id}:steer and
// :interrupt.
type SteerRequest struct {
	// Text is the signal's message as plain text; give it or Message. An
	// interrupt may give neither.
	Text string `json:"text,omitempty"`
	// Message is the signal's message as an A2A message; its id makes
	// retries safe.
	Message *a2a.Message `json:"message,omitempty"`
	// ReferenceMessageID names the output the signal reacts to.
	ReferenceMessageID string `json:"referenceMessageId,omitempty"`
}

// delegationAction serves POST /v1/delegations/{id}:cancel, :steer and
// :interrupt.
func (a *API) delegationAction(w http.ResponseWriter, r *http.Request) {
	id, verb, _ := strings.Cut(r.PathValue("action"), ":")
	action := policies.ActionDelegationsSteer
	if verb == "cancel" {
		action = policies.ActionDelegationsCancel
	}
	if verb == "cancel" || verb == "steer" || verb == "interrupt" {
		if _, ok := a.delegationFor(w, r, id, action); !ok {
			return
		}
	}
	switch verb {
	case "cancel":
		rec, err := a.delegations.Cancel(r.Context(), id)
		if err != nil {
			a.fail(w, r, err)
			return
		}
		a.reply(w, http.StatusOK, rec)
	case "steer", "interrupt":
		a.steer(w, r, id, steering.Control(verb))
	default:
		a.fail(w, r, &httpgate.Error{Status: http.StatusNotFound, Code: "not_found",
			Msg: "no such endpoint: POST " + r.URL.Path + " (did you mean POST /v1/delegations/{id}:cancel, :steer or :interrupt?)"})
	}
}

// steer passes a steer or interrupt to a delegation and answers with the
// receipt.
func (a *API) steer(w http.ResponseWriter, r *http.Request, id string, c steering.Control) {
	var body SteerRequest
	if err := decodeBody(r, &body); err != nil {
		a.fail(w, r, err)
		return
	}
	msg := body.Message
	switch {
	case msg != nil && body.Text != "":
		a.fail(w, r, &httpgate.Error{Status: http.StatusBadRequest, Code: "invalid_argument", Msg: "give text or message, not both"})
		return
	case msg == nil && strings.TrimSpace(body.Text) == "" && c == steering.Steer:
		a.fail(w, r, &httpgate.Error{Status: http.StatusBadRequest, Code: "invalid_argument", Msg: "a steer needs text or message"})
		return
	case msg == nil && strings.TrimSpace(body.Text) == "":
		msg = a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("interrupt"))
	case msg == nil:
		msg = a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(body.Text))
	}
	if body.ReferenceMessageID != "" {
		m := *msg
		m.Metadata = maps.Clone(m.Metadata)
		if m.Metadata == nil {
			m.Metadata = map[string]any{}
		}
		m.Metadata[steering.ReferenceKey] = body.ReferenceMessageID
		msg = &m
	}
	receipt, err := a.delegations.Steer(r.Context(), id, c, msg)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	a.reply(w, http.StatusOK, receipt)
}

// delegationEvents streams a delegation's events as server-sent events:
// "id: SEQ", "event: KIND", "data: EVENT-JSON". A client resumes after
// the last event it saw with the Last-Event-ID header (or ?after=SEQ). The
// stream ends after the delegation's last event; once it started, it
// stays open while the store is unavailable (Engine.FollowEvents).
func (a *API) delegationEvents(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	after := int64(0)
	for _, s := range []string{r.Header.Get("Last-Event-ID"), r.URL.Query().Get("after")} {
		if s == "" {
			continue
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 {
			a.fail(w, r, &httpgate.Error{Status: http.StatusBadRequest, Code: "invalid_argument", Msg: fmt.Sprintf("event id %q is not a sequence number", s)})
			return
		}
		after = n
	}
	if _, ok := a.delegationFor(w, r, id, policies.ActionDelegationsRead); !ok {
		return
	}
	// The first read answers for an unknown id before the stream starts.
	evs, ended, err := a.delegations.Events(r.Context(), id, after, sseBatch)
	if err != nil {
		a.fail(w, r, err)
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		a.fail(w, r, errors.New("streaming unsupported by this connection"))
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	// The stream ends when orchd begins to stop. No goroutine waits for
	// that: a stream held for hours would hold one all that time.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(a.stopping, cancel)()
	out := newSSEWriter(w, flusher, a.heartbeat, cancel)
	defer out.close()
	for {
		ok := out.write(func(w io.Writer) error {
			for _, ev := range evs {
				b, err := json.Marshal(ev)
				if err != nil {
					a.log.Warn("encode event", "error", err)
					return err
				}
				if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.Seq, ev.Kind, b); err != nil {
					return err
				}
				after = ev.Seq
			}
			return nil
		})
		if !ok || ended {
			return
		}
		// Wait for the next event, as long as it takes, and through a
		// moment the store is out of reach: the keep-alives say we are
		// alive meanwhile.
		if len(evs) < sseBatch {
			if err := a.delegations.WaitEvents(ctx, id, after); err != nil {
				if ctx.Err() == nil {
					a.log.Warn("wait for delegation events", "delegation", id, "error", err)
				}
				return
			}
		}
		if evs, ended, err = a.delegations.FollowEvents(ctx, id, after, sseBatch); err != nil {
			if ctx.Err() == nil {
				a.log.Warn("read delegation events", "delegation", id, "error", err)
			}
			return
		}
	}
}

// sseWriter writes an event stream for its handler, and a keep-alive
// comment whenever it stayed silent for a heartbeat. The keep-alive is a
// timer, not a goroutine, and does not end the handler's wait for events:
// a wait ended at every heartbeat subscribed to the log and read its tail
// again, each time, for every follower of a quiet delegation.
type sseWriter struct {
	mu        sync.Mutex
	w         io.Writer
	flusher   http.Flusher
	heartbeat time.Duration
	gone      context.CancelFunc // called when the client is gone
	timer     *time.Timer
	closed    bool
}

// newSSEWriter starts the keep-alives on w; gone is called when a write
// fails.
func newSSEWriter(w io.Writer, flusher http.Flusher, heartbeat time.Duration, gone context.CancelFunc) *sseWriter {
	s := &sseWriter{w: w, flusher: flusher, heartbeat: heartbeat, gone: gone}
	s.mu.Lock()
	defer s.mu.Unlock() // the first keep-alive waits for the timer to be set
	s.timer = time.AfterFunc(heartbeat, s.keepAlive)
	return s
}

// keepAlive writes a comment, and sets the next one.
func (s *sseWriter) keepAlive() {
	if !s.write(func(w io.Writer) error { _, err := io.WriteString(w, ": keep-alive\n\n"); return err }) {
		s.gone()
	}
}

// write runs fill on the stream, flushes it and sets the next keep-alive a
// heartbeat away; false when the stream is closed or a write failed.
func (s *sseWriter) write(fill func(io.Writer) error) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	if err := fill(s.w); err != nil {
		return false
	}
	s.flusher.Flush()
	s.timer.Reset(s.heartbeat)
	return true
}

// close stops the keep-alives and any write, before the handler returns.
func (s *sseWriter) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.timer.Stop()
}
