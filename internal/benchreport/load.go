package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// loadConfig sizes the load run.
type loadConfig struct {
	calls   int           // delegations started at once, in each run
	work    time.Duration // how long the streaming agent works on each
	prefill int           // delegations orchd holds before the runs
	sample  time.Duration // how often orchd's threads and goroutines are read
	rounds  int           // rounds, each a direct run and a run through orchd
}

// fullLoad is the load run of the report: 3 rounds, as one run's peak RSS
// varies by some 5 MiB from the next.
var fullLoad = loadConfig{calls: 1000, work: 200 * time.Millisecond, prefill: 10_000, sample: 100 * time.Millisecond, rounds: 3}

// loadBench names the load run's results.
const loadBench = "BenchmarkProcessLoad"

// loadCallTimeout bounds one call of the load run, from its start.
const loadCallTimeout = 2 * time.Minute

// runLoad is the report's load run.
func runLoad(ctx context.Context, w io.Writer, log *slog.Logger) error {
	return loadRun(ctx, w, log, fullLoad)
}

// loadRun starts cfg.calls calls at once to an agent in its own process
// that streams and works cfg.work on each: first directly with a2a-go
// streaming clients, then as delegations through orchd's HTTP API (POST
// /v1/delegations, then the delegation's events until the stream ends,
// as `orchd delegate` does), in cfg.rounds rounds, each through a new
// orchd on the same store. It writes one result line per run:
//
//	BenchmarkProcessLoad/direct <calls> <ms> wall-ms <ms> p50-ms <ms> p99-ms <n> completed <n> errors <n> lost <n> agent-runs <n> agent-requests <MiB> agent-peak-rss-MiB <ms> agent-cpu-ms
//	BenchmarkProcessLoad/orchd  ... the same, then <MiB> peak-rss-MiB <MiB> rss-before-MiB <n> peak-threads <0|1> goroutines-exposed
//	                               <n> calls <ms> work-ms <n> prefilled <ms> orchd-cpu-ms [<n> peak-goroutines]
//
// completed calls ended COMPLETED after the agent's artifact; errors
// failed on the way; lost ended otherwise. agent-runs is how many tasks
// the agent ran meanwhile, agent-requests how many A2A requests it
// served; agent-cpu-ms and orchd-cpu-ms the CPU time
// each used meanwhile. Peaks are since the run started: VmHWM, reset
// before it; threads and goroutines (the latter only when orchd's
// /metrics shows go_goroutines) sampled every cfg.sample.
func loadRun(ctx context.Context, w io.Writer, log *slog.Logger, cfg loadConfig) error {
	h, err := newHarness(ctx, log)
	if err != nil {
		return err
	}
	defer h.close()
	agentProc, agents, err := h.role(ctx, "agents", cfg.work.String())
	if err != nil {
		return err
	}
	var specs [][2]string
	for i, kind := range agentKinds {
		specs = append(specs, [2]string{kind, agents[i]})
	}
	spec := orchdSpec{name: "orchd", skills: agentKinds, agents: specs}
	d, base, err := h.daemon(ctx, spec)
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
	start := time.Now()
	err = prefill(ctx, fillC, cfg.prefill)
	closeFill()
	if err != nil {
		return fmt.Errorf("fill orchd's store: %w", err)
	}
	log.Info("store filled", "delegations", cfg.prefill, "took", time.Since(start).Round(time.Millisecond))

	slowURL := agents[slices.Index(agentKinds, kindSlow)]
	direct, closeDirect, err := hopClient(ctx, slowURL+"/rpc")
	if err != nil {
		return err
	}
	defer closeDirect()
	apiTransport := hopTransport()
	defer apiTransport.CloseIdleConnections()
	api := &http.Client{Transport: apiTransport}

	var warns, errs int
	var first []string
	for round := range max(cfg.rounds, 1) {
		if round > 0 {
			// Each round runs a new orchd on the same full store, so no
			// round starts with the memory the one before left.
			lw, le, lf := d.logCounts()
			warns, errs, first = warns+lw, errs+le, append(first, lf...)
			if err := d.stop(); err != nil {
				return err
			}
			if d, base, err = h.daemon(ctx, spec); err != nil {
				return err
			}
		}
		paths := []loadPath{
			{pathDirect, func(ctx context.Context) error { return streamCall(ctx, direct) }},
			{pathOrchd, func(ctx context.Context) error { return apiCall(ctx, api, base) }},
		}
		for _, p := range paths { // a few calls first, so connections and caches are warm
			for range 5 {
				if err := p.call(ctx); err != nil {
					return fmt.Errorf("load run, %s warm-up: %w", p.name, err)
				}
			}
		}
		_, exposed := goroutines(ctx, base)
		if err := loadRound(ctx, w, log, cfg, paths, agentProc, d, base, slowURL, exposed); err != nil {
			return err
		}
	}
	var st agentStats
	if err := getJSON(ctx, slowURL+statsPath, &st); err != nil {
		return err
	}
	log.Info("the agent served", "kind", kindSlow, "executions", st.Executions, "requests", st.Requests)
	dw, de, df := d.logCounts()
	warns, errs, first = warns+dw, errs+de, append(first, df...)
	fmt.Fprintf(w, "%s/logs/orchd\t1\t%d warn-lines\t%d error-lines\n", loadBench, warns, errs)
	for _, l := range first {
		log.Warn("orchd logged", "line", l)
	}
	return nil
}

