package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// hopConfig sizes a run of the hop matrix.
type hopConfig struct {
	rounds  int           // interleaved rounds over every cell
	cell    time.Duration // how long one cell is measured in one round
	warm    time.Duration // how long each cell runs unmeasured first
	callers []int         // concurrent callers of the cells
	prefill int           // delegations each orchd holds before it is measured
}

// fullHops is the hop matrix of the report: 36 cells, 3 rounds of 1 s.
var fullHops = hopConfig{rounds: 3, cell: time.Second, warm: 100 * time.Millisecond,
	callers: []int{1, 8, 64}, prefill: 10_000}

// The paths of the hop matrix, in the report's order.
const (
	pathDirect     = "direct"      // the client calls the agent
	pathProxy      = "proxy"       // through a plain httputil.ReverseProxy
	pathFloor      = "floor"       // through the floor hop (roles.go)
	pathOrchd      = "orchd"       // through orchd
	pathOrchdOrchd = "orchd-orchd" // through orchd A, which delegates to orchd B
	// pathOrchdMemory is through orchd keeping its state in memory
	// (store: memory), not durable: it shows, in the same run, what the
	// durable store costs a hop and what orchd costs without it.
	pathOrchdMemory = "orchd-memory"
)

var (
	hopPaths = []string{pathDirect, pathProxy, pathFloor, pathOrchd, pathOrchdMemory, pathOrchdOrchd}
	hopKinds = []string{kindMessage, kindTask}
)

// hopBench names the hop matrix's results.
const hopBench = "BenchmarkProcessHop"

// runHops is the report's hop matrix.
func runHops(ctx context.Context, w io.Writer, log *slog.Logger) error {
	return hopMatrix(ctx, w, log, fullHops)
}

