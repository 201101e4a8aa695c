package mcpserver

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/policies"
)

// Asking the client when the agent asks (multi round-trip requests).
//
// When the work orchd_delegate waits on stops for input and the client
// can elicit, the call answers with the agent's question as an input
// request and a request state; the client asks its user and calls again
// with the answer and the state, and orchd passes the answer to the agent
// and goes on waiting. (The SDK asks an older client itself, with
// elicitation/create, and calls again for it.)
//
// The request state comes back from the client, so it is signed (HMAC-
// SHA256 with Config.StateKeys) and bound to the caller, the delegation,
// the tool's arguments and an expiry. It is good once: it names the
// agent's request, and a request no longer open (the answer was sent, or
// the agent went on) refuses it. That check reads the delegation's own
// log, so it holds on every replica and after a restart, with no record
// of used states. tasks/update answers through the same path
// (answerWith).

// requestState is what a question's request state carries.
type requestState struct {
	// V is the format's version, 1.
	V int `json:"v"`
	// Caller is the identity key of the caller asked.
	Caller string `json:"c"`
	// Delegation is the delegation whose agent asked.
	Delegation string `json:"d"`
	// Args is the SHA-256 of the call's arguments.
	Args string `json:"a"`
	// Key is the input request's key.
	Key string `json:"k"`
	// Expires is when the state stops being accepted (Unix seconds).
	Expires int64 `json:"e"`
}

// stateSealer signs and opens request states.
type stateSealer struct {
	keys [][]byte
	ttl  time.Duration
}

// errBadState is the refusal of a request state that was altered, has
// expired, or is someone else's.
var errBadState = fmt.Errorf("%w: requestState is not valid here: call orchd_status for the delegation, then orchd_reply", delegation.ErrBadRequest)

