package conformance

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	grpcv0 "github.com/a2aproject/a2a-go/v2/a2agrpc/v0"
	grpcv1 "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"google.golang.org/grpc"
)

// The reference agent's A2A endpoints, under its base URL: the same
// layout orchd serves, so a row's binding and version name one interface
// of either card.
const (
	refJSONRPC   = "/a2a/jsonrpc"
	refREST      = "/a2a/rest"
	refJSONRPC03 = "/a2a/v0.3/jsonrpc"
	refREST03    = "/a2a/v0.3/rest"
)

// refUser is whom the reference agent's task store keys every task on:
// a loopback agent without authentication lists the anonymous caller's
// tasks, as orchd does.
const refUser = "anonymous"

// errorTexts are the A2A errors the reference agent answers a message
// "error <code>" with, before any task exists: every A2A error class can
// then be asked for by text, through any binding and any number of hops.
var errorTexts = map[int]error{
	-32001: a2a.ErrTaskNotFound,
	-32002: a2a.ErrTaskNotCancelable,
	-32003: a2a.ErrPushNotificationNotSupported,
	-32004: a2a.ErrUnsupportedOperation,
	-32005: a2a.ErrUnsupportedContentType,
	-32006: a2a.ErrInvalidAgentResponse,
	-32007: a2a.ErrExtendedCardNotConfigured,
	-32008: a2a.ErrExtensionSupportRequired,
	-32009: a2a.ErrVersionNotSupported,
}

// refAgent is a reference A2A agent built only from a2a-go v2.4.0: its
// own task store, push config store and extended card, JSON-RPC and
// HTTP+JSON for 1.0 and (through a2av0) 0.3, and gRPC for both. What it
// does is chosen by the first word of a message's text (see Execute), so
// the same check gives the same answer wherever the message comes from.
type refAgent struct {
	URL string
	// GRPC is the host:port of its gRPC interfaces.
	GRPC string
	// nudge makes a held execution report progress; finish ends it.
	nudge  chan struct{}
	finish chan struct{}
	// stopped ends every execution when the agent stops.
	stopped context.Context
	mu      sync.Mutex
	held    int
	heldC   chan struct{}
}