// loadPath is one of the load run's ways to make a call.
type loadPath struct {
	name string
	call func(context.Context) error
}

// loadRound runs cfg.calls calls at once on each path in turn, through
// orchd d (at base) to the agent of agentProc at slowURL, and writes a
// result line for each (loadRun).
func loadRound(ctx context.Context, w io.Writer, log *slog.Logger, cfg loadConfig, paths []loadPath, agentProc, d *proc, base, slowURL string, exposed bool) error {
	for _, p := range paths {
		watched := []*proc{agentProc}
		if p.name == pathOrchd {
			watched = append(watched, d)
		}
		before, err := readStatus(d.pid())
		if err != nil {
			return err
		}
		runsBefore, reqBefore, err := agentRuns(ctx, slowURL)
		if err != nil {
			return err
		}
		for _, wp := range watched {
			if err := resetPeak(wp.pid()); err != nil {
				return err
			}
		}
		agentCPU, err := cpuTime(agentProc.pid())
		if err != nil {
			return err
		}
		orchdCPU, err := cpuTime(d.pid())
		if err != nil {
			return err
		}
		smp := startSampler(ctx, d.pid(), base, exposed && p.name == pathOrchd, cfg.sample)
		r := loadPhase(ctx, cfg.calls, p.call)
		peaks := smp.stop()
		agentCPUAfter, err := cpuTime(agentProc.pid())
		if err != nil {
			return err
		}
		orchdCPUAfter, err := cpuTime(d.pid())
		if err != nil {
			return err
		}
		runsAfter, reqAfter, err := agentRuns(ctx, slowURL)
		if err != nil {
			return err
		}
		agentSt, err := readStatus(agentProc.pid())
		if err != nil {
			return err
		}
		if r.first != nil {
			log.Warn("load run calls failed", "path", p.name, "errors", r.errs, "lost", r.lost, "first", r.first)
		}
		fmt.Fprintf(w, "%s/%s\t%d\t%.0f wall-ms\t%.1f p50-ms\t%.1f p99-ms\t%d completed\t%d errors\t%d lost\t%d agent-runs\t%d agent-requests\t%.1f agent-peak-rss-MiB\t%.0f agent-cpu-ms",
			loadBench, p.name, cfg.calls, ms(r.wall), ms(r.pct(50)), ms(r.pct(99)), len(r.lat), r.errs, r.lost,
			runsAfter-runsBefore, reqAfter-reqBefore, mib(agentSt.hwmKiB), ms(agentCPUAfter-agentCPU))
		if p.name == pathOrchd {
			st, err := readStatus(d.pid())
			if err != nil {
				return err
			}
			fmt.Fprintf(w, "\t%.1f peak-rss-MiB\t%.1f rss-before-MiB\t%d peak-threads\t%d goroutines-exposed\t%d calls\t%g work-ms\t%d prefilled\t%.0f orchd-cpu-ms",
				mib(st.hwmKiB), mib(before.rssKiB), max(peaks.threads, st.threads), b2i(exposed), cfg.calls, ms(cfg.work), cfg.prefill,
				ms(orchdCPUAfter-orchdCPU))
			if exposed {
				fmt.Fprintf(w, "\t%d peak-goroutines", peaks.goroutines)
			}
		}
		fmt.Fprintln(w)
	}
	return nil
}