// seal returns st signed, as a request state.
func (s *stateSealer) seal(st requestState) string {
	body, _ := json.Marshal(st) // plain fields: cannot fail
	mac := hmac.New(sha256.New, s.keys[0])
	mac.Write(body)
	return base64.RawURLEncoding.EncodeToString(body) + "." + base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// open returns the request state sealed in v, refusing one whose
// signature no key verifies, or that expired by now.
func (s *stateSealer) open(v string, now time.Time) (requestState, error) {
	b64, sig64, ok := strings.Cut(v, ".")
	if !ok || len(v) > maxStateBytes {
		return requestState{}, errBadState
	}
	// Strict: one encoding per state, so no other string opens to it.
	enc := base64.RawURLEncoding.Strict()
	body, err1 := enc.DecodeString(b64)
	sig, err2 := enc.DecodeString(sig64)
	if err1 != nil || err2 != nil {
		return requestState{}, errBadState
	}
	valid := false
	for _, k := range s.keys {
		mac := hmac.New(sha256.New, k)
		mac.Write(body)
		valid = valid || hmac.Equal(sig, mac.Sum(nil))
	}
	var st requestState
	if !valid || json.Unmarshal(body, &st) != nil || st.V != 1 || now.Unix() > st.Expires {
		return requestState{}, errBadState
	}
	return st, nil
}

// maxStateBytes bounds a request state: those orchd seals are far
// smaller.
const maxStateBytes = 2048

// callerKey is the identity key of the caller of ctx.
func (s *Server) callerKey(ctx context.Context) string {
	c := s.authz.CallerOf(ctx)
	return auth.Identity{Method: c.Method, Issuer: c.Issuer, ID: c.Principal, Tenant: c.Tenant}.Key()
}

// argsDigest is the SHA-256 of in as JSON.
func argsDigest(in DelegateInput) string {
	b, _ := json.Marshal(in) // plain fields: cannot fail
	sum := sha256.Sum256(b)
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// elicit returns the input request asking the client's user what the
// agent of st asks, when the work waits for input and the client can
// elicit in the form needed; nil otherwise, for the ordinary answer.
func (s *Server) elicit(ctx context.Context, req *mcp.CallToolRequest, st Status, in DelegateInput) *mcp.CallToolResult {
	open := openRequest(st)
	if open.ID == "" {
		return nil
	}
	ep := elicitation(req.ClientCapabilities(), st)
	if ep == nil {
		return nil
	}
	state := s.states.seal(requestState{V: 1, Caller: s.callerKey(ctx), Delegation: st.Delegation, Args: argsDigest(in),
		Key: open.ID, Expires: time.Now().Add(s.states.ttl).Unix()})
	return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{open.ID: ep}, RequestState: state}
}

// elicitation is the elicitation asking the client's user the open
// request of st, in a mode caps declares; nil when the work does not wait
// for input or the client cannot be asked so.
func elicitation(caps *mcp.ClientCapabilities, st Status) *mcp.ElicitParams {
	if caps == nil || caps.Elicitation == nil {
		return nil
	}
	// A client that declared elicitation with no mode takes forms.
	form := caps.Elicitation.Form != nil || caps.Elicitation.URL == nil
	switch st.State {
	case "input_required":
		if form {
			return &mcp.ElicitParams{Mode: "form", Message: question(st), RequestedSchema: answerSchema}
		}
	case "auth_required":
		// Never a form asking for a secret: the user goes to the agent's
		// page, or confirms being done.
		if u := firstURL(st.Message); u != "" && caps.Elicitation.URL != nil {
			return &mcp.ElicitParams{Mode: "url", Message: question(st), URL: u}
		}
		if form {
			return &mcp.ElicitParams{Mode: "form", Message: question(st) + "\n\nConfirm once you have done it.", RequestedSchema: doneSchema}
		}
	}
	return nil
}

// answerSchema is the form of a question: one answer.
var answerSchema = map[string]any{"type": "object", "required": []string{"answer"},
	"properties": map[string]any{"answer": map[string]any{"type": "string", "title": "Answer"}}}

// doneSchema is the form of an authentication the user does elsewhere:
// a confirmation, never a secret.
var doneSchema = map[string]any{"type": "object", "required": []string{"done"},
	"properties": map[string]any{"done": map[string]any{"type": "boolean", "title": "Done"}}}

// question is what the user is asked for st.
func question(st Status) string {
	if openRequest(st).Kind == "interrupt" {
		return fmt.Sprintf("The work of agent %s was interrupted. What should it do next?", st.Agent)
	}
	q := st.Message
	if q == "" {
		q = "The agent needs input to go on."
	}
	return fmt.Sprintf("Agent %s asks: %s", st.Agent, q)
}

// urlPattern finds the first http(s) URL in a text.
var urlPattern = regexp.MustCompile(`https?://[^\s"'<>]+`)

// firstURL returns the first http(s) URL in s, "" when none.
func firstURL(s string) string { return urlPattern.FindString(s) }

// resume serves orchd_delegate called again with the answer to its
// question: it checks the request state, passes the answer on to the
// agent and goes on waiting.
func (s *Server) resume(ctx context.Context, req *mcp.CallToolRequest, in DelegateInput, wait time.Duration) (*mcp.CallToolResult, Status, error) {
	st, err := s.states.open(req.Params.RequestState, time.Now())
	if err != nil {
		return nil, Status{}, err
	}
	if st.Caller != s.callerKey(ctx) || st.Args != argsDigest(in) {
		return nil, Status{}, errBadState
	}
	er, _ := req.Params.InputResponses[st.Key].(*mcp.ElicitResult)
	if er == nil {
		return nil, Status{}, fmt.Errorf("%w: inputResponses has no answer for %q", delegation.ErrBadRequest, st.Key)
	}
	rec, err := s.answerWith(ctx, st.Delegation, st.Key, er)
	if errors.Is(err, errNotOutstanding) {
		return nil, Status{}, fmt.Errorf("%w: requestState was used already, or the delegation has moved on: call orchd_status for delegation %s", delegation.ErrBadRequest, st.Delegation)
	}
	if err != nil {
		return nil, Status{}, err
	}
	return s.answer(ctx, req, rec, wait, in)
}

// errNotOutstanding means an answer names a request of the agent that is
// not open: never asked, answered already, or withdrawn.
var errNotOutstanding = errors.New("no such open request")

// answerWith passes er, the client's answer to request key of delegation
// id, on to the agent, once: a request that is not open (answered
// already, or the agent went on) fails with errNotOutstanding. A
// dismissed question (cancel) sends nothing and leaves it open. Answers
// to one delegation are taken one at a time.
func (s *Server) answerWith(ctx context.Context, id, key string, er *mcp.ElicitResult) (delegation.Record, error) {
	release, err := s.keys.busy.Lock(ctx, "answer "+id)
	if err != nil {
		return delegation.Record{}, err
	}
	defer release()
	rec, err := s.authz.Lookup(ctx, s.engine, id, policies.ActionDelegationsSteer)
	if err != nil {
		return delegation.Record{}, err
	}
	log, _, err := s.scan(ctx, id)
	if err != nil {
		return delegation.Record{}, err
	}
	if open := openRequest(Status{Requests: log.list}); open.ID != key || rec.State.Terminal() {
		return delegation.Record{}, fmt.Errorf("%w: %q", errNotOutstanding, key)
	}
	var text string
	switch er.Action {
	case "accept":
		text = answerText(er.Content)
	case "decline":
		text = "The user declined to answer."
	case "cancel":
		return rec, nil
	default:
		return delegation.Record{}, fmt.Errorf("%w: the answer to %q has action %q: want accept, decline or cancel", delegation.ErrBadRequest, key, er.Action)
	}
	rec, err = s.engine.Send(ctx, id, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text)))
	if errors.Is(err, delegation.ErrNotWaiting) {
		return delegation.Record{}, fmt.Errorf("%w: %q", errNotOutstanding, key)
	}
	return rec, err
}

// answerText is the text of a form's answer: its answer field, or, for a
// confirmation or a form of the agent's own, the content as JSON.
func answerText(content map[string]any) string {
	if a, ok := content["answer"].(string); ok {
		return a
	}
	if done, ok := content["done"].(bool); ok && len(content) == 1 {
		if done {
			return "Done."
		}
		return "Not done."
	}
	b, _ := json.Marshal(content)
	return string(b)
}
