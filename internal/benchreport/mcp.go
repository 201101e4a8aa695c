package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/mcpserver"
)

// mcpConfig sizes the MCP run.
type mcpConfig struct {
	rounds int           // interleaved rounds over every cell
	cell   time.Duration // how long a delegate or tasks/get cell is measured in one round
	warm   time.Duration // how long each of those runs unmeasured first
	// paced is how long a cell of pollers polling at the interval orchd
	// advertises is measured in one round.
	paced     time.Duration
	callers   int // delegating at once
	pollers   int // calling tasks/get at once
	prefill   int // delegations orchd holds before it is measured
	working   int // working tasks polled
	completed int // completed tasks polled
	// steerTasks is how many tasks each way of steering steers in a
	// round, steersPerTask times each.
	steerTasks int
}

// fullMCP is the MCP run of the report.
var fullMCP = mcpConfig{rounds: 3, cell: time.Second, warm: 200 * time.Millisecond, paced: 3 * time.Second, callers: 8, pollers: 64,
	prefill: 10_000, working: 64, completed: 256, steerTasks: 10}

// steersPerTask is how many steers each task of the steering cells takes:
// a2a-go copies a task's whole history on every update, so hundreds of
// steers on one task would measure that (as BenchmarkSteerChain).
const steersPerTask = 10

// mcpBench names the MCP run's results.
const mcpBench = "BenchmarkProcessMCP"

// The fronts the MCP run compares, and the ways it steers.
const (
	frontAPI       = "api"        // orchd's HTTP API
	frontMCP       = "mcp"        // orchd's MCP endpoint
	steerMCPMethod = "mcp-method" // the steering extension's steer method
	steerMCPTool   = "mcp-tool"   // the orchd_steer tool
)

// runMCP is the report's MCP run.
func runMCP(ctx context.Context, w io.Writer, log *slog.Logger) error {
	return mcpRun(ctx, w, log, fullMCP)
}