// hopMatrix measures A2A calls from this process to an agent in its own
// process, directly and through each hop in its own process, for each
// kind of agent and number of concurrent callers. It writes to w a line
// saying how the run was set up, then one result line per cell and
// round:
//
//	BenchmarkProcessHop/<kind>/<path>/c<callers> <calls> <n> calls/s <µs> p50-µs <µs> p99-µs <n> errors <µs> hop-cpu-µs/call <µs> agent-cpu-µs/call <n> agent-requests/call
//
// then the calls and errors over all cells and the WARN and ERROR lines
// each orchd logged once ready. hop-cpu-µs/call is the CPU time the
// processes between the client and the agent (none direct; both orchds
// on orchd → orchd) used per call, from /proc, whatever else the machine
// runs meanwhile; agent-cpu-µs/call the agent's; agent-requests/call how
// many A2A requests the agent served per call. A failed call counts as
// an error and is logged; it does not end the run.
func hopMatrix(ctx context.Context, w io.Writer, log *slog.Logger, cfg hopConfig) error {
	h, err := newHarness(ctx, log)
	if err != nil {
		return err
	}
	defer h.close()
	agentProc, agents, err := h.role(ctx, "agents", "200ms")
	if err != nil {
		return err
	}
	proxyProc, proxies, err := h.role(ctx, "proxy", agents[0], agents[1])
	if err != nil {
		return err
	}
	floorProc, floors, err := h.role(ctx, "floor", agents[0], agents[1])
	if err != nil {
		return err
	}
	hopAgents := [][2]string{{kindMessage, agents[0]}, {kindTask, agents[1]}}
	b, bBase, err := h.daemon(ctx, orchdSpec{name: "orchd-b", skills: hopKinds, agents: hopAgents})
	if err != nil {
		return err
	}
	m, mBase, err := h.daemon(ctx, orchdSpec{name: "orchd-memory", skills: hopKinds, agents: hopAgents, memory: true})
	if err != nil {
		return err
	}
	a, aBase, err := h.daemon(ctx, orchdSpec{name: "orchd-a", agents: [][2]string{{"b", bBase}}})
	if err != nil {
		return err
	}
	bRPC, err := orchdEndpoint(ctx, bBase)
	if err != nil {
		return err
	}
	aRPC, err := orchdEndpoint(ctx, aBase)
	if err != nil {
		return err
	}
	mRPC, err := orchdEndpoint(ctx, mBase)
	if err != nil {
		return err
	}

	clients := map[string]map[string]*a2aclient.Client{}
	for _, path := range hopPaths {
		clients[path] = map[string]*a2aclient.Client{}
		for i, kind := range hopKinds {
			endpoint := map[string]string{pathDirect: agents[i] + "/rpc", pathProxy: proxies[i] + "/rpc",
				pathFloor: floors[i] + "/rpc", pathOrchd: bRPC, pathOrchdMemory: mRPC, pathOrchdOrchd: aRPC}[path]
			c, closeIdle, err := hopClient(ctx, endpoint)
			if err != nil {
				return fmt.Errorf("%s client for %s: %w", kind, path, err)
			}
			defer closeIdle()
			clients[path][kind] = c
		}
	}

	// Delegations through A fill A's store and B's alike; the memory
	// store is filled as much.
	start := time.Now()
	for _, path := range []string{pathOrchdOrchd, pathOrchdMemory} {
		if err := prefill(ctx, clients[path][kindMessage], cfg.prefill); err != nil {
			return fmt.Errorf("fill the stores through %s: %w", path, err)
		}
	}
	log.Info("stores filled", "delegations", cfg.prefill, "took", time.Since(start).Round(time.Millisecond))
	fmt.Fprintf(w, "%s/setup\t1\t%d prefilled\t%d rounds\t%g cell-s\n", hopBench, cfg.prefill, cfg.rounds, cfg.cell.Seconds())

	type cell struct {
		kind, path string
		callers    int
	}
	var groups [][]cell // the paths of one kind and number of callers
	for _, kind := range hopKinds {
		for _, n := range cfg.callers {
			var g []cell
			for _, path := range hopPaths {
				g = append(g, cell{kind, path, n})
			}
			groups = append(groups, g)
		}
	}
	// The processes each path's calls cross between the client and the
	// agent, whose CPU time is the path's cost.
	hops := map[string][]*proc{pathProxy: {proxyProc}, pathFloor: {floorProc}, pathOrchd: {b}, pathOrchdMemory: {m}, pathOrchdOrchd: {a, b}}
	var total, failed int
	measure := func(c cell, d time.Duration) (cellResult, error) {
		hopCPU, err := cpuOf(hops[c.path])
		if err != nil {
			return cellResult{}, err
		}
		agentCPU, err := cpuTime(agentProc.pid())
		if err != nil {
			return cellResult{}, err
		}
		agentURL := agents[slices.Index(hopKinds, c.kind)]
		_, reqs, err := agentRuns(ctx, agentURL)
		if err != nil {
			return cellResult{}, err
		}
		r := runCell(ctx, clients[c.path][c.kind], c.kind, c.callers, d)
		_, reqsAfter, err := agentRuns(ctx, agentURL)
		if err != nil {
			return cellResult{}, err
		}
		r.agentReqs = reqsAfter - reqs
		if r.hopCPU, err = cpuOf(hops[c.path]); err != nil {
			return cellResult{}, err
		}
		if r.agentCPU, err = cpuTime(agentProc.pid()); err != nil {
			return cellResult{}, err
		}
		r.hopCPU, r.agentCPU = r.hopCPU-hopCPU, r.agentCPU-agentCPU
		total += len(r.lat) + r.errs
		failed += r.errs
		if r.errs > 0 {
			log.Warn("calls failed", "kind", c.kind, "path", c.path, "callers", c.callers, "failed", r.errs, "first", r.first)
		}
		return r, nil
	}
	for _, g := range groups {
		for _, c := range g {
			if _, err := measure(c, cfg.warm); err != nil {
				return err
			}
		}
	}
	for round := range cfg.rounds {
		// Each round starts at another group and, within each group, at
		// another path, so no path always runs first or last.
		for gi := range groups {
			g := groups[(gi+round)%len(groups)]
			for pi := range g {
				c := g[(pi+round)%len(g)]
				if err := ctx.Err(); err != nil {
					return err
				}
				r, err := measure(c, cfg.cell)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "%s/%s/%s/c%d\t%d\t%.1f calls/s\t%d p50-µs\t%d p99-µs\t%d errors\t%.1f hop-cpu-µs/call\t%.1f agent-cpu-µs/call\t%.2f agent-requests/call\n",
					hopBench, c.kind, c.path, c.callers, len(r.lat), r.rate(), r.pct(50).Microseconds(), r.pct(99).Microseconds(), r.errs,
					r.perCall(r.hopCPU), r.perCall(r.agentCPU), float64(r.agentReqs)/float64(max(1, len(r.lat)+r.errs)))
			}
		}
	}
	fmt.Fprintf(w, "%s/all\t1\t%d calls\t%d errors\n", hopBench, total, failed)
	for i, kind := range hopKinds {
		var st agentStats
		if err := getJSON(ctx, agents[i]+statsPath, &st); err != nil {
			return err
		}
		log.Info("the agent served", "kind", kind, "executions", st.Executions, "requests", st.Requests)
	}
	for _, d := range []struct {
		name string
		p    *proc
	}{{"orchd", b}, {"orchd-a", a}, {"orchd-memory", m}} {
		warns, errs, first := d.p.logCounts()
		fmt.Fprintf(w, "%s/logs/%s\t1\t%d warn-lines\t%d error-lines\n", hopBench, d.name, warns, errs)
		for _, l := range first {
			log.Warn("orchd logged", "daemon", d.name, "line", l)
		}
	}
	return nil
}

