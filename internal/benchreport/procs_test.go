package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"testing"
	"text/template"
	"time"

	"go.uber.org/goleak"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/steering"
)

// TestMain lets the test binary play the helper roles the out-of-process
// runs start it in, as the command does; run as tests, it fails them on
// leaked goroutines.
func TestMain(m *testing.M) {
	if role := os.Getenv(roleEnv); role != "" {
		os.Exit(playRole(role, os.Getenv(roleArgsEnv)))
	}
	goleak.VerifyTestMain(m)
}

// The out-of-process runs in their smallest form: every path, kind and
// number of callers of the report, each measured briefly.
var (
	tinyHops    = hopConfig{rounds: 1, cell: 200 * time.Millisecond, warm: 20 * time.Millisecond, callers: fullHops.callers, prefill: 50}
	tinyLoad    = loadConfig{calls: 20, work: 200 * time.Millisecond, prefill: 50, sample: 20 * time.Millisecond, rounds: 2}
	tinyHostile = hostileConfig{clients: 10, httpBytes: 1 << 20, grpcBytes: 256 << 10}
	tinyMCP     = mcpConfig{rounds: 1, cell: 200 * time.Millisecond, warm: 20 * time.Millisecond, paced: 300 * time.Millisecond, callers: fullMCP.callers,
		pollers: fullMCP.pollers, prefill: 50, working: 8, completed: 8, steerTasks: 1}
	// tinyScale works a few seconds on each of a few delegations, some
	// followed, steered and interrupted.
	tinyScale = scaleConfig{delegations: 60, followed: 10, callers: 8, work: 5 * time.Second, tick: 500 * time.Millisecond,
		steered: 5, steersEach: 2, interrupts: 5, ended: 200, killAfter: time.Second, sample: 100 * time.Millisecond}
	// tinySteer steers and interrupts a few tasks on each path, idle and
	// while a few delegations are held through the chain.
	tinySteer = steerConfig{steerTasks: 2, steersEach: 5, interruptTasks: 1, interruptsEach: 3, load: 20, callers: 8}
	// tinyCluster holds a few delegations on each replica, with a short
	// lease so the failover is over in seconds.
	tinyCluster = clusterConfig{perReplica: 20, followed: 3, callers: 8, work: 34 * time.Second, silent: 6 * time.Second,
		tick: 500 * time.Millisecond, quiet: 2 * time.Second, leaseTTL: 3 * time.Second}
)

