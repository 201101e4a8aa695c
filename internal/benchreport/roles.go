package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/orchd/orchd/steering"
)

const (
	// roleEnv names the role a helper process plays: this binary started
	// again by the harness. Empty: the binary is benchreport itself.
	roleEnv = "ORCHD_BENCHREPORT_ROLE"
	// roleArgsEnv holds the role's arguments, comma-separated.
	roleArgsEnv = "ORCHD_BENCHREPORT_ARGS"
)

// The agent kinds the agents role serves, one listener each, in this
// order; each is also the skill its card lists and orchd routes by.
const (
	kindMessage = "message" // answers every message with a Message
	kindTask    = "task"    // answers with a Task already COMPLETED
	kindSlow    = "slow"    // streams a Task that works a while, then completes
	// kindSteer is the steerable agent's kind, served by the steerable
	// role (steerableHandlers), not the agents role.
	kindSteer = "steer"
)

// agentKinds are the kinds in the order the agents role serves them.
var agentKinds = []string{kindMessage, kindTask, kindSlow}

// statsPath is where each agent says how many executions it has run.
const statsPath = "/stats"

// subscribedPath is where the steering agents say when each task was
// subscribed to (subscriptions).
const subscribedPath = "/subscribed"

// agentStats is the agent's answer at statsPath.
type agentStats struct {
	// Executions is how many tasks the agent has run.
	Executions int64 `json:"executions"`
	// Requests is how many A2A requests it has served, by method.
	Requests map[string]int64 `json:"requests"`
	// Signals is how many steering signals the steerable agent
	// acknowledged and its executions took (or had queued when they
	// ended).
	Signals int64 `json:"signals,omitempty"`
}

// playRole runs the helper role named, with its comma-separated args,
// until its standard input closes, and returns the exit code.
func playRole(role, args string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var list []string
	if args != "" {
		list = strings.Split(args, ",")
	}
	var handlers []func(base string) http.Handler
	var err error
	switch role {
	case "agents":
		handlers, err = agentHandlers(list)
	case "long":
		handlers, err = longHandlers(list)
	case "proxy":
		handlers, err = proxyHandlers(list)
	case "floor":
		handlers, err = floorHandlers(list)
	case "steerable":
		handlers = []func(string) http.Handler{steerableHandler}
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		log.Error("helper process", "role", role, "error", err)
		return 2
	}
	var bases []string
	for _, h := range handlers {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			log.Error("listen", "role", role, "error", err)
			return 2
		}
		base := "http://" + ln.Addr().String()
		srv := &http.Server{Handler: h(base), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
		go func() {
			if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
				log.Error("serve", "role", role, "error", err)
				os.Exit(1)
			}
		}()
		bases = append(bases, base)
	}
	w := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(w, readyPrefix+strings.Join(bases, " "))
	if err := w.Flush(); err != nil {
		return 1
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// agentHandlers serves one a2a-go agent per kind, answering JSON-RPC at
// /rpc. args holds how long the slow agent works.
func agentHandlers(args []string) ([]func(string) http.Handler, error) {
	if len(args) != 1 {
		return nil, fmt.Errorf("agents: want the slow agent's work duration, got %q", args)
	}
	work, err := time.ParseDuration(args[0])
	if err != nil {
		return nil, fmt.Errorf("agents: %w", err)
	}
	var hs []func(string) http.Handler
	for _, kind := range agentKinds {
		hs = append(hs, func(base string) http.Handler {
			x := &agentExec{kind: kind, work: work}
			card := &a2a.AgentCard{Name: "Bench " + kind, Description: "answers pong", Version: "1",
				SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(base+"/rpc", a2a.TransportProtocolJSONRPC)},
				Capabilities:        a2a.AgentCapabilities{Streaming: kind == kindSlow},
				DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
				Skills: []a2a.AgentSkill{{ID: kind, Name: kind, Tags: []string{kind}}}}
			mux := http.NewServeMux()
			counts := &methodCounts{n: map[string]int64{}}
			mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(x, a2asrv.WithCallInterceptors(counts))))
			mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
			mux.HandleFunc("GET "+statsPath, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(agentStats{Executions: x.runs.Load(), Requests: counts.snapshot()})
			})
			return mux
		})
	}
	return hs, nil
}

// methodCounts counts the A2A requests an agent serves, by method, so
// the harness sees what a hop asks of the agent beyond the call itself.
type methodCounts struct {
	a2asrv.PassthroughCallInterceptor
	mu sync.Mutex
	n  map[string]int64
}

func (m *methodCounts) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	m.mu.Lock()
	m.n[cc.Method()]++
	m.mu.Unlock()
	return ctx, nil, nil
}