// startRefAgent serves a reference agent on 127.0.0.1 until the test
// ends.
func startRefAgent(t testing.TB) *refAgent {
	t.Helper()
	stopped, stop := context.WithCancel(context.Background())
	r := &refAgent{nudge: make(chan struct{}), finish: make(chan struct{}), stopped: stopped, heldC: make(chan struct{})}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.URL, r.GRPC = srv.URL, lis.Addr().String()

	card := &a2a.AgentCard{
		Name: "reference", Description: "reference a2a-go agent", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: srv.URL + refJSONRPC, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: "1.0"},
			{URL: srv.URL + refREST, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: "1.0"},
			{URL: r.GRPC, ProtocolBinding: a2a.TransportProtocolGRPC, ProtocolVersion: "1.0"},
			{URL: srv.URL + refJSONRPC03, ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.3"},
			{URL: srv.URL + refREST03, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: "0.3"},
			{URL: r.GRPC, ProtocolBinding: a2a.TransportProtocolGRPC, ProtocolVersion: "0.3"},
		},
		Capabilities:       a2a.AgentCapabilities{Streaming: true, PushNotifications: true, ExtendedAgentCard: true},
		DefaultInputModes:  []string{"text/plain", "application/json"},
		DefaultOutputModes: []string{"text/plain", "application/json"},
		Skills:             []a2a.AgentSkill{{ID: "reference", Name: "reference", Description: "answers by the first word of the text", Tags: []string{"reference"}}},
	}
	extended := *card
	extended.Description = "reference a2a-go agent, extended card"

	store := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{
		Authenticator: func(context.Context) (string, error) { return refUser, nil },
	})
	quiet := slog.New(slog.DiscardHandler)
	handler := a2asrv.NewHandler(r,
		a2asrv.WithTaskStore(store),
		a2asrv.WithLogger(quiet),
		// Its webhooks are on loopback in these tests: orchd's among them.
		a2asrv.WithPushNotifications(push.NewInMemoryStore(), push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: time.Second, AllowPrivateNetworks: true})),
		a2asrv.WithExtendedAgentCard(&extended),
		a2asrv.WithCallInterceptors(refVersionCheck{}, refErrors{}, refHistory{}, refSubscribe{tasks: store}, refSendTerminal{tasks: store}))

	// A JSON-RPC interface answers at its URL with or without a trailing
	// slash: clients send both.
	rpc10 := refServes("1.0", refJSONOnly(a2asrv.NewJSONRPCHandler(handler)))
	rpc03 := refServes("0.3", refJSONOnly(a2av0.NewJSONRPCHandler(handler)))
	mux.Handle(refJSONRPC, rpc10)
	mux.Handle(refJSONRPC+"/", rpc10)
	mux.Handle(refJSONRPC03, rpc03)
	mux.Handle(refJSONRPC03+"/", rpc03)
	mux.Handle(refREST+"/", refServes("1.0", http.StripPrefix(refREST, a2asrv.NewRESTHandler(handler))))
	mux.Handle(refREST03+"/", refServes("0.3", http.StripPrefix(refREST03, a2av0.NewRESTHandler(handler))))
	started := time.Now().UTC().Format(http.TimeFormat)
	card10 := a2asrv.NewStaticAgentCardHandler(card)
	dual := a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card))
	// The card a2a-go serves, valid against the 1.0 schema, to every
	// client but one that asks for 0.x; the dual 0.3/1.0 card to that one
	// and at the 0.2-era path /.well-known/agent.json, as orchd serves
	// them.
	cardFor := func(legacy bool) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			w.Header().Add("Vary", a2a.SvcParamVersion)
			w.Header().Set("Last-Modified", started)
			asked := strings.TrimSpace(req.Header.Get(a2a.SvcParamVersion))
			if asked == "" {
				asked = strings.TrimSpace(req.URL.Query().Get(a2a.SvcParamVersion))
			}
			if strings.HasPrefix(asked, "0.") || legacy && !strings.HasPrefix(asked, "1") {
				dual.ServeHTTP(w, req)
				return
			}
			card10.ServeHTTP(w, req)
		})
	}
	mux.Handle(a2asrv.WellKnownAgentCardPath, cardFor(false))
	mux.Handle("/.well-known/agent.json", cardFor(true))

	gs := grpc.NewServer(grpc.UnaryInterceptor(refGRPCVersionUnary), grpc.StreamInterceptor(refGRPCVersionStream))
	grpcv1.NewHandler(handler).RegisterWith(gs)
	grpcv0.NewHandler(handler).RegisterWith(gs)
	served := make(chan struct{})
	go func() { defer close(served); _ = gs.Serve(lis) }()
	t.Cleanup(func() {
		stop()
		gs.Stop()
		<-served
		srv.Close()
	})
	return r
}

// Execute answers by the first word of the message's text:
//
//	complete  working, an artifact "art-result", then COMPLETED
//	message   a Message and no task
//	input     INPUT_REQUIRED; a further message to the task completes it
//	reject    REJECTED
//	fail      FAILED
//	hold      WORKING until Finish: each Nudge reports progress, then an
//	          artifact and COMPLETED
//
// The ids of what it sends derive from the id of the message it got, so
// the same message id gives the same answer ids directly and through any
// hop that keeps message ids.
func (r *refAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		mid := ec.Message.ID
		reply := func(suffix, text string) *a2a.Message {
			m := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))
			m.ID = mid + "-" + suffix
			return m
		}
		word, _, _ := strings.Cut(strings.TrimSpace(firstText(ec.Message)), " ")
		if ec.StoredTask != nil {
			// A further message to a task waiting for input completes it.
			if !yield(refArtifact(ec, "answered: "+firstText(ec.Message)), nil) {
				return
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, reply("done", "done")), nil)
			return
		}
		if word == "message" {
			m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("reply"))
			m.ID, m.ContextID = mid+"-reply", ec.ContextID
			yield(m, nil)
			return
		}
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		switch word {
		case "complete":
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, reply("working", "working")), nil) {
				return
			}
			if !yield(refArtifact(ec, "result"), nil) {
				return
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, reply("done", "done")), nil)
		case "input":
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, reply("ask", "which year?")), nil)
		case "reject":
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateRejected, reply("rejected", "rejected")), nil)
		case "fail":
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, reply("failed", "failed")), nil)
		case "hold":
			r.hold(ctx, ec, reply, yield)
		default:
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateRejected, reply("unknown", "unknown word "+strconv.Quote(word))), nil)
		}
	}
}