// orchdEndpoint is the URL of orchd's A2A 1.0 JSON-RPC interface, as its
// card lists it.
func orchdEndpoint(ctx context.Context, base string) (string, error) {
	card, err := (&agentcard.Resolver{Client: http.DefaultClient, CardParser: a2av0.NewAgentCardParser()}).Resolve(ctx, base)
	if err != nil {
		return "", fmt.Errorf("orchd's card: %w", err)
	}
	for _, i := range card.SupportedInterfaces {
		if i.ProtocolBinding == a2a.TransportProtocolJSONRPC && i.ProtocolVersion == a2a.Version {
			return i.URL, nil
		}
	}
	return "", fmt.Errorf("orchd's card at %s lists no JSON-RPC %s interface", base, a2a.Version)
}

// hopClient is an a2a-go JSON-RPC client of endpoint, made alike for
// every path: its own keep-alive connections, as many as the most
// callers of a cell. It returns how to close its idle connections.
func hopClient(ctx context.Context, endpoint string) (*a2aclient.Client, func(), error) {
	t := hopTransport()
	c, err := a2aclient.NewFromEndpoints(ctx, []*a2a.AgentInterface{a2a.NewAgentInterface(endpoint, a2a.TransportProtocolJSONRPC)},
		a2aclient.WithJSONRPCTransport(&http.Client{Transport: t}))
	if err != nil {
		return nil, nil, err
	}
	return c, t.CloseIdleConnections, nil
}

// callTimeout bounds one call of the harness.
const callTimeout = 30 * time.Second

// hopCall sends one message for kind's agent (the skill orchd routes by
// travels on every path alike) and checks the answer.
func hopCall(ctx context.Context, c *a2aclient.Client, kind string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("ping"))
	msg.Metadata = map[string]any{"skill": kind}
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		return err
	}
	return checkAnswer(kind, res)
}

