// Package testagent runs real a2a-go agents on 127.0.0.1 for tests: each
// serves its Agent Card and A2A over JSON-RPC (1.0, or 0.3 through
// a2a-go's a2av0 handlers), driven by a Behaviour, and records what it
// received. They are agents, not mocks of the wire.
package testagent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/steering"
)

// Behaviour is what an agent does with a message it receives.
type Behaviour func(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool)

// executor is a real a2a-go AgentExecutor driven by a Behaviour; it records
// the messages it received.
type executor struct {
	// stopped ends every execution when the agent stops: a2a-go does not
	// cancel executions on its own.
	stopped context.Context
	// st is the agent's steering, when it advertises the extension.
	st       *steering.Steering
	signals  []steering.Signal
	do       Behaviour
	mu       sync.Mutex
	received []*a2a.Message
	canceled atomic.Int32
	// refuse is Options.RefuseCancels.
	refuse int32
}

func (x *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	x.mu.Lock()
	x.received = append(x.received, ec.Message)
	x.mu.Unlock()
	return func(yield func(a2a.Event, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(x.stopped, cancel)()
		if x.st != nil {
			inbox := x.st.Open(ec)
			defer inbox.Close()
			ctx = context.WithValue(ctx, steeredKey{}, steered{inbox: inbox, record: x.record})
		}
		open := true
		x.do(ctx, ec, func(ev a2a.Event, err error) bool {
			open = open && yield(ev, err)
			return open
		})
		if open && x.stopped.Err() != nil {
			// An execution the agent's stop cut short ends with an error:
			// a2a-go waits for a final event or an error otherwise.
			yield(nil, errors.New("agent stopped"))
		}
	}
}

func (x *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	n := x.canceled.Add(1)
	return func(yield func(a2a.Event, error) bool) {
		if n <= x.refuse {
			yield(nil, a2a.ErrTaskNotCancelable)
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func (x *executor) record(s steering.Signal) {
	x.mu.Lock()
	x.signals = append(x.signals, s)
	x.mu.Unlock()
}

type steeredKey struct{}

// steered is what a steerable agent's executions read signals from.
type steered struct {
	inbox  *steering.Inbox
	record func(steering.Signal)
}

func (x *executor) messages() []*a2a.Message {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]*a2a.Message(nil), x.received...)
}

// Options describe an agent's card.
type Options struct {
	// Name is the card's name.
	Name string
	// Skill is the id (and tag) of the agent's one skill.
	Skill string
	// Streaming declares streaming.
	Streaming bool
	// Version is the interface's A2A version: "1.0" (default), "0.3"
	// (served with a2a-go's a2av0 handlers and dual-format card) or any
	// other string (declared, served as 1.0).
	Version string
	// Steering makes the agent steerable and interruptible: it advertises
	// the extension and takes signals (see Steerable).
	Steering bool
	// GRPC serves A2A over gRPC too, on its own 127.0.0.1 port listed
	// first on the card as host:port: a2a-go's 1.0 service, and its 0.3 service as
	// well when Version is "0.3" (grpc.go).
	GRPC bool
	// GRPCOnly is GRPC with gRPC the card's only interface: a gRPC-only
	// agent. Its card is still served over HTTP, as every card is.
	GRPCOnly bool
	// Extensions are declared on the card besides steering's.
	Extensions []a2a.AgentExtension
	// RefuseCancels is how many cancel requests the agent answers first
	// with a2a.ErrTaskNotCancelable, as an a2a-go agent answers one that
	// meets an execution settling: the ones after cancel the task.
	RefuseCancels int
}

// Agent is an a2a-go agent served on 127.0.0.1 with its card; URL is its
// base URL.
type Agent struct {
	*httptest.Server
	exec *executor
	mu   sync.Mutex
	// methods lists the JSON-RPC methods called, in order; called is
	// closed and replaced at each call.
	methods []string
	called  chan struct{}
	cards   atomic.Int32
	// frozen makes the A2A endpoint answer nothing (see Freeze); stopped
	// ends when the agent stops.
	frozen  atomic.Bool
	stopped context.Context
	// held delays the answers to one method (see Hold).
	held atomic.Pointer[hold]
	// requests records each A2A request with its headers (headers.go).
	requests requestLog
}

// Freeze makes the agent hang as a stuck process does: from now on it
// takes A2A requests and answers none of them until the caller gives up or
// the agent stops. Streams already open stay open; with a behaviour that
// has stopped sending (Hang) they are silent.
func (a *Agent) Freeze() { a.frozen.Store(true) }

// WaitCalls waits until the agent has been called with method n times,
// failing the test after 10 seconds.
func (a *Agent) WaitCalls(t testing.TB, method string, n int) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		a.mu.Lock()
		got, called := 0, a.called
		for _, m := range a.methods {
			if m == method {
				got++
			}
		}
		a.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-called:
		case <-timeout:
			t.Fatalf("agent got %d %s calls in 10s, want %d (calls %v)", got, method, n, a.Calls())
		}
	}
}

