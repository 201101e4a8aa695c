package fleet

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/orchd/orchd/steering"
)

// Config says where the fleet listens and where it logs.
type Config struct {
	// Host is the address every agent listens on. Default 127.0.0.1.
	Host string
	// BasePort is the first agent's port; the others follow it in the
	// order of Fleet.Agents (report on BasePort, steerable on BasePort+1,
	// …). 0: each agent takes a free port.
	BasePort int
	// Log receives what the agents do. Default: nothing is logged.
	Log *slog.Logger
}

// Agent describes one running agent of the fleet.
type Agent struct {
	// ID is the id to register the agent under with orchd.
	ID string
	// URL is the agent's base URL; its card is at
	// URL/.well-known/agent-card.json.
	URL string
	// Skill is the id of the agent's one skill, what orchd routes by
	// (orchd delegate --skill).
	Skill string
	// Description says what the agent does and shows.
	Description string
}

// Fleet is the running agents.
type Fleet struct {
	agents  []Agent
	servers []*http.Server
	serving sync.WaitGroup
	// stopped ends every running task: a2a-go does not end executions on
	// its own when its server stops.
	stopped   context.Context
	stop      context.CancelFunc
	stopAfter func() bool
	closeOnce sync.Once
}

// spec is an agent before it runs: its card's contents and its executor.
type spec struct {
	id, skill, description string
	// version is the A2A version its one JSON-RPC interface speaks.
	version string
	// exec builds the agent's executor; st is the agent's steering, nil
	// for an agent that declares none.
	exec func(log *slog.Logger, st *steering.Steering) a2asrv.AgentExecutor
	// steerable: the agent takes steers and interrupts.
	steerable bool
}

// maxRequestBytes bounds a request's body; the agents take short texts.
const maxRequestBytes = 1 << 20

// specs lists the fleet in port order.
func specs() []spec {
	return []spec{
		{id: "report", skill: "report", version: "1.0", description: "streams a report in four sections over two seconds",
			exec: func(log *slog.Logger, _ *steering.Steering) a2asrv.AgentExecutor { return report{log: log} }},
		{id: "steerable", skill: "research", version: "1.0", steerable: true, description: "works 12 steps of 3 s; takes steers and interrupts",
			exec: func(log *slog.Logger, st *steering.Steering) a2asrv.AgentExecutor {
				return stepper{log: log, st: st, steps: 12, every: 3 * time.Second, result: "findings"}
			}},
		{id: "asker", skill: "summary", version: "1.0", description: "asks which year to cover, then finishes",
			exec: func(log *slog.Logger, _ *steering.Steering) a2asrv.AgentExecutor { return asker{log: log} }},
		{id: "legacy", skill: "legacy", version: "0.3", description: "speaks only A2A 0.3; answers at once",
			exec: func(log *slog.Logger, _ *steering.Steering) a2asrv.AgentExecutor { return legacy{log: log} }},
		{id: "plain", skill: "draft", version: "1.0", description: "works 10 steps of 2 s; declares no steering",
			exec: func(log *slog.Logger, _ *steering.Steering) a2asrv.AgentExecutor {
				return stepper{log: log, steps: 10, every: 2 * time.Second, result: "draft"}
			}},
	}
}

// Start runs the fleet until Close is called or ctx is done. Nothing runs
// when it fails, for example because a port is taken.
func Start(ctx context.Context, cfg Config) (*Fleet, error) {
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.BasePort < 0 || cfg.BasePort+len(specs())-1 > 65535 {
		return nil, fmt.Errorf("base port %d: want 0 (free ports) or 1 to %d", cfg.BasePort, 65535-len(specs())+1)
	}
	stopped, stop := context.WithCancel(context.Background())
	f := &Fleet{stopped: stopped, stop: stop}
	for i, s := range specs() {
		port := 0
		if cfg.BasePort != 0 {
			port = cfg.BasePort + i
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(port)))
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("agent %s: %w", s.id, err)
		}
		url := "http://" + ln.Addr().String()
		srv := &http.Server{
			Handler:           http.MaxBytesHandler(f.handler(s, url, cfg.Log.With("agent", s.id)), maxRequestBytes),
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       30 * time.Second,
			IdleTimeout:       time.Minute,
		}
		f.servers = append(f.servers, srv)
		f.agents = append(f.agents, Agent{ID: s.id, URL: url, Skill: s.skill, Description: s.description})
		f.serving.Go(func() { _ = srv.Serve(ln) })
		cfg.Log.Info("agent listening", "agent", s.id, "url", url, "skill", s.skill, "a2a", s.version)
	}
	f.stopAfter = context.AfterFunc(ctx, f.Close)
	return f, nil
}