// loadResult is what one load run measured.
type loadResult struct {
	lat   []time.Duration // the completed calls' latencies, sorted
	errs  int
	lost  int
	first error
	wall  time.Duration
}

// pct is the p-th percentile of the completed calls' latencies.
func (r loadResult) pct(p int) time.Duration {
	return cellResult{lat: r.lat}.pct(p)
}

// errLost marks a call that ended, but not COMPLETED with the agent's
// artifact.
var errLost = errors.New("the work did not end COMPLETED with the agent's artifact")

// loadPhase starts n calls at once and waits for them all.
func loadPhase(ctx context.Context, n int, call func(context.Context) error) loadResult {
	lat := make([]time.Duration, n)
	errs := make([]error, n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-gate
			ctx, cancel := context.WithTimeout(ctx, loadCallTimeout)
			defer cancel()
			t0 := time.Now()
			errs[i] = call(ctx)
			lat[i] = time.Since(t0)
		})
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	r := loadResult{wall: time.Since(start)}
	for i, err := range errs {
		switch {
		case err == nil:
			r.lat = append(r.lat, lat[i])
			continue
		case errors.Is(err, errLost):
			r.lost++
		default:
			r.errs++
		}
		r.first = cmpOr(r.first, err)
	}
	slices.Sort(r.lat)
	return r
}

// streamCall sends a streaming message to the slow agent with c and reads
// the stream to its end: it must end COMPLETED after the artifact.
func streamCall(ctx context.Context, c *a2aclient.Client) error {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("ping"))
	msg.Metadata = map[string]any{"skill": kindSlow}
	var state a2a.TaskState
	artifact := false
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			return err
		}
		switch e := ev.(type) {
		case *a2a.Task:
			state = e.Status.State
		case *a2a.TaskStatusUpdateEvent:
			state = e.Status.State
		case *a2a.TaskArtifactUpdateEvent:
			artifact = artifact || len(e.Artifact.Parts) == 1 && e.Artifact.Parts[0].Text() == pong
		}
	}
	if state != a2a.TaskStateCompleted || !artifact {
		return fmt.Errorf("stream ended %s, artifact %v: %w", state, artifact, errLost)
	}
	return nil
}

// maxEventLine bounds one line of orchd's event stream.
const maxEventLine = 1 << 20