// TestProcessRuns_Tiny runs the hop matrix, the load run, the hostile
// clients, the MCP run, the scale run, the steering run and the cluster
// run against the real processes (the agents, the
// proxy, the floor hop, the steerable agent, the orchds built from
// ./cmd/orchd), in their smallest form: every call of every path must
// have been answered correctly, and the output must render the report's
// out-of-process sections whole.
func TestProcessRuns_Tiny(t *testing.T) {
	if testing.Short() {
		t.Skip("builds orchd and starts processes")
	}
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var out bytes.Buffer
	if err := hopMatrix(t.Context(), &out, log, tinyHops); err != nil {
		t.Fatal(err)
	}
	if err := loadRun(t.Context(), &out, log, tinyLoad); err != nil {
		t.Fatal(err)
	}
	if err := hostileRun(t.Context(), &out, log, tinyHostile); err != nil {
		t.Fatal(err)
	}
	if err := mcpRun(t.Context(), &out, log, tinyMCP); err != nil {
		t.Fatal(err)
	}
	if err := scaleRun(t.Context(), &out, log, tinyScale); err != nil {
		t.Fatal(err)
	}
	if err := steerRun(t.Context(), &out, log, tinySteer); err != nil {
		t.Fatal(err)
	}
	if err := clusterRun(t.Context(), &out, log, tinyCluster); err != nil {
		t.Fatal(err)
	}
	t.Log(out.String())
	res := results{}
	if err := res.parse(&out); err != nil {
		t.Fatal(err)
	}

	cells := 0
	for _, kind := range hopKinds {
		for _, path := range hopPaths {
			for _, n := range tinyHops.callers {
				name := fmt.Sprintf("%s/%s/%s/c%d", hopBench, kind, path, n)
				if rate, err := res.Med(name, "calls/s"); err != nil || rate <= 0 {
					t.Errorf("%s: %v calls/s, %v", name, rate, err)
				}
				if p50, err := res.Med(name, "p50-µs"); err != nil || p50 <= 0 {
					t.Errorf("%s: p50 %v µs, %v", name, p50, err)
				}
				cells++
			}
		}
	}
	if cells != 36 {
		t.Errorf("%d cells, want 36", cells)
	}
	if e, err := res.Med(hopBench+"/all", "errors"); err != nil || e != 0 {
		t.Errorf("hop matrix: %v failed calls, %v", e, err)
	}
	for _, path := range []string{pathDirect, pathOrchd} {
		name := loadBench + "/" + path
		for unit, want := range map[string]float64{"completed": 20, "errors": 0, "lost": 0, "agent-runs": 20} {
			if got, err := res.Med(name, unit); err != nil || got != want {
				t.Errorf("%s: %v %s, want %v (%v)", name, got, unit, want, err)
			}
		}
		if reqs, err := res.Med(name, "agent-requests"); err != nil || reqs < 20 {
			t.Errorf("%s: the agent served %v A2A requests for 20 calls (%v)", name, reqs, err)
		}
		if wall, err := res.Med(name, "wall-ms"); err != nil || wall < 200 {
			t.Errorf("%s: wall %v ms, want at least the agent's 200 ms (%v)", name, wall, err)
		}
	}
	if rss, err := res.Med(loadBench+"/orchd", "peak-rss-MiB"); err != nil || rss < 5 {
		t.Errorf("orchd's peak RSS %v MiB (%v)", rss, err)
	}

	checkMCPRun(t, res)
	checkScaleRun(t, res)
	checkSteerRun(t, res)
	checkClusterRun(t, res)

	tmpl, err := template.New("report").Funcs(funcs).Parse(reportTemplate)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, map[string]any{"R": partial{res}, "Only": "Process", "Machine": "2 cores",
		"Commands": []string{"go run"}, "Date": "today", "Took": "1s"}); err != nil {
		t.Fatal(err)
	}
	_, secs := sections(buf.String())
	found := 0
	for _, s := range secs {
		if !strings.Contains(heading(s), "out of process") {
			continue
		}
		found++
		if incomplete(s) || strings.Contains(s, "<no value>") {
			t.Errorf("section %q lacks a figure:\n%s", heading(s), s)
		}
	}
	if found != 7 {
		t.Errorf("%d out-of-process sections rendered, want 7", found)
	}
	for _, phase := range []string{"unauthenticated-http", "unauthenticated-grpc", "authenticated-http"} {
		name := hostileBench + "/" + phase
		if n, err := res.Med(name, "refused"); err != nil || n != float64(tinyHostile.clients) {
			t.Errorf("%s: %v refused, %v; want every one of %d", name, n, err, tinyHostile.clients)
		}
	}
}

// checkMCPRun checks the results of the MCP run in its tiny form: every
// cell answered every call, and every steer acknowledged reached the
// agent.
func checkMCPRun(t *testing.T, res results) {
	t.Helper()
	cells := []string{
		fmt.Sprintf("delegate/%s/c%d", frontAPI, tinyMCP.callers), fmt.Sprintf("delegate/%s/c%d", frontMCP, tinyMCP.callers),
	}
	for _, front := range []string{frontAPI, frontMCP} {
		for _, state := range []string{"working", "completed"} {
			cells = append(cells, fmt.Sprintf("get/%s/%s/c%d", front, state, tinyMCP.pollers),
				fmt.Sprintf("get/%s/%s/paced%d", front, state, tinyMCP.pollers))
		}
	}
	for _, c := range cells {
		name := mcpBench + "/" + c
		if rate, err := res.Med(name, "calls/s"); err != nil || rate <= 0 {
			t.Errorf("%s: %v calls/s, %v", name, rate, err)
		}
		if cpu, err := res.Med(name, "orchd-cpu-µs/call"); err != nil || cpu < 0 {
			t.Errorf("%s: %v µs of orchd's CPU a call, %v", name, cpu, err)
		}
	}
	for _, way := range []string{frontAPI, steerMCPMethod, steerMCPTool} {
		name := mcpBench + "/steer/" + way
		if p50, err := res.Med(name, "p50-µs"); err != nil || p50 <= 0 {
			t.Errorf("%s: p50 %v µs, %v", name, p50, err)
		}
	}
	steers := float64(3 * tinyMCP.rounds * tinyMCP.steerTasks * steersPerTask)
	for unit, want := range map[string]float64{"steers-sent": steers, "steers-taken": steers} {
		if got, err := res.Med(mcpBench+"/agent", unit); err != nil || got != want {
			t.Errorf("MCP run: %v %s, want %v (%v)", got, unit, want, err)
		}
	}
	if e, err := res.Med(mcpBench+"/all", "errors"); err != nil || e != 0 {
		t.Errorf("MCP run: %v failed calls, %v", e, err)
	}
}