// hold keeps the task WORKING, reporting progress at each nudge, until
// finish.
func (r *refAgent) hold(ctx context.Context, ec *a2asrv.ExecutorContext, reply func(string, string) *a2a.Message, yield func(a2a.Event, error) bool) {
	if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, reply("working", "working")), nil) {
		return
	}
	r.mu.Lock()
	r.held++
	close(r.heldC)
	r.heldC = make(chan struct{})
	r.mu.Unlock()
	for n := 1; ; n++ {
		select {
		case <-r.nudge:
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, reply(fmt.Sprintf("progress-%d", n), "progress")), nil) {
				return
			}
		case <-r.finish:
			if yield(refArtifact(ec, "result"), nil) {
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, reply("done", "done")), nil)
			}
			return
		case <-ctx.Done():
			return
		case <-r.stopped.Done():
			yield(nil, errors.New("reference agent stopped"))
			return
		}
	}
}

// waitHeld waits until n executions have been held in all, failing the
// test after ten seconds.
func (r *refAgent) waitHeld(t testing.TB, n int) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		r.mu.Lock()
		held, c := r.held, r.heldC
		r.mu.Unlock()
		if held >= n {
			return
		}
		select {
		case <-c:
		case <-deadline:
			t.Fatalf("the reference agent held %d executions in 10s, want %d", held, n)
		}
	}
}

// Cancel cancels the task.
func (r *refAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// refArtifact is the one artifact the reference agent produces, with a
// fixed id: artifact ids are the agent's, scoped to the task.
func refArtifact(ec *a2asrv.ExecutorContext, text string) *a2a.TaskArtifactUpdateEvent {
	ev := a2a.NewArtifactEvent(ec, a2a.NewTextPart(text))
	ev.Artifact.ID = "art-result"
	ev.Artifact.Name = "result"
	ev.LastChunk = true
	return ev
}

// firstText is the text of a message's first text part.
func firstText(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	for _, p := range m.Parts {
		if s, ok := p.Content.(a2a.Text); ok {
			return string(s)
		}
	}
	return ""
}

// refErrors answers a message "error <code>" with that A2A error.
type refErrors struct {
	a2asrv.PassthroughCallInterceptor
}

func (refErrors) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	if m := cc.Method(); m != "SendMessage" && m != "SendStreamingMessage" {
		return ctx, nil, nil
	}
	smr, ok := req.Payload.(*a2a.SendMessageRequest)
	if !ok {
		return ctx, nil, nil
	}
	code, ok := strings.CutPrefix(firstText(smr.Message), "error ")
	if !ok {
		return ctx, nil, nil
	}
	n, _ := strconv.Atoi(code)
	sentinel, ok := errorTexts[n]
	if !ok {
		return ctx, nil, a2a.NewError(a2a.ErrInvalidParams, "the reference agent has no error "+strconv.Quote(code))
	}
	return ctx, nil, a2a.NewError(sentinel, fmt.Sprintf("the reference agent answers error %d as asked", n))
}

// refVersionKey carries the A2A version an endpoint serves.
type refVersionKey struct{}

// refServes marks the requests of an endpoint serving version v.
func refServes(v string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), refVersionKey{}, v)))
	})
}

// refGRPCVersionUnary and refGRPCVersionStream mark gRPC calls with the
// version of the service called: lf.a2a.v1 is 1.0, a2a.v1 is 0.3.
func refGRPCVersionUnary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	return h(context.WithValue(ctx, refVersionKey{}, grpcVersion(info.FullMethod)), req)
}

func refGRPCVersionStream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, versionedStream{ServerStream: ss, ctx: context.WithValue(ss.Context(), refVersionKey{}, grpcVersion(info.FullMethod))})
}

type versionedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s versionedStream) Context() context.Context { return s.ctx }

func grpcVersion(method string) string {
	if strings.HasPrefix(method, "/lf.a2a.") {
		return "1.0"
	}
	return "0.3"
}

// refVersionCheck answers a request whose A2A-Version the endpoint does
// not serve with VersionNotSupportedError, as the specification asks;
// a2a-go does not check it. A request that names no version is served in
// the endpoint's version, as a2a-go serves it and the draft conformance
// suite expects (VER-NEG-002).
type refVersionCheck struct {
	a2asrv.PassthroughCallInterceptor
}