// snapshot is a copy of the counts.
func (m *methodCounts) snapshot() map[string]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.n)
}

// agentExec is the work of one kind of agent; it counts its executions.
type agentExec struct {
	kind string
	work time.Duration
	runs atomic.Int64
}

// pong is the text every agent answers with; the harness checks it.
const pong = "pong"

func (x *agentExec) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	x.runs.Add(1)
	return func(yield func(a2a.Event, error) bool) {
		switch x.kind {
		case kindMessage:
			yield(a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(pong)), nil)
		case kindTask:
			task := a2a.NewSubmittedTask(ec, ec.Message)
			task.Artifacts = []*a2a.Artifact{{ID: "result", Parts: a2a.ContentParts{a2a.NewTextPart(pong)}}}
			task.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done"))}
			yield(task, nil)
		default:
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) ||
				!yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
				return
			}
			select {
			case <-ctx.Done():
				yield(nil, ctx.Err())
				return
			case <-time.After(x.work):
			}
			if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart(pong)), nil) {
				return
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done"))), nil)
		}
	}
}

func (x *agentExec) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// steerableHandler serves an a2a-go agent that takes steering signals
// (orchd's steering package, as an agent built on it does), answering
// JSON-RPC at /rpc: it streams a task that works until it is canceled,
// acknowledging each steer it takes (and keeping it at steersPath); an
// interrupt stops it waiting for input, and the next message to the task
// has it work again.
func steerableHandler(base string) http.Handler {
	return steeringHandler(base, "Bench steer", "works until canceled, taking steers", kindSteer,
		func(st *steering.Steering) steeringWork { return &steerExec{st: st} })
}

// pushTimeout bounds each push notification the benchmark agents send.
const pushTimeout = 10 * time.Second

// steeringWork is the work of an agent serving steering signals
// (steeringHandler): its executions and the signals they took are
// counted.
type steeringWork interface {
	a2asrv.AgentExecutor
	counted() (runs *atomic.Int64, taken *signalsTaken)
}

// steeringHandler serves an a2a-go agent named name, with one skill,
// that takes steering signals with orchd's steering package (steerable
// and interruptible), doing the work work makes: JSON-RPC at /rpc, its
// card, its counts at statsPath and the steers it took at steersPath.
// It streams, and sends push notifications to a task's webhook when the
// message that started the task gave one (a2a-go's HTTP sender, in line
// with the work, as a2a-go does).
func steeringHandler(base, name, description, skill string, work func(*steering.Steering) steeringWork) http.Handler {
	store := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})
	st := steering.New(steering.Config{Modes: steering.Modes{Steerable: true, Interruptible: true}, Name: name, Tasks: store})
	x := work(st)
	runs, taken := x.counted()
	card := &a2a.AgentCard{Name: name, Description: description, Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(base+"/rpc", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: true, PushNotifications: true, Extensions: []a2a.AgentExtension{st.Extension()}},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: skill, Name: skill, Tags: []string{skill}}}}
	counts := &methodCounts{n: map[string]int64{}}
	subs := &subscriptions{are: map[a2a.TaskID][]int64{}}
	// Push notifications go to webhooks on loopback, where orchd is.
	sender := push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: pushTimeout, AllowPrivateNetworks: true})
	handler := a2asrv.NewHandler(x, a2asrv.WithTaskStore(store), a2asrv.WithCallInterceptors(st.Interceptor(), counts, subs),
		a2asrv.WithExecutorContextInterceptor(st.ExecutorInterceptor()), a2asrv.WithPushNotifications(push.NewInMemoryStore(), sender))
	mux := http.NewServeMux()
	mux.Handle("/rpc", steering.Echo(a2asrv.NewJSONRPCHandler(handler)))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.HandleFunc("GET "+statsPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(agentStats{Executions: runs.Load(), Requests: counts.snapshot(), Signals: taken.n.Load()})
	})
	mux.Handle("GET "+steersPath, &taken.steers)
	mux.Handle("GET "+subscribedPath, subs)
	return mux
}

// subscriptions keeps when each task was asked for with SubscribeToTask:
// a client following the task again, as a replica taking over a
// delegation does. Its Before runs as the request arrives, before the
// agent reads the task.
type subscriptions struct {
	a2asrv.PassthroughCallInterceptor
	mu  sync.Mutex
	are map[a2a.TaskID][]int64 // unix nanoseconds, in order
}

func (s *subscriptions) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	if r, ok := req.Payload.(*a2a.SubscribeToTaskRequest); ok {
		now := time.Now().UnixNano()
		s.mu.Lock()
		s.are[r.ID] = append(s.are[r.ID], now)
		s.mu.Unlock()
	}
	return ctx, nil, nil
}

