package orchestrator

import (
	"context"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/telemetry"
)

// noop is the cheapest a2a-go agent: it answers every message with a
// message.
type noop struct{}

func (noop) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("pong")), nil)
	}
}

func (noop) Cancel(context.Context, *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(func(a2a.Event, error) bool) {}
}

// benchTrace is the trace context the caller sends on the
// orchd-traceparent path.
var benchTrace = http.Header{
	"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
	"Tracestate":  {"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
	"Baggage":     {"userId=alice,serverNode=DF%2028"},
}

// benchAgent is the no-op agent's server. It counts the A2A calls it
// serves, and those carrying benchTrace's traceparent.
type benchAgent struct {
	*httptest.Server
	calls, traced atomic.Int64
}

func noopAgent(b *testing.B) *benchAgent { return benchAgentOf(b, noop{}, false) }

// benchAgentOf serves the agent exec does the work of, counting calls as
// noopAgent's does; its card declares streaming when streaming is set.
func benchAgentOf(b *testing.B, exec a2asrv.AgentExecutor, streaming bool) *benchAgent {
	b.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	b.Cleanup(srv.Close)
	agent := &benchAgent{Server: srv}
	card := &a2a.AgentCard{Name: "Noop", Description: "answers pong", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL+"/rpc", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: streaming},
		Skills:              []a2a.AgentSkill{{ID: "noop", Name: "noop", Tags: []string{}}}}
	rpc := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(exec))
	mux.Handle("/rpc", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agent.calls.Add(1)
		if r.Header.Get("Traceparent") == benchTrace.Get("Traceparent") {
			agent.traced.Add(1)
		}
		rpc.ServeHTTP(w, r)
	}))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	return agent
}

// benchClient returns an a2a-go client for the agent at base, with
// keep-alive connections sized for parallel calls, sending the headers h
// with every call.
func benchClient(b *testing.B, base string, h http.Header) *a2aclient.Client {
	b.Helper()
	transport := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(transport.CloseIdleConnections)
	hc := &http.Client{Transport: transport}
	if len(h) > 0 {
		hc.Transport = withHeaders{h: h, next: transport}
	}
	card, err := (&agentcard.Resolver{Client: hc, CardParser: a2av0.NewAgentCardParser()}).Resolve(b.Context(), base, askDual())
	if err != nil {
		b.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(b.Context(), card, a2aclient.WithJSONRPCTransport(hc),
		a2aclient.WithConfig(a2aclient.Config{PreferredTransports: []a2a.TransportProtocol{a2a.TransportProtocolJSONRPC}}))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// benchDaemon runs an orchd on its embedded defaults routing to the agent
// at agentURL, with tel's providers when tel is set, and returns it, its
// URL and how to stop it. It logs as `orchd serve` does by default (text
// records at info level, with trace ids), into io.Discard.
func benchDaemon(b *testing.B, agentURL string, tel *telemetry.Telemetry) (*Daemon, string, func()) {
	b.Helper()
	cfg := benchConfig(b)
	cfg.Agents = []registry.Spec{{ID: "noop", URL: agentURL}}
	cfg.Telemetry.Providers = tel
	return runBenchDaemon(b, cfg)
}

// benchConfig is the embedded defaults on an ephemeral loopback port.
// With no stateDir, such a daemon keeps its state in memory.
func benchConfig(b *testing.B) Config {
	b.Helper()
	cfg, err := LoadConfig("")
	if err != nil {
		b.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	return cfg
}

// runBenchDaemon runs a daemon built from cfg until the benchmark ends,
// logging as `orchd serve` does into io.Discard. It returns once the
// daemon listens and has registered cfg's agents (failing the benchmark
// after 30 seconds) with the daemon, its URL and how to stop it sooner.
func runBenchDaemon(b *testing.B, cfg Config) (*Daemon, string, func()) {
	b.Helper()
	log, err := telemetry.NewLogger(io.Discard, "text", slog.LevelInfo)
	if err != nil {
		b.Fatal(err)
	}
	d, err := New(cfg, log)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				b.Errorf("daemon: %v", err)
			}
		})
	}
	b.Cleanup(stop)
	testwait.Until(b, 30*time.Second, fmt.Sprintf("the daemon starting with its %d agents", len(cfg.Agents)), func() bool {
		return d.Addr() != nil && d.Registry().Len() >= len(cfg.Agents)
	})
	return d, "http://" + d.Addr().String(), stop
}