// mcpRun measures orchd's MCP endpoint against its HTTP API, in the same
// run, on the same orchd (`orchd serve`, the embedded store, its store
// filled with cfg.prefill delegations) and the same agents, each in a
// process of its own: an a2a-go agent answering with a Message, and a
// steerable a2a-go agent whose tasks work until canceled. The MCP client
// is mcpClient, speaking 2026-07-28. It writes
//
//	BenchmarkProcessMCP/delegate/<api|mcp>/c<callers> <calls> <n> calls/s <µs> p50-µs <µs> p99-µs <n> errors <µs> orchd-cpu-µs/call
//	BenchmarkProcessMCP/get/<api|mcp>/<working|completed>/c<pollers> ... the same
//	BenchmarkProcessMCP/get/<api|mcp>/<working|completed>/paced<pollers> ... the same, then <ms> interval-ms
//	BenchmarkProcessMCP/steer/<api|mcp-method|mcp-tool> <steers> <µs> p50-µs <µs> p99-µs <n> errors <µs> orchd-cpu-µs/call
//
// once per round, each line a cell:
//
//   - delegate: callers delegate to the Message agent at once, each its
//     next delegation once the last is answered: POST /v1/delegations
//     (answered with the record, COMPLETED), or tools/call of
//     orchd_delegate without the Tasks extension (answered, once the
//     agent has, with its answer);
//   - get: pollers read tasks at once, each the next of the cfg.working
//     tasks of the steerable agent (WORKING, live in orchd's memory) or of
//     the cfg.completed tasks of the Message agent, all made through MCP
//     as tasks and then pushed out of the ended delegations orchd keeps in
//     memory by the prefill, so read from the store: tasks/get, or GET
//     /v1/delegations/{id}. In the c<pollers> cells each poller reads
//     again as soon as it has its answer, so the latencies are mostly
//     the queue: 64 pollers at n reads a second wait 64/n s a read; in
//     the paced<pollers> cells each polls at the interval orchd's tasks
//     advertise (pollIntervalMs), as a client of the Tasks extension
//     does, their starts spread over the interval, for cfg.paced;
//   - steer: one steer at a time to a WORKING task of the steerable agent,
//     through POST /v1/delegations/{id}:steer, the steering extension's
//     io.github.orchd/steering/steer or the orchd_steer tool; each task is
//     made through the same front (by a client without the Tasks
//     extension for the tool), takes steersPerTask steers and is
//     canceled, its untimed; the fronts take turns, task by task.
//
// Every answer is checked. orchd-cpu-µs/call is orchd's CPU time over the
// cell (for steers, over the steers alone) per call, from /proc. Then it
// writes how many steers were acknowledged and how many the agent took,
// the calls and errors over all cells, and the WARN and ERROR lines
// orchd logged once ready.
func mcpRun(ctx context.Context, w io.Writer, log *slog.Logger, cfg mcpConfig) error {
	h, err := newHarness(ctx, log)
	if err != nil {
		return err
	}
	defer h.close()
	_, agents, err := h.role(ctx, "agents", "200ms")
	if err != nil {
		return err
	}
	_, steerable, err := h.role(ctx, "steerable")
	if err != nil {
		return err
	}
	d, base, err := h.daemon(ctx, orchdSpec{name: "orchd", skills: []string{kindMessage, kindSteer},
		agents: [][2]string{{kindMessage, agents[slices.Index(agentKinds, kindMessage)]}, {kindSteer, steerable[0]}}})
	if err != nil {
		return err
	}
	apiTransport, mcpTransport := hopTransport(), hopTransport()
	defer apiTransport.CloseIdleConnections()
	defer mcpTransport.CloseIdleConnections()
	f := &fronts{base: base, api: &http.Client{Transport: apiTransport}}
	mcpHTTP := &http.Client{Transport: mcpTransport}
	f.tools = newMCPClient(mcpHTTP, base+mcpserver.Path)
	f.tasks = newMCPClient(mcpHTTP, base+mcpserver.Path, mcpserver.ExtTasks, mcpserver.ExtSteering)

	start := time.Now()
	completed, err := f.startTasks(ctx, kindMessage, cfg.completed, "completed")
	if err != nil {
		return err
	}
	rpc, err := orchdEndpoint(ctx, base)
	if err != nil {
		return err
	}
	fillC, closeFill, err := hopClient(ctx, rpc)
	if err != nil {
		return err
	}
	err = prefill(ctx, fillC, cfg.prefill)
	closeFill()
	if err != nil {
		return fmt.Errorf("fill orchd's store: %w", err)
	}
	working, err := f.startTasks(ctx, kindSteer, cfg.working, "working")
	if err != nil {
		return err
	}
	log.Info("tasks made and store filled", "completed", len(completed), "working", len(working), "delegations", cfg.prefill,
		"took", time.Since(start).Round(time.Millisecond))
	tk, err := f.taskGet(ctx, working[0])
	if err != nil {
		return err
	}
	if tk.PollIntervalMs <= 0 {
		return fmt.Errorf("task %s advertises no poll interval: %+v", working[0], tk)
	}
	interval := time.Duration(tk.PollIntervalMs) * time.Millisecond
	fmt.Fprintf(w, "%s/setup\t1\t%d prefilled\t%d rounds\t%g cell-s\t%g paced-s\t%d working-tasks\t%d completed-tasks\t%d steers-a-task\t%d tasks-steered\n",
		mcpBench, cfg.prefill, cfg.rounds, cfg.cell.Seconds(), cfg.paced.Seconds(), len(working), len(completed), steersPerTask, cfg.steerTasks)

	type cell struct {
		name    string
		callers int
		call    func(context.Context) error
		// every is the interval each caller calls at; 0: as soon as the
		// last call returned.
		every time.Duration
	}
	poll := func(ids []string, get func(context.Context, string) error) func(context.Context) error {
		var next atomic.Int64
		return func(ctx context.Context) error { return get(ctx, ids[int(next.Add(1))%len(ids)]) }
	}
	groups := [][]cell{
		{
			{fmt.Sprintf("delegate/%s/c%d", frontAPI, cfg.callers), cfg.callers, f.apiDelegate, 0},
			{fmt.Sprintf("delegate/%s/c%d", frontMCP, cfg.callers), cfg.callers, f.mcpDelegate, 0},
		},
	}
	var gets, paced []cell
	for _, state := range []string{"working", "completed"} {
		ids, want := working, a2a.TaskStateWorking
		if state == "completed" {
			ids, want = completed, a2a.TaskStateCompleted
		}
		for _, front := range []string{frontAPI, frontMCP} {
			get := poll(ids, f.apiGet(want))
			if front == frontMCP {
				get = poll(ids, f.mcpGet(state))
			}
			gets = append(gets, cell{fmt.Sprintf("get/%s/%s/c%d", front, state, cfg.pollers), cfg.pollers, get, 0})
			paced = append(paced, cell{fmt.Sprintf("get/%s/%s/paced%d", front, state, cfg.pollers), cfg.pollers, get, interval})
		}
	}
	groups = append(groups, gets, paced)
	var total, failed int
	measure := func(c cell, dur time.Duration) (cellResult, error) {
		cpu, err := cpuTime(d.pid())
		if err != nil {
			return cellResult{}, err
		}
		var r cellResult
		if c.every > 0 {
			r = runPaced(ctx, c.callers, c.every, dur, c.call)
		} else {
			r = runCalls(ctx, c.callers, dur, c.call)
		}
		after, err := cpuTime(d.pid())
		if err != nil {
			return cellResult{}, err
		}
		r.hopCPU = after - cpu
		total += len(r.lat) + r.errs
		failed += r.errs
		if r.errs > 0 {
			log.Warn("calls failed", "cell", c.name, "failed", r.errs, "first", r.first)
		}
		return r, nil
	}
	for _, g := range groups {
		for _, c := range g {
			if c.every > 0 {
				continue // the closed-loop cells warmed the same calls
			}
			if _, err := measure(c, cfg.warm); err != nil {
				return err
			}
		}
	}
	steerers := []steerer{f.apiSteerer(), f.methodSteerer(), f.toolSteerer()}
	var sent atomic.Int64
	for round := range cfg.rounds {
		// Each round starts at another cell of each group, so no cell
		// always runs first or last.
		for _, g := range groups {
			for ci := range g {
				c := g[(ci+round)%len(g)]
				if err := ctx.Err(); err != nil {
					return err
				}
				dur := cfg.cell
				if c.every > 0 {
					dur = cfg.paced
				}
				r, err := measure(c, dur)
				if err != nil {
					return err
				}
				fmt.Fprintf(w, "%s/%s\t%d\t%.1f calls/s\t%d p50-µs\t%d p99-µs\t%d errors\t%.1f orchd-cpu-µs/call",
					mcpBench, c.name, len(r.lat), r.rate(), r.pct(50).Microseconds(), r.pct(99).Microseconds(), r.errs, r.perCall(r.hopCPU))
				if c.every > 0 {
					fmt.Fprintf(w, "\t%d interval-ms", c.every.Milliseconds())
				}
				fmt.Fprintln(w)
			}
		}
		rs, err := steerRound(ctx, log, d, steerers, cfg.steerTasks, round, &sent)
		if err != nil {
			return err
		}
		for i, s := range steerers {
			r := rs[i]
			total += len(r.lat) + r.errs
			failed += r.errs
			fmt.Fprintf(w, "%s/steer/%s\t%d\t%d p50-µs\t%d p99-µs\t%d errors\t%.1f orchd-cpu-µs/call\n",
				mcpBench, s.name, len(r.lat), r.pct(50).Microseconds(), r.pct(99).Microseconds(), r.errs, r.perCall(r.hopCPU))
		}
	}
	var st agentStats
	if err := getJSON(ctx, steerable[0]+statsPath, &st); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s/agent\t1\t%d steers-sent\t%d steers-taken\n", mcpBench, sent.Load(), st.Signals)
	fmt.Fprintf(w, "%s/all\t1\t%d calls\t%d errors\n", mcpBench, total, failed)
	warns, errs, first := d.logCounts()
	fmt.Fprintf(w, "%s/logs/orchd\t1\t%d warn-lines\t%d error-lines\n", mcpBench, warns, errs)
	for _, l := range first {
		log.Warn("orchd logged", "line", l)
	}
	return nil
}