// checkAnswer checks the answer to a message for kind's agent, whoever
// relayed it: the agent's Message saying pong, or its Task COMPLETED
// with the one artifact saying pong.
func checkAnswer(kind string, res a2a.SendMessageResult) error {
	switch r := res.(type) {
	case *a2a.Message:
		if kind != kindMessage {
			return fmt.Errorf("answer is a Message, want a Task")
		}
		if len(r.Parts) != 1 || r.Parts[0].Text() != pong {
			return fmt.Errorf("message answer %v, want %q", r.Parts, pong)
		}
		return nil
	case *a2a.Task:
		if kind != kindTask {
			return fmt.Errorf("answer is a Task (%s), want a Message", r.Status.State)
		}
		if r.Status.State != a2a.TaskStateCompleted {
			return fmt.Errorf("task is %s, want COMPLETED", r.Status.State)
		}
		if len(r.Artifacts) != 1 || len(r.Artifacts[0].Parts) != 1 || r.Artifacts[0].Parts[0].Text() != pong {
			return fmt.Errorf("task artifacts %v, want one saying %q", r.Artifacts, pong)
		}
		return nil
	}
	return fmt.Errorf("answer is a %T", res)
}

// prefillCallers is how many callers fill a store.
const prefillCallers = 32

// prefill makes n delegations of the message agent through c, every
// answer checked, so the daemons behind c hold n more records, as daemons
// that ran a while.
func prefill(ctx context.Context, c *a2aclient.Client, n int) error {
	var mu sync.Mutex
	next := 0
	var first error
	var wg sync.WaitGroup
	for range min(prefillCallers, n) {
		wg.Go(func() {
			for {
				mu.Lock()
				if next == n || first != nil {
					mu.Unlock()
					return
				}
				next++
				mu.Unlock()
				if err := hopCall(ctx, c, kindMessage); err != nil {
					mu.Lock()
					first = cmpOr(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// cmpOr is a when it is set, else b.
func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// cellResult is what one cell measured in one round.
type cellResult struct {
	lat              []time.Duration // the successful calls' latencies, sorted
	errs             int
	first            error
	elapsed          time.Duration
	hopCPU, agentCPU time.Duration // CPU time used meanwhile
	agentReqs        int64         // A2A requests the agent served meanwhile
}

// perCall is d per call made, in µs.
func (r cellResult) perCall(d time.Duration) float64 {
	n := len(r.lat) + r.errs
	if n == 0 {
		return 0
	}
	return float64(d.Microseconds()) / float64(n)
}

// rate is the successful calls per second.
func (r cellResult) rate() float64 {
	if r.elapsed <= 0 {
		return 0
	}
	return float64(len(r.lat)) / r.elapsed.Seconds()
}

// pct is the p-th percentile of the latencies, 0 with none.
func (r cellResult) pct(p int) time.Duration {
	if len(r.lat) == 0 {
		return 0
	}
	return r.lat[min(len(r.lat)*p/100, len(r.lat)-1)]
}

// runCell calls through c from callers goroutines for d, each starting
// its next call when the last one is answered.
func runCell(ctx context.Context, c *a2aclient.Client, kind string, callers int, d time.Duration) cellResult {
	return runCalls(ctx, callers, d, func(ctx context.Context) error { return hopCall(ctx, c, kind) })
}

// runCalls makes calls from callers goroutines for d, each starting its
// next call when the last one returned.
func runCalls(ctx context.Context, callers int, d time.Duration, call func(context.Context) error) cellResult {
	lats := make([][]time.Duration, callers)
	errs := make([]int, callers)
	firsts := make([]error, callers)
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				t0 := time.Now()
				if err := call(ctx); err != nil {
					errs[i]++
					firsts[i] = cmpOr(firsts[i], err)
					continue
				}
				lats[i] = append(lats[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	r := cellResult{elapsed: time.Since(start), lat: slices.Concat(lats...)}
	slices.Sort(r.lat)
	for i := range callers {
		r.errs += errs[i]
		r.first = cmpOr(r.first, firsts[i])
	}
	return r
}