// testWriter writes log records to the test's log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// checkScaleRun checks the results of the scale run in its tiny form:
// every delegation completed with its whole log, directly, through orchd
// and across orchd's kill -9, and every steer was taken once, in order.
func checkScaleRun(t *testing.T, res results) {
	t.Helper()
	n := float64(tinyScale.delegations)
	for name, want := range map[string]map[string]float64{
		scaleBench + "/direct": {"completed": n, "lost": 0,
			"steers": float64(tinyScale.steered * tinyScale.steersEach), "steers-failed": 0, "steers-misdelivered": 0,
			"interrupts": float64(tinyScale.interrupts), "interrupts-failed": 0},
		scaleBench + "/orchd": {"completed": n, "lost": 0, "log-gaps": 0, "log-duplicates": 0,
			"steers": float64(tinyScale.steered * tinyScale.steersEach), "steers-failed": 0, "steers-misdelivered": 0,
			"interrupts": float64(tinyScale.interrupts), "interrupts-failed": 0, "error-lines": 0},
		scaleBench + "/" + scalePush: {"completed": n, "lost": 0, "log-gaps": 0, "log-duplicates": 0,
			"steers": float64(tinyScale.steered * tinyScale.steersEach), "steers-failed": 0, "steers-misdelivered": 0,
			"interrupts": float64(tinyScale.interrupts), "interrupts-failed": 0, "error-lines": 0},
		scaleBench + "/" + scalePoll: {"completed": n, "lost": 0, "log-gaps": 0, "log-duplicates": 0,
			"steers": float64(tinyScale.steered * tinyScale.steersEach), "steers-failed": 0, "steers-misdelivered": 0,
			"interrupts": float64(tinyScale.interrupts), "interrupts-failed": 0, "error-lines": 0},
		scaleBench + "/recovery": {"completed": n, "lost": 0, "log-gaps": 0, "log-duplicates": 0,
			"follower-gaps": 0, "follower-duplicates": 0, "followers-resumed": float64(tinyScale.followed)},
	} {
		for unit, v := range want {
			if got, err := res.Med(name, unit); err != nil || got != v {
				t.Errorf("%s: %v %s, want %v (%v)", name, got, unit, v, err)
			}
		}
	}
	for _, run := range []string{"orchd", scalePush, scalePoll} {
		for _, unit := range []string{"event-p99-ms", "peak-rss-MiB", "orchd-cpu-ms", "agent-events"} {
			if v, err := res.Med(scaleBench+"/"+run, unit); err != nil || v <= 0 {
				t.Errorf("%s: %v %s (%v)", run, v, unit, err)
			}
		}
	}
	if v, err := res.Med(scaleBench+"/recovery", "ready-ms"); err != nil || v <= 0 {
		t.Errorf("recovery: ready after %v ms (%v)", v, err)
	}
}

// checkSteerRun checks the results of the steering run in its tiny form:
// every signal on every path, idle and under load, was answered with its
// receipt and delivered once, in order; the load was held throughout and
// ended; and the agent took every signal answered.
func checkSteerRun(t *testing.T, res results) {
	t.Helper()
	want := map[string]float64{
		string(steering.Steer):     float64(tinySteer.steerTasks * tinySteer.steersEach),
		string(steering.Interrupt): float64(tinySteer.interruptTasks * tinySteer.interruptsEach),
	}
	total := 0.0
	for _, phase := range []string{phaseIdle, phaseLoad} {
		for sig, n := range want {
			for _, path := range steerPaths {
				name := fmt.Sprintf("%s/%s/%s/%s", steerBench, phase, sig, path)
				for unit, v := range map[string]float64{"signals": n, "failed": 0, "misdelivered": 0} {
					if got, err := res.Med(name, unit); err != nil || got != v {
						t.Errorf("%s: %v %s, want %v (%v)", name, got, unit, v, err)
					}
				}
				if p50, err := res.Med(name, "p50-ms"); err != nil || p50 <= 0 {
					t.Errorf("%s: p50 %v ms (%v)", name, p50, err)
				}
				total += n
			}
		}
	}
	for unit, v := range map[string]float64{"signals-sent": total, "signals-taken": total} {
		if got, err := res.Med(steerBench+"/agent", unit); err != nil || got != v {
			t.Errorf("steering run: %v %s, want %v (%v)", got, unit, v, err)
		}
	}
	load := float64(tinySteer.load)
	for unit, v := range map[string]float64{"delegations": load, "start-failed": 0, "working-after": load, "end-failed": 0} {
		if got, err := res.Med(steerBench+"/load", unit); err != nil || got != v {
			t.Errorf("steering run's load: %v %s, want %v (%v)", got, unit, v, err)
		}
	}
	for _, d := range []string{"orchd-a", "orchd-b"} {
		if got, err := res.Med(steerBench+"/logs/"+d, "error-lines"); err != nil || got != 0 {
			t.Errorf("steering run: %s logged %v ERROR lines (%v)", d, got, err)
		}
	}
}