// runPaced makes calls from callers goroutines for d, each calling every
// interval (at once when its last call took longer), their first calls
// spread evenly over the first interval.
func runPaced(ctx context.Context, callers int, every, d time.Duration, call func(context.Context) error) cellResult {
	lats := make([][]time.Duration, callers)
	errs := make([]int, callers)
	firsts := make([]error, callers)
	start := time.Now()
	end := start.Add(d)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			next := start.Add(every * time.Duration(i) / time.Duration(callers))
			for {
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Until(next)):
				}
				if !next.Before(end) {
					return
				}
				t0 := time.Now()
				if err := call(ctx); err != nil {
					errs[i]++
					firsts[i] = cmpOr(firsts[i], err)
				} else {
					lats[i] = append(lats[i], time.Since(t0))
				}
				next = next.Add(every)
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

// steerer is one way to steer: it starts a WORKING task, steers it and
// cancels it, through one front.
type steerer struct {
	name   string
	start  func(context.Context) (string, error)
	steer  func(ctx context.Context, id string, n int) error
	cancel func(context.Context, string) error
}

// steerRound steers, with each of steerers in turn, tasks tasks
// steersPerTask times each, and returns what each measured: the steers'
// latencies and orchd's CPU time over them. The order of the steerers
// rotates task by task, starting from another in each round; sent counts
// the steers acknowledged.
func steerRound(ctx context.Context, log *slog.Logger, d *proc, steerers []steerer, tasks, round int, sent *atomic.Int64) ([]cellResult, error) {
	rs := make([]cellResult, len(steerers))
	for t := range tasks {
		for k := range steerers {
			i := (k + t + round) % len(steerers)
			s := steerers[i]
			id, err := s.start(ctx)
			if err != nil {
				return nil, fmt.Errorf("steering through %s: start a task: %w", s.name, err)
			}
			cpu, err := cpuTime(d.pid())
			if err != nil {
				return nil, err
			}
			for n := 1; n <= steersPerTask; n++ {
				t0 := time.Now()
				if err := s.steer(ctx, id, n); err != nil {
					rs[i].errs++
					rs[i].first = cmpOr(rs[i].first, err)
					continue
				}
				rs[i].lat = append(rs[i].lat, time.Since(t0))
				sent.Add(1)
			}
			after, err := cpuTime(d.pid())
			if err != nil {
				return nil, err
			}
			rs[i].hopCPU += after - cpu
			if err := s.cancel(ctx, id); err != nil {
				return nil, fmt.Errorf("steering through %s: cancel task %s: %w", s.name, id, err)
			}
		}
	}
	for i, s := range steerers {
		slices.Sort(rs[i].lat)
		if rs[i].errs > 0 {
			log.Warn("steers failed", "way", s.name, "failed", rs[i].errs, "first", rs[i].first)
		}
	}
	return rs, nil
}

