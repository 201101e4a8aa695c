package delegation

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"go.uber.org/goleak"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// behaviour is what a test agent does with a message.
type behaviour func(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool)

// executor is a real a2a-go AgentExecutor driven by a behaviour; it records
// the messages it received.
type executor struct {
	do       behaviour
	mu       sync.Mutex
	received []*a2a.Message
	canceled atomic.Int32
}

func (x *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	x.mu.Lock()
	x.received = append(x.received, ec.Message)
	x.mu.Unlock()
	return func(yield func(a2a.Event, error) bool) { x.do(ctx, ec, yield) }
}

func (x *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	x.canceled.Add(1)
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func (x *executor) messages() []*a2a.Message {
	x.mu.Lock()
	defer x.mu.Unlock()
	return append([]*a2a.Message(nil), x.received...)
}

// agentOpts describe a test agent's card.
type agentOpts struct {
	name      string
	skill     string
	streaming bool
	version   string // interface protocol version; default 1.0
	steering  bool
}

// testAgent is an a2a-go agent served on 127.0.0.1 with its card.
type testAgent struct {
	*httptest.Server
	exec *executor
	mu   sync.Mutex
	// methods lists the JSON-RPC methods called, in order.
	methods []string
}

func (a *testAgent) calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.methods...)
}

func startAgent(t *testing.T, o agentOpts, do behaviour) *testAgent {
	t.Helper()
	x := &executor{do: do}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	if o.version == "" {
		o.version = "1.0"
	}
	card := &a2a.AgentCard{
		Name: o.name, Description: "test agent", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: srv.URL + "/rpc", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.ProtocolVersion(o.version)}},
		Capabilities:        a2a.AgentCapabilities{Streaming: o.streaming},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: o.skill, Name: o.skill, Tags: []string{o.skill}}},
	}
	if o.steering {
		card.Capabilities.Extensions = []a2a.AgentExtension{{URI: capability.SteeringURI, Params: map[string]any{"steerable": true, "interruptible": true}}}
	}
	ta := &testAgent{Server: srv, exec: x}
	handler := a2asrv.NewHandler(x)
	rpc := a2asrv.NewJSONRPCHandler(handler)
	cardHandler := a2asrv.NewStaticAgentCardHandler(card)
	if o.version == "0.3" {
		rpc = a2av0.NewJSONRPCHandler(handler)
		cardHandler = a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card))
	}
	mux.Handle("/rpc", recordMethods(ta, rpc))
	mux.Handle(a2asrv.WellKnownAgentCardPath, cardHandler)
	return ta
}

// recordMethods notes each JSON-RPC call's method before serving it.
func recordMethods(a *testAgent, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var call struct{ Method string }
		_ = json.Unmarshal(body, &call)
		a.mu.Lock()
		a.methods = append(a.methods, call.Method)
		a.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// Behaviours.

func reply(text string) behaviour {
	return func(_ context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		yield(a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text)), nil)
	}
}

// work creates a task, reports progress, streams two artifact chunks and
// completes.
func work(delay time.Duration) behaviour {
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

// ask wants input first, then completes echoing it.
func ask() behaviour {
	return func(_ context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil {
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("which year?"))), nil)
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("answered: "+messageText(ec.Message)))), nil)
	}
}

// hang works until canceled.
func hang() behaviour {
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

func failing(reason string) behaviour {
	return func(_ context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(reason))), nil)
	}
}

// brokenAgent serves a valid card whose A2A endpoint answers 503.
func brokenAgent(t *testing.T, name, skill string) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	card := &a2a.AgentCard{Name: name, Description: "broken", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL+"/rpc", a2a.TransportProtocolJSONRPC)},
		Skills:              []a2a.AgentSkill{{ID: skill, Name: skill, Tags: []string{}}}}
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.HandleFunc("/rpc", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	})
	return srv
}

// fixture is a registry, policies and engine over test agents.
type fixture struct {
	reg    *registry.Registry
	pol    *policies.Engine
	engine *Engine
}

func newFixture(t *testing.T, cfg Config, policyPaths ...string) *fixture {
	t.Helper()
	reg, err := registry.New(registry.Config{AllowNetworks: []string{"127.0.0.0/8"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	pol, err := policies.NewEngine(policyPaths, policies.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := registry.NewTransport(registry.Config{AllowNetworks: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Transport: transport}
		t.Cleanup(transport.CloseIdleConnections)
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	e := NewEngine(reg, pol, NewMemoryStore(), cfg, nil)
	t.Cleanup(e.Close)
	return &fixture{reg: reg, pol: pol, engine: e}
}

func (f *fixture) add(t *testing.T, id, url string) {
	t.Helper()
	if _, err := f.reg.Add(t.Context(), registry.Spec{ID: id, URL: url}); err != nil {
		t.Fatal(err)
	}
}

// waitState waits until the delegation reaches state.
func waitState(t *testing.T, d *Delegation, want a2a.TaskState) Record {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		_, changed, _ := d.Events(1 << 62)
		r := d.Record()
		if r.State == want {
			return r
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("delegation %s stayed %s, want %s (error %q)", r.ID, r.State, want, r.Error)
		}
	}
}