// checkClusterRun checks the results of the cluster run in its tiny
// form: every one of the killed replica's delegations was seen followed
// by a survivor, and every delegation of every replica completed with
// its whole log, across a NATS node's crash too.
func checkClusterRun(t *testing.T, res results) {
	t.Helper()
	name := clusterBench + "/failover"
	n := float64(tinyCluster.perReplica)
	for unit, want := range map[string]float64{"killed": n, "followed": n, "completed": n * clusterReplicas, "lost": 0,
		"lost-of-killed": 0, "log-gaps": 0, "log-duplicates": 0, "followers-failed": 0, "follower-gaps": 0, "follower-duplicates": 0, "start-errors": 0,
		"followers": float64(tinyCluster.followed * clusterReplicas)} {
		if got, err := res.Med(name, unit); err != nil || got != want {
			t.Errorf("%s: %v %s, want %v (%v)", name, got, unit, want, err)
		}
	}
	// The survivors learn of the death from their own renewals going on
	// without the killed replica's: it takes a few of them.
	if v, err := res.Med(name, "failover-ms"); err != nil || v < ms(delegation.RenewEvery(tinyCluster.leaseTTL)) {
		t.Errorf("%s: failover after %v ms, a renewal every %s (%v)", name, v, delegation.RenewEvery(tinyCluster.leaseTTL), err)
	}
	first, _ := res.Med(name, "first-follow-ms")
	half, _ := res.Med(name, "follow-p50-ms")
	last, _ := res.Med(name, "failover-ms")
	if !(first > 0 && first <= half && half <= last) {
		t.Errorf("%s: followed first after %v ms, half after %v ms, all after %v ms", name, first, half, last)
	}
	// Every one of the killed replica's logs went on after the kill.
	if v, err := res.Med(name, "next-event-max-ms"); err != nil || v <= 0 {
		t.Errorf("%s: next event after the kill at most %v ms after it (%v)", name, v, err)
	}
	for _, unit := range []string{"orchd-cpu-ms-per-s", "nats-msgs-per-s", "window-ms"} {
		if v, err := res.Med(clusterBench+"/quiet", unit); err != nil || v <= 0 {
			t.Errorf("quiet window: %v %s (%v)", v, unit, err)
		}
	}
	// The NATS crash: the stream is led again after an election. The tiny
	// lease (3 s) is shorter than NATS's election timeout, so a replica
	// may lose its lease and take its work again: the logs above, read
	// after the crash, say nothing was lost for it.
	crash := clusterBench + "/natscrash"
	if v, err := res.Med(crash, "running"); err != nil || v != n*clusterReplicas {
		t.Errorf("%s: %v running, want %v (%v)", crash, v, n*clusterReplicas, err)
	}
	if v, err := res.Med(crash, "led-again-ms"); err != nil || v <= 0 {
		t.Errorf("%s: led again after %v ms (%v)", crash, v, err)
	}
	if v, err := res.Med(crash, "retaken"); err != nil || v < 0 || v > n*clusterReplicas {
		t.Errorf("%s: %v retaken (%v)", crash, v, err)
	}
	for _, unit := range []string{"warn-lines", "error-lines", "followers-resumed"} {
		if v, err := res.Med(crash, unit); err != nil || v < 0 {
			t.Errorf("%s: %v %s (%v)", crash, v, unit, err)
		}
	}
}