// fronts are the clients of one orchd's HTTP API and MCP endpoint.
type fronts struct {
	base string
	api  *http.Client
	// tools is an MCP client declaring no extension, as most hosts are;
	// tasks declares the Tasks and steering extensions.
	tools, tasks *mcpClient
}

// apiDo sends a request with a JSON body (none when empty) to the API and
// decodes a JSON answer with status want into out, which may be nil.
func (f *fronts) apiDo(ctx context.Context, method, path, body string, want int, out any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, f.base+path, rd)
	if err != nil {
		return err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := f.api.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return fmt.Errorf("%s %s: HTTP %d: %s", method, path, resp.StatusCode, b)
	}
	if out == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxJSON))
		return err
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSON)).Decode(out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// apiRecord is what the harness reads of a delegation's record.
type apiRecord struct {
	ID     string        `json:"id"`
	State  a2a.TaskState `json:"state"`
	Result *a2a.Message  `json:"result"`
}

// apiDelegate delegates to the Message agent through the API; the answer
// must be the record, COMPLETED with the agent's pong.
func (f *fronts) apiDelegate(ctx context.Context) error {
	var rec apiRecord
	if err := f.apiDo(ctx, "POST", "/v1/delegations", `{"text": "ping", "skill": "`+kindMessage+`"}`, http.StatusCreated, &rec); err != nil {
		return err
	}
	if rec.State != a2a.TaskStateCompleted || rec.Result == nil || len(rec.Result.Parts) != 1 || rec.Result.Parts[0].Text() != pong {
		return fmt.Errorf("delegation %s is %s with result %v, want COMPLETED saying %q", rec.ID, rec.State, rec.Result, pong)
	}
	return nil
}

// toolStatus is what the harness reads of a tool's Status answer.
type toolStatus struct {
	IsError    bool `json:"isError"`
	Structured struct {
		Delegation string `json:"delegation"`
		State      string `json:"state"`
		Message    string `json:"message"`
	} `json:"structuredContent"`
}

// mcpDelegate delegates to the Message agent with orchd_delegate, as a
// client without the Tasks extension does; the answer must be the
// delegation, completed with the agent's pong.
func (f *fronts) mcpDelegate(ctx context.Context) error {
	var res toolStatus
	err := f.tools.call(ctx, "tools/call", mcpserver.ToolDelegate, map[string]any{"name": mcpserver.ToolDelegate,
		"arguments": map[string]any{"text": "ping", "skill": kindMessage}}, &res)
	if err != nil {
		return err
	}
	if s := res.Structured; res.IsError || s.State != "completed" || s.Message != pong {
		return fmt.Errorf("delegation %s is %s saying %q (isError %v), want completed saying %q", s.Delegation, s.State, s.Message, res.IsError, pong)
	}
	return nil
}

// apiGet returns a read of a delegation through the API, which must be in
// state want.
func (f *fronts) apiGet(want a2a.TaskState) func(context.Context, string) error {
	return func(ctx context.Context, id string) error {
		var rec apiRecord
		if err := f.apiDo(ctx, "GET", "/v1/delegations/"+id, "", http.StatusOK, &rec); err != nil {
			return err
		}
		if rec.ID != id || rec.State != want {
			return fmt.Errorf("delegation %s: got %s, %s, want %s", id, rec.ID, rec.State, want)
		}
		return nil
	}
}

// mcpTask is what the harness reads of a task.
type mcpTask struct {
	ResultType     string `json:"resultType"`
	TaskID         string `json:"taskId"`
	Status         string `json:"status"`
	PollIntervalMs int64  `json:"pollIntervalMs"`
	Result         *struct {
		IsError bool `json:"isError"`
	} `json:"result"`
	Meta map[string]struct {
		State string `json:"state"`
	} `json:"_meta"`
}

// taskGet reads task id with tasks/get.
func (f *fronts) taskGet(ctx context.Context, id string) (mcpTask, error) {
	var tk mcpTask
	err := f.tasks.call(ctx, mcpserver.MethodTaskGet, id, map[string]any{"taskId": id}, &tk)
	return tk, err
}

// mcpGet returns a read of a task with tasks/get, whose status must be
// want (a completed one with its result, not an error).
func (f *fronts) mcpGet(want string) func(context.Context, string) error {
	return func(ctx context.Context, id string) error {
		tk, err := f.taskGet(ctx, id)
		if err != nil {
			return err
		}
		if tk.TaskID != id || tk.Status != want || want == "completed" && (tk.Result == nil || tk.Result.IsError) {
			return fmt.Errorf("task %s: got %s, %s, want %s", id, tk.TaskID, tk.Status, want)
		}
		return nil
	}
}

// startTask calls orchd_delegate as a task for kind's agent and returns
// the task's id.
func (f *fronts) startTask(ctx context.Context, kind string) (string, error) {
	var created mcpTask
	err := f.tasks.call(ctx, "tools/call", mcpserver.ToolDelegate, map[string]any{"name": mcpserver.ToolDelegate,
		"arguments": map[string]any{"text": "work", "skill": kind}}, &created)
	if err != nil {
		return "", err
	}
	if created.ResultType != "task" || created.TaskID == "" {
		return "", fmt.Errorf("orchd_delegate did not answer with a task: %+v", created)
	}
	return created.TaskID, nil
}

// startTasks starts n tasks for kind's agent, 32 at a time, and waits
// until each is in the state want ("working": its delegation WORKING).
func (f *fronts) startTasks(ctx context.Context, kind string, n int, want string) ([]string, error) {
	ids := make([]string, n)
	var mu sync.Mutex
	var first error
	next := 0
	var wg sync.WaitGroup
	for range min(prefillCallers, n) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= n {
					return
				}
				id, err := f.startTask(ctx, kind)
				if err == nil {
					ids[i] = id
					err = f.waitTask(ctx, id, want)
				}
				if err != nil {
					mu.Lock()
					first = cmpOr(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return nil, fmt.Errorf("start %d %s tasks for the %s agent: %w", n, want, kind, first)
	}
	return ids, nil
}

// waitStep is how often the harness reads a task it waits for.
const waitStep = 5 * time.Millisecond

// waitTask reads task id until it is in the state want ("working": its
// delegation WORKING, not SUBMITTED), for at most callTimeout.
func (f *fronts) waitTask(ctx context.Context, id, want string) error {
	return waitUntil(ctx, func(ctx context.Context) (string, error) {
		tk, err := f.taskGet(ctx, id)
		if want == "working" {
			return tk.Meta[mcpserver.ExtSteering].State, err
		}
		return tk.Status, err
	}, want, "task "+id)
}

// waitUntil calls state until it answers want, for at most callTimeout.
func waitUntil(ctx context.Context, state func(context.Context) (string, error), want, what string) error {
	deadline := time.Now().Add(callTimeout)
	for {
		s, err := state(ctx)
		if err != nil {
			return err
		}
		if s == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is %s after %s, want %s", what, s, callTimeout, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(waitStep):
		}
	}
}

// receiptAnswer is what the harness reads of a steer's receipt.
type receiptAnswer struct {
	Hops      []receiptHop `json:"hops"`
	Duplicate bool         `json:"duplicate"`
}

// receiptHop is one hop of a receipt: the agent that accepted the signal
// and the number it gave it.
type receiptHop struct {
	Agent string `json:"agent"`
	Seq   int64  `json:"seq"`
}

// check checks the receipt of the n-th steer of a task: it names orchd
// and the agent, the steer numbered n at both, delivered once.
func (r receiptAnswer) check(n int) error { return r.checkHops(n, 2) }

// checkHops checks the receipt of the n-th signal to a task across hops
// hops: it names each hop, the signal numbered n at every one (any
// number when n is 0), delivered once.
func (r receiptAnswer) checkHops(n, hops int) error {
	ok := len(r.Hops) == hops && !r.Duplicate
	for _, h := range r.Hops {
		ok = ok && (n == 0 || h.Seq == int64(n))
	}
	if !ok {
		return fmt.Errorf("receipt of signal %d: %+v, want %d hops numbering it %d", n, r, hops, n)
	}
	return nil
}

// apiSteerer steers through the API.
func (f *fronts) apiSteerer() steerer {
	return steerer{name: frontAPI,
		start: func(ctx context.Context) (string, error) {
			var rec apiRecord
			if err := f.apiDo(ctx, "POST", "/v1/delegations", `{"text": "work", "skill": "`+kindSteer+`"}`, http.StatusCreated, &rec); err != nil {
				return "", err
			}
			return rec.ID, waitUntil(ctx, func(ctx context.Context) (string, error) {
				var now apiRecord
				err := f.apiDo(ctx, "GET", "/v1/delegations/"+rec.ID, "", http.StatusOK, &now)
				return string(now.State), err
			}, string(a2a.TaskStateWorking), "delegation "+rec.ID)
		},
		steer: func(ctx context.Context, id string, n int) error {
			var r receiptAnswer
			if err := f.apiDo(ctx, "POST", "/v1/delegations/"+id+":steer", fmt.Sprintf(`{"text": "steer %d"}`, n), http.StatusOK, &r); err != nil {
				return err
			}
			return r.check(n)
		},
		cancel: func(ctx context.Context, id string) error {
			return f.apiDo(ctx, "POST", "/v1/delegations/"+id+":cancel", "", http.StatusOK, nil)
		},
	}
}

// methodSteerer steers with the steering extension's method, on tasks.
func (f *fronts) methodSteerer() steerer {
	return steerer{name: steerMCPMethod,
		start: func(ctx context.Context) (string, error) {
			id, err := f.startTask(ctx, kindSteer)
			if err != nil {
				return "", err
			}
			return id, f.waitTask(ctx, id, "working")
		},
		steer: func(ctx context.Context, id string, n int) error {
			var res struct {
				Receipt receiptAnswer `json:"receipt"`
			}
			err := f.tasks.call(ctx, mcpserver.MethodSteer, id, map[string]any{"taskId": id, "messageId": fmt.Sprintf("%s-%d", id, n),
				"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("steer %d", n)}}}, &res)
			if err != nil {
				return err
			}
			return res.Receipt.check(n)
		},
		cancel: func(ctx context.Context, id string) error {
			return f.tasks.call(ctx, mcpserver.MethodTaskCancel, id, map[string]any{"taskId": id}, nil)
		},
	}
}

// toolSteerer steers with the orchd_steer tool, on delegations started
// and followed with tools by a client declaring no extension.
func (f *fronts) toolSteerer() steerer {
	tool := func(ctx context.Context, name string, args map[string]any, out any) error {
		return f.tools.call(ctx, "tools/call", name, map[string]any{"name": name, "arguments": args}, out)
	}
	return steerer{name: steerMCPTool,
		start: func(ctx context.Context) (string, error) {
			var res toolStatus
			if err := tool(ctx, mcpserver.ToolDelegate, map[string]any{"text": "work", "skill": kindSteer, "waitSeconds": 0}, &res); err != nil {
				return "", err
			}
			id := res.Structured.Delegation
			if res.IsError || id == "" {
				return "", fmt.Errorf("orchd_delegate: %+v", res)
			}
			return id, waitUntil(ctx, func(ctx context.Context) (string, error) {
				var now toolStatus
				err := tool(ctx, mcpserver.ToolStatus, map[string]any{"delegation": id}, &now)
				return now.Structured.State, err
			}, "working", "delegation "+id)
		},
		steer: func(ctx context.Context, id string, n int) error {
			var res struct {
				IsError bool `json:"isError"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
				Structured receiptAnswer `json:"structuredContent"`
			}
			if err := tool(ctx, mcpserver.ToolSteer, map[string]any{"delegation": id, "text": fmt.Sprintf("steer %d", n)}, &res); err != nil {
				return err
			}
			if res.IsError {
				return fmt.Errorf("orchd_steer answered a tool error: %+v", res.Content)
			}
			return res.Structured.check(n)
		},
		cancel: func(ctx context.Context, id string) error {
			return tool(ctx, mcpserver.ToolCancel, map[string]any{"delegation": id}, nil)
		},
	}
}