// CardFetches counts the requests for the agent's card.
func (a *Agent) CardFetches() int { return int(a.cards.Load()) }

// Calls lists the JSON-RPC methods the agent was called with, in order.
func (a *Agent) Calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.methods...)
}

// Messages lists the messages that started an execution, in order.
func (a *Agent) Messages() []*a2a.Message { return a.exec.messages() }

// Signals lists the steering signals the agent's executions took, in
// order.
func (a *Agent) Signals() []steering.Signal {
	a.exec.mu.Lock()
	defer a.exec.mu.Unlock()
	return append([]steering.Signal(nil), a.exec.signals...)
}

// TookSignals waits up to 10 seconds until the agent's executions took
// at least n steering signals, and returns those they took. A receipt
// says a signal reached an execution's inbox; the execution takes it a
// moment later.
func (a *Agent) TookSignals(t testing.TB, n int) []steering.Signal {
	t.Helper()
	testwait.Until(t, 10*time.Second, fmt.Sprintf("the agent took %d signals", n), func() bool { return len(a.Signals()) >= n })
	return a.Signals()
}

// Cancels counts the cancel requests the executor received.
func (a *Agent) Cancels() int { return int(a.exec.canceled.Load()) }

// Start serves an agent until the test ends.
func Start(t testing.TB, o Options, do Behaviour) *Agent {
	t.Helper()
	stopped, stop := context.WithCancel(context.Background())
	x := &executor{do: do, stopped: stopped, refuse: int32(o.RefuseCancels)}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { stop(); srv.Close() })
	if o.Version == "" {
		o.Version = "1.0"
	}
	card := &a2a.AgentCard{
		Name: o.Name, Description: "test agent", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: srv.URL + "/rpc", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.ProtocolVersion(o.Version)}},
		Capabilities:        a2a.AgentCapabilities{Streaming: o.Streaming, Extensions: slices.Clone(o.Extensions)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: o.Skill, Name: o.Skill, Tags: []string{o.Skill}}},
	}
	ta := &Agent{Server: srv, exec: x, called: make(chan struct{}), stopped: stopped}
	var grpcLis net.Listener
	if o.GRPC || o.GRPCOnly {
		grpcLis = listenGRPC(t, card, o)
	}
	var opts []a2asrv.RequestHandlerOption
	if o.Steering {
		store := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})
		x.st = steering.New(steering.Config{Modes: steering.Modes{Steerable: true, Interruptible: true}, Name: o.Name, Tasks: store, SettleTimeout: 5 * time.Second})
		card.Capabilities.Extensions = append(card.Capabilities.Extensions, x.st.Extension())
		opts = append(opts, a2asrv.WithTaskStore(store), a2asrv.WithCallInterceptors(x.st.Interceptor()),
			a2asrv.WithExecutorContextInterceptor(x.st.ExecutorInterceptor()))
	}
	handler := a2asrv.NewHandler(x, opts...)
	if grpcLis != nil {
		serveGRPC(t, ta, handler, grpcLis, o.Version == "0.3")
	}
	rpc := steering.Echo(a2asrv.NewJSONRPCHandler(handler))
	cardHandler := a2asrv.NewStaticAgentCardHandler(card)
	if o.Version == "0.3" {
		rpc = steering.Echo(a2av0.NewJSONRPCHandler(handler))
		cardHandler = a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card))
	}
	mux.Handle("/rpc", recordMethods(ta, rpc))
	mux.Handle(a2asrv.WellKnownAgentCardPath, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ta.cards.Add(1)
		cardHandler.ServeHTTP(w, r)
	}))
	return ta
}