// tracingOn is telemetry that samples every span and batches them to an
// exporter that drops them, next to the same Prometheus metrics as the
// defaults.
func tracingOn(b *testing.B) *telemetry.Telemetry {
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	b.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	metrics, err := telemetry.New(b.Context(), telemetry.Config{Prometheus: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = metrics.Shutdown(context.Background()) })
	return telemetry.WithProviders(tp, metrics.MeterProvider())
}

func send(ctx context.Context, c *a2aclient.Client) error {
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("ping"))})
	if err != nil {
		return err
	}
	switch r := res.(type) {
	case *a2a.Message:
		return nil
	case *a2a.Task:
		if r.Status.State != a2a.TaskStateCompleted {
			return fmt.Errorf("task ended %s", r.Status.State)
		}
		return nil
	}
	return fmt.Errorf("unexpected result %T", res)
}

// BenchmarkHop calls a no-op a2a-go agent directly, through a plain
// httputil.ReverseProxy, and through orchd (a full delegation: choose,
// policies, hand over, mirror the answer), in the same run. orchd runs on
// its embedded defaults (Prometheus metrics on, no trace exporter) with
// the daemon's logger; as orchd-traceparent, the same with a caller that
// sends W3C trace context, which orchd passes on: the cost of passing it;
// and as orchd-traced with every span recorded and batched to an
// exporter that drops them: the cost of tracing. Each
// orchd's delegation store is filled before it is measured (fillDaemon),
// so every delegation pays for forgetting an old record, as in a daemon
// that has run for a while.
//
//	go test ./orchestrator -run '^$' -bench Hop -benchtime 2000x
//
// latency runs one call at a time and reports p50 and p99; parallel runs
// 16 callers and reports throughput.
func BenchmarkHop(b *testing.B) {
	agent := noopAgent(b)

	target, _ := url.Parse(agent.URL)
	proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(target))
	b.Cleanup(proxy.Close)
	proxied := &a2a.AgentCard{Name: "Noop via proxy", SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(proxy.URL+"/rpc", a2a.TransportProtocolJSONRPC)}}

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(hc.CloseIdleConnections)
	// Each path gets its own orchd, stopped before the next path runs, so
	// the delegations one keeps in memory do not tax the next one's GC.
	daemon := func(tel *telemetry.Telemetry, h http.Header) func() (*a2aclient.Client, func()) {
		return func() (*a2aclient.Client, func()) {
			d, base, stop := benchDaemon(b, agent.URL, tel)
			c := benchClient(b, base, h)
			fillDaemon(b, d, c)
			return c, stop
		}
	}
	paths := []struct {
		name  string
		start func() (*a2aclient.Client, func())
	}{
		{"direct", func() (*a2aclient.Client, func()) { return benchClient(b, agent.URL, nil), func() {} }},
		{"proxy", func() (*a2aclient.Client, func()) {
			pc, err := a2aclient.NewFromCard(b.Context(), proxied, a2aclient.WithJSONRPCTransport(hc))
			if err != nil {
				b.Fatal(err)
			}
			return pc, func() {}
		}},
		{"orchd", daemon(nil, nil)},
		{"orchd-traceparent", daemon(nil, benchTrace)},
		{"orchd-traced", daemon(tracingOn(b), nil)},
	}

	for _, path := range paths {
		name := path.name
		calls, traced := agent.calls.Load(), agent.traced.Load()
		c, stop := path.start()
		runtime.GC()
		hopRuns(b, name, c)
		stop()
		if name == "orchd-traceparent" {
			// The caller's trace context must have reached the agent on
			// every call, or this path measured something else.
			if n, got := agent.calls.Load()-calls, agent.traced.Load()-traced; n == 0 || got != n {
				b.Fatalf("%s: %d of the agent's %d calls carried the caller's traceparent", name, got, n)
			}
		}
	}
}

// hopRuns measures calls through c as the sub-benchmarks name/latency,
// one call at a time, reporting p50 and p99, and name/parallel, 16
// callers, reporting throughput.
func hopRuns(b *testing.B, name string, c *a2aclient.Client) {
	b.Run(name+"/latency", func(b *testing.B) {
		lat := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			if err := send(b.Context(), c); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(start))
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	})
	b.Run(name+"/parallel", func(b *testing.B) {
		parallelCalls(b, func() error { return send(context.Background(), c) })
	})
}

// parallelCalls runs call from 16 callers b.N times in all and reports
// the throughput.
func parallelCalls(b *testing.B, call func() error) {
	b.SetParallelism(8) // 16 callers on 2 cores
	var mu sync.Mutex
	var firstErr error
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := call(); err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
			}
		}
	})
	if firstErr != nil {
		b.Fatal(firstErr)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "calls/s")
}