// apiCall delegates to the slow agent through orchd's HTTP API as `orchd
// delegate` does: POST /v1/delegations, then GET the delegation's events
// until the stream ends; the last event must be COMPLETED, after an
// artifact event saying pong.
func apiCall(ctx context.Context, hc *http.Client, base string) error {
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/delegations", strings.NewReader(`{"text": "ping", "skill": "`+kindSlow+`"}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("POST /v1/delegations: %w", err)
	}
	var rec struct {
		ID string `json:"id"`
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, maxJSON)).Decode(&rec)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("POST /v1/delegations: HTTP %d: %w", resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusCreated || rec.ID == "" {
		return fmt.Errorf("POST /v1/delegations: HTTP %d, id %q", resp.StatusCode, rec.ID)
	}
	req, err = http.NewRequestWithContext(ctx, "GET", base+"/v1/delegations/"+rec.ID+"/events", nil)
	if err != nil {
		return err
	}
	resp, err = hc.Do(req)
	if err != nil {
		return fmt.Errorf("delegation %s's events: %w", rec.ID, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("delegation %s's events: HTTP %d", rec.ID, resp.StatusCode)
	}
	state, artifact, err := readEvents(resp.Body)
	if err != nil {
		return fmt.Errorf("delegation %s's events: %w", rec.ID, err)
	}
	if state != a2a.TaskStateCompleted || !artifact {
		return fmt.Errorf("delegation %s ended %s, artifact %v: %w", rec.ID, state, artifact, errLost)
	}
	return nil
}

// readEvents reads a delegation's event stream (server-sent events whose
// data lines are JSON events) to its end: the state after the last
// event, and whether an artifact event carried the agent's pong.
func readEvents(r io.Reader) (state a2a.TaskState, artifact bool, err error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxEventLine)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		var ev struct {
			Kind     string        `json:"kind"`
			State    a2a.TaskState `json:"state"`
			Artifact *a2a.Artifact `json:"artifact"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return state, artifact, err
		}
		state = ev.State
		if ev.Kind == "artifact" && ev.Artifact != nil && len(ev.Artifact.Parts) == 1 && ev.Artifact.Parts[0].Text() == pong {
			artifact = true
		}
	}
	return state, artifact, sc.Err()
}

// agentRuns is how many tasks the agent at base has run, and how many
// A2A requests it has served.
func agentRuns(ctx context.Context, base string) (runs, requests int64, err error) {
	var st agentStats
	if err := getJSON(ctx, base+statsPath, &st); err != nil {
		return 0, 0, fmt.Errorf("agent's runs: %w", err)
	}
	for _, n := range st.Requests {
		requests += n
	}
	return st.Executions, requests, nil
}

// goroutines reads go_goroutines from orchd's /metrics; ok is false when
// orchd does not show it.
func goroutines(ctx context.Context, base string) (n int, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", base+"/metrics", nil)
	if err != nil {
		return 0, false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, false
	}
	v, ok := metricValue(io.LimitReader(resp.Body, maxJSON), "go_goroutines")
	return int(v), ok
}

// metricValue is the value of the unlabelled sample name in a Prometheus
// text exposition; ok is false when there is none, or it is not a
// finite number of at least 0.
func metricValue(r io.Reader, name string) (v float64, ok bool) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxEventLine)
	for sc.Scan() {
		rest, found := strings.CutPrefix(sc.Text(), name+" ")
		if !found {
			continue
		}
		f := strings.Fields(rest) // the value, then maybe a timestamp
		if len(f) == 0 {
			return 0, false
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) || v < 0 || v > 1<<40 {
			return 0, false
		}
		return v, true
	}
	return 0, false
}

// peaks are the highest thread and goroutine counts a sampler read.
type peaks struct{ threads, goroutines int }

// sampler reads a process's threads (and orchd's goroutines) until
// stopped.
type sampler struct {
	stopc chan struct{}
	done  chan peaks
}

// startSampler samples pid's threads every interval, and orchd's
// goroutines at base when withGoroutines is set.
func startSampler(ctx context.Context, pid int, base string, withGoroutines bool, interval time.Duration) *sampler {
	s := &sampler{stopc: make(chan struct{}), done: make(chan peaks, 1)}
	go func() {
		var p peaks
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if st, err := readStatus(pid); err == nil {
				p.threads = max(p.threads, st.threads)
			}
			if withGoroutines {
				if n, ok := goroutines(ctx, base); ok {
					p.goroutines = max(p.goroutines, n)
				}
			}
			select {
			case <-s.stopc:
				s.done <- p
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling and returns the peaks.
func (s *sampler) stop() peaks {
	close(s.stopc)
	return <-s.done
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// mib is kib in MiB.
func mib(kib int64) float64 { return float64(kib) / 1024 }

// b2i is 1 for true.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