// ServeHTTP answers with the tasks subscribed to at or after ?since=
// (unix nanoseconds), and when first since then.
func (s *subscriptions) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	since, _ := strconv.ParseInt(r.URL.Query().Get("since"), 10, 64)
	out := map[a2a.TaskID]int64{}
	s.mu.Lock()
	for id, ats := range s.are {
		if i, _ := slices.BinarySearch(ats, since); i < len(ats) {
			out[id] = ats[i]
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// steerExec is the steerable agent's work; it counts its executions and
// the signals they took, and keeps the steers taken per key.
type steerExec struct {
	st    *steering.Steering
	runs  atomic.Int64
	taken signalsTaken
}

func (x *steerExec) counted() (*atomic.Int64, *signalsTaken) { return &x.runs, &x.taken }

func (x *steerExec) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	x.runs.Add(1)
	return func(yield func(a2a.Event, error) bool) {
		inbox := x.st.Open(ec)
		// The signals queued but not taken when the work ends were
		// acknowledged too: they count as taken.
		defer func() { x.taken.add(inbox.Close()...) }()
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-inbox.Ready():
			}
			if !x.taken.handle(inbox.Take(), func(sig steering.Signal) bool {
				if sig.Control == steering.Interrupt {
					x.taken.add(inbox.Close()...)
					yield(inbox.Interrupted(ec, "interrupted"), nil)
					return false
				}
				return yield(steering.Acknowledged(ec, sig), nil)
			}) {
				return
			}
		}
	}
}

func (x *steerExec) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// hopTransport is the HTTP transport of every A2A client the harness and
// its hops make: keep-alive connections enough for the most callers a
// run has.
func hopTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0
	t.MaxIdleConnsPerHost = 1024
	t.MaxConnsPerHost = 0
	return t
}

// proxyHandlers serves a plain httputil.ReverseProxy in front of each
// base URL in args; only its transport keeps more idle connections than
// the default two, as any proxy under load is set up.
func proxyHandlers(args []string) ([]func(string) http.Handler, error) {
	var hs []func(string) http.Handler
	for _, a := range args {
		target, err := url.Parse(a)
		if err != nil {
			return nil, fmt.Errorf("proxy: %w", err)
		}
		hs = append(hs, func(string) http.Handler {
			p := httputil.NewSingleHostReverseProxy(target)
			p.Transport = hopTransport()
			return p
		})
	}
	return hs, nil
}

// floorHandlers serves the floor hop in front of each agent base URL in
// args: the thinnest A2A hop a2a-go makes possible, an a2asrv JSON-RPC
// handler whose call interceptor relays each SendMessage to the agent
// with an a2aclient and answers with its result; no policy, no store.
func floorHandlers(args []string) ([]func(string) http.Handler, error) {
	var hs []func(string) http.Handler
	for _, a := range args {
		next, err := a2aclient.NewFromEndpoints(context.Background(),
			[]*a2a.AgentInterface{a2a.NewAgentInterface(a+"/rpc", a2a.TransportProtocolJSONRPC)},
			a2aclient.WithJSONRPCTransport(&http.Client{Transport: hopTransport()}))
		if err != nil {
			return nil, fmt.Errorf("floor: client for %s: %w", a, err)
		}
		hs = append(hs, func(base string) http.Handler {
			card := &a2a.AgentCard{Name: "Floor hop", Description: "relays to one agent", Version: "1",
				SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(base+"/rpc", a2a.TransportProtocolJSONRPC)},
				DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"}}
			mux := http.NewServeMux()
			mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(refuse{}, a2asrv.WithCallInterceptors(relay{next: next}))))
			mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
			return mux
		})
	}
	return hs, nil
}

// relay is the floor hop's call interceptor: a SendMessage is answered
// with the next agent's answer to it, before a2a-go's handler runs.
type relay struct {
	a2asrv.PassthroughCallInterceptor
	next *a2aclient.Client
}

func (r relay) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	send, ok := req.Payload.(*a2a.SendMessageRequest)
	if !ok {
		return ctx, nil, fmt.Errorf("the floor hop relays only SendMessage: %w", a2a.ErrUnsupportedOperation)
	}
	res, err := r.next.SendMessage(ctx, send)
	if err != nil {
		return ctx, nil, err
	}
	return ctx, res, nil
}

// refuse is the floor hop's executor: relay answers every call it
// serves, so it never runs.
type refuse struct{}

func (refuse) Execute(context.Context, *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, a2a.ErrUnsupportedOperation) }
}

func (refuse) Cancel(context.Context, *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, a2a.ErrUnsupportedOperation) }
}