// recordMethods notes each JSON-RPC call's method before serving it, and
// serves nothing while the agent is frozen.
func recordMethods(a *Agent, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var call struct{ Method string }
		_ = json.Unmarshal(body, &call)
		a.requests.add(call.Method, r.Header)
		a.mu.Lock()
		a.methods = append(a.methods, call.Method)
		close(a.called)
		a.called = make(chan struct{})
		a.mu.Unlock()
		if a.frozen.Load() {
			select {
			case <-r.Context().Done():
			case <-a.stopped.Done():
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if h := a.held.Load(); h != nil && h.method == call.Method {
			h.serve(a, next, w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Reply answers with a message, creating no task.
func Reply(text string) Behaviour {
	return func(_ context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		yield(a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text)), nil)
	}
}

// Work creates a task, reports progress, produces an artifact in two chunks
// delay apart and completes with the message "done".
func Work(delay time.Duration) Behaviour {
	return func(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("working"))), nil) {
			return
		}
		art := a2a.NewArtifactEvent(ec, a2a.NewTextPart("part one, "))
		if !yield(art, nil) {
			return
		}
		select {
		case <-time.After(delay):
		case <-ctx.Done():
			return
		}
		more := a2a.NewArtifactUpdateEvent(ec, art.Artifact.ID, a2a.NewTextPart("part two"))
		more.Append, more.LastChunk = true, true
		if !yield(more, nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done"))), nil)
	}
}

// Stream creates a task and streams artifacts as LLM agents stream their
// answers: each of the artifacts as chunks chunks of size bytes of text
// ("a" for the first artifact, "b" for the next…), the first chunk
// naming the artifact and each later one appended, the last marked so.
// It then waits for hold to close (nil: no wait) and completes with
// "streamed".
func Stream(artifacts, chunks, size int, hold <-chan struct{}) Behaviour {
	return func(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		for i := range artifacts {
			text := strings.Repeat(string(rune('a'+i%26)), size)
			first := a2a.NewArtifactEvent(ec, a2a.NewTextPart(text))
			first.Artifact.Name = fmt.Sprintf("answer %d", i+1)
			first.LastChunk = chunks == 1
			if !yield(first, nil) {
				return
			}
			for c := 1; c < chunks; c++ {
				more := a2a.NewArtifactUpdateEvent(ec, first.Artifact.ID, a2a.NewTextPart(text))
				more.Append, more.LastChunk = true, c == chunks-1
				if !yield(more, nil) {
					return
				}
			}
		}
		if hold != nil {
			select {
			case <-hold:
			case <-ctx.Done():
				return
			}
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("streamed"))), nil)
	}
}

// Ask wants input ("which year?") first, then completes with "answered: "
// and the input.
func Ask() Behaviour {
	return func(_ context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil {
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("which year?"))), nil)
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("answered: "+Text(ec.Message)))), nil)
	}
}

// Hang accepts the work and never finishes it: it creates a task, reports
// WORKING once and then sends nothing until the task is canceled.
func Hang() Behaviour {
	return func(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		<-ctx.Done()
	}
}

// Steerable works until it is interrupted (it then waits for input, marked
// interrupted) or a steer says "finish" (it then completes with
// "finished: " and every steer it took); each steer it takes becomes the
// task's status message. The agent needs Options.Steering; without it the
// behaviour works until canceled.
func Steerable() Behaviour {
	return func(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		s, ok := ctx.Value(steeredKey{}).(steered)
		if !ok {
			<-ctx.Done()
			return
		}
		var took []string
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.inbox.Ready():
			}
			for _, sig := range s.inbox.Take() {
				s.record(sig)
				took = append(took, Text(sig.Message))
				switch {
				case sig.Control == steering.Interrupt:
					for _, late := range s.inbox.Close() {
						s.record(late)
					}
					yield(s.inbox.Interrupted(ec, "interrupted"), nil)
					return
				case !yield(steering.Acknowledged(ec, sig), nil):
					return
				case Text(sig.Message) == "finish":
					for _, late := range s.inbox.Close() {
						s.record(late)
						took = append(took, Text(late.Message))
					}
					yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted,
						a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("finished: "+strings.Join(took, ", ")))), nil)
					return
				}
			}
		}
	}
}

// Failing creates a task and fails it with reason.
func Failing(reason string) Behaviour {
	return func(_ context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(reason))), nil)
	}
}

// Broken serves a valid card whose A2A endpoint answers 503.
func Broken(t testing.TB, name, skill string) *httptest.Server {
	t.Helper()
	return BrokenStatus(t, name, skill, http.StatusServiceUnavailable)
}

// Text joins a message's text parts.
func Text(m *a2a.Message) string {
	var parts []string
	for _, p := range m.Parts {
		if t, ok := p.Content.(a2a.Text); ok {
			parts = append(parts, string(t))
		}
	}
	return strings.Join(parts, " ")
}