func (refVersionCheck) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	served, _ := ctx.Value(refVersionKey{}).(string)
	if served == "" {
		return ctx, nil, nil
	}
	asked := ""
	if vals, ok := cc.ServiceParams().Get(a2a.SvcParamVersion); ok && len(vals) > 0 {
		asked = strings.TrimSpace(vals[0])
	}
	if asked != "" && majorMinor(asked) != majorMinor(served) {
		return ctx, nil, a2a.NewError(a2a.ErrVersionNotSupported, fmt.Sprintf("A2A-Version %s is not served here (%s)", asked, served))
	}
	return ctx, nil, nil
}

// majorMinor is what of a version negotiation compares: the major, and
// below 1.0 the minor too.
func majorMinor(v string) string {
	major, rest, _ := strings.Cut(v, ".")
	if major != "0" {
		return major
	}
	minor, _, _ := strings.Cut(rest, ".")
	return major + "." + minor
}

// refJSONOnly answers a JSON-RPC request whose body is not JSON by its
// content type with ContentTypeNotSupportedError (-32005), as the
// specification asks; a2a-go would try to parse it (-32700).
func refJSONOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
		if mt = strings.TrimSpace(strings.ToLower(mt)); mt != "" && mt != "application/json" && mt != "application/a2a+json" {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":{"code":-32005,"message":%q}}`, "content type "+mt+" is not JSON")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// refHistory keeps only the last historyLength messages of the task a
// SendMessage or GetTask answers with, as the specification asks; a2a-go
// ignores historyLength.
type refHistory struct {
	a2asrv.PassthroughCallInterceptor
}

type refHistoryKey struct{}

func (refHistory) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	var n *int
	switch p := req.Payload.(type) {
	case *a2a.SendMessageRequest:
		if p.Config != nil {
			n = p.Config.HistoryLength
		}
	case *a2a.GetTaskRequest:
		n = p.HistoryLength
	}
	if n == nil {
		return ctx, nil, nil
	}
	return context.WithValue(ctx, refHistoryKey{}, *n), nil, nil
}

func (refHistory) After(ctx context.Context, _ *a2asrv.CallContext, resp *a2asrv.Response) error {
	n, ok := ctx.Value(refHistoryKey{}).(int)
	task, isTask := resp.Payload.(*a2a.Task)
	if !ok || !isTask || resp.Err != nil || n < 0 || len(task.History) <= n {
		return nil //nolint:nilerr // an error answer is passed on as it is
	}
	trimmed := *task
	trimmed.History = task.History[len(task.History)-n:]
	resp.Payload = &trimmed
	return nil
}

// refSubscribe answers a subscription to a task in a terminal state with
// UnsupportedOperationError, as the specification asks; a2a-go answers
// -32001 (no active execution).
type refSubscribe struct {
	a2asrv.PassthroughCallInterceptor
	tasks taskstore.Store
}

func (s refSubscribe) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	sub, ok := req.Payload.(*a2a.SubscribeToTaskRequest)
	if cc.Method() != "SubscribeToTask" || !ok {
		return ctx, nil, nil
	}
	if st, err := s.tasks.Get(ctx, sub.ID); err == nil && st.Task.Status.State.Terminal() {
		return ctx, nil, a2a.NewError(a2a.ErrUnsupportedOperation, "task "+string(sub.ID)+" is "+string(st.Task.Status.State)+": there is nothing to subscribe to")
	}
	return ctx, nil, nil
}

// refSendTerminal answers a message to a task in a terminal state with
// UnsupportedOperationError, as the specification asks (§3.1.1) and
// a2a-go does from v2.6.0; v2.4.0 answers InvalidParamsError (-32602).
type refSendTerminal struct {
	a2asrv.PassthroughCallInterceptor
	tasks taskstore.Store
}

func (s refSendTerminal) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	smr, ok := req.Payload.(*a2a.SendMessageRequest)
	if m := cc.Method(); m != "SendMessage" && m != "SendStreamingMessage" || !ok || smr.Message == nil || smr.Message.TaskID == "" {
		return ctx, nil, nil
	}
	if st, err := s.tasks.Get(ctx, smr.Message.TaskID); err == nil && st.Task.Status.State.Terminal() {
		return ctx, nil, a2a.NewError(a2a.ErrUnsupportedOperation, "task "+string(smr.Message.TaskID)+" is "+string(st.Task.Status.State)+": it takes no more messages")
	}
	return ctx, nil, nil
}