// handler serves one agent: its card, and A2A over JSON-RPC at /a2a.
func (f *Fleet) handler(s spec, url string, log *slog.Logger) http.Handler {
	card := &a2a.AgentCard{
		Name: s.id, Description: "orchd demo agent: " + s.description, Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: url + "/a2a", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.ProtocolVersion(s.version)}},
		Capabilities:        a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:   []string{"text/plain"},
		DefaultOutputModes:  []string{"text/plain"},
		Skills:              []a2a.AgentSkill{{ID: s.skill, Name: s.skill, Description: s.description, Tags: []string{s.skill}}},
	}
	var st *steering.Steering
	var opts []a2asrv.RequestHandlerOption
	if s.steerable {
		// Steering reads tasks from the store the handler writes them
		// to, so both get the same one.
		store := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})
		st = steering.New(steering.Config{Modes: steering.Modes{Steerable: true, Interruptible: true}, Name: s.id, Tasks: store})
		card.Capabilities.Extensions = []a2a.AgentExtension{st.Extension()}
		opts = append(opts, a2asrv.WithTaskStore(store), a2asrv.WithCallInterceptors(st.Interceptor()),
			a2asrv.WithExecutorContextInterceptor(st.ExecutorInterceptor()))
	}
	exec := untilStopped{next: s.exec(log, st), stopped: f.stopped}
	handler := a2asrv.NewHandler(exec, append(opts, a2asrv.WithLogger(log))...)
	mux := http.NewServeMux()
	if s.version == "0.3" {
		// a2a-go's a2av0 handlers speak A2A 0.3 over the same request
		// handler, and the card is written in 0.3's shape.
		mux.Handle("/a2a", a2av0.NewJSONRPCHandler(handler))
		mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card)))
		return mux
	}
	// Echo names the steering extension in the answers of requests that
	// activate it, as the extension asks.
	mux.Handle("/a2a", steering.Echo(a2asrv.NewJSONRPCHandler(handler)))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	return mux
}

// Agents lists the fleet's agents in port order.
func (f *Fleet) Agents() []Agent { return append([]Agent(nil), f.agents...) }

// Close stops every agent: running tasks end, connections close. It is
// safe to call more than once.
func (f *Fleet) Close() {
	f.closeOnce.Do(func() {
		if f.stopAfter != nil {
			f.stopAfter()
		}
		f.stop()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		for _, srv := range f.servers {
			if err := srv.Shutdown(ctx); err != nil {
				_ = srv.Close() // event streams still open
			}
		}
		f.serving.Wait()
	})
}

// untilStopped ends an executor's work when the fleet stops. a2a-go ends
// an execution only at its final event, so work stopped short of one ends
// FAILED, saying the agent stopped.
type untilStopped struct {
	next    a2asrv.AgentExecutor
	stopped context.Context
}

func (u untilStopped) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(u.stopped, cancel)()
		final := false
		for ev, err := range u.next.Execute(ctx, ec) {
			final = isFinal(ev)
			if !yield(ev, err) {
				return
			}
		}
		if !final && u.stopped.Err() != nil {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, say(ec, "the agent stopped")), nil)
		}
	}
}

func (u untilStopped) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return u.next.Cancel(ctx, ec)
}

// isFinal reports whether a2a-go ends an execution at ev: a message, or a
// task or status that ended or waits for input.
func isFinal(ev a2a.Event) bool {
	var state a2a.TaskState
	switch e := ev.(type) {
	case *a2a.Message:
		return true
	case *a2a.Task:
		state = e.Status.State
	case *a2a.TaskStatusUpdateEvent:
		state = e.Status.State
	}
	return state.Terminal() || state == a2a.TaskStateInputRequired
}

// say is an agent message for the task.
func say(ec *a2asrv.ExecutorContext, format string, args ...any) *a2a.Message {
	return a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(fmt.Sprintf(format, args...)))
}

// textOf joins a message's text parts.
func textOf(m *a2a.Message) string {
	if m == nil {
		return ""
	}
	var out []string
	for _, p := range m.Parts {
		if t, ok := p.Content.(a2a.Text); ok {
			out = append(out, string(t))
		}
	}
	return strings.Join(out, " ")
}

// topicOf is the text of the message that started the task: its first
// user message, or the message at hand for a new task.
func topicOf(ec *a2asrv.ExecutorContext) string {
	if ec.StoredTask != nil {
		for _, m := range ec.StoredTask.History {
			if m.Role == a2a.MessageRoleUser {
				return textOf(m)
			}
		}
	}
	return textOf(ec.Message)
}

// sleep waits d, or less when ctx ends first; it reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// cancel is every agent's Cancel: the task ends CANCELED.
func cancel(ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}
