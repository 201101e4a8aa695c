package orchestrator

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/store"
)

// The benchmarks of this file compare orchd on its embedded state store
// (JetStream on files in a temporary state directory, as `orchd serve`
// runs by default) with `store: memory`, in the same run:
//
//	go test ./orchestrator -run '^$' -bench StateHop -benchtime 500ms
//	go test ./orchestrator -run '^$' -bench StateRestart -benchtime 5x
//	go test ./orchestrator -run '^$' -bench StateInFlight -benchtime 1x
//	go test ./orchestrator -run '^$' -bench StateRSS -benchtime 1x

// noopTask is the cheapest a2a-go agent that answers with a task: it
// creates one and completes it at once.
type noopTask struct{}

func (noopTask) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("pong"))), nil)
		}
	}
}

func (noopTask) Cancel(context.Context, *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(func(a2a.Event, error) bool) {}
}

// withStore makes cfg keep its state as mode says: in memory, or on the
// embedded store in a new temporary state directory.
func withStore(b *testing.B, cfg *Config, mode string) {
	b.Helper()
	switch mode {
	case StoreMemory:
		cfg.Store.Mode = StoreMemory
	case StoreEmbedded:
		cfg.StateDir = b.TempDir()
	default:
		b.Fatalf("no benchmark for store %q", mode)
	}
}

// stateHopRounds is how many times BenchmarkStateHop measures each store,
// alternating them.
const stateHopRounds = 3

// BenchmarkStateHop is BenchmarkHop's orchd path on each store: a no-op
// agent answering with a message (the delegation's record is written as
// it starts and as it ends, with its events), and one streaming a task it
// completes at once (orchd's own A2A task is kept in the store too; a
// streaming agent, so no poll interval is measured). Before the daemons
// are measured, each store is given 10,000 ended delegations, as in
// BenchmarkHop, written straight into it (fillDaemon). Both daemons run
// side by side and are measured in turn, stateHopRounds times each, the
// store measured first alternating from one round to the next, so a
// machine busy with other work for a while slows both: go test names the
// repeated sub-benchmarks name#01, name#02.
func BenchmarkStateHop(b *testing.B) {
	for _, answer := range []struct {
		name      string
		exec      a2asrv.AgentExecutor
		streaming bool
	}{{"message", noop{}, false}, {"task", noopTask{}, true}} {
		agent := benchAgentOf(b, answer.exec, answer.streaming)
		modes := []string{StoreMemory, StoreEmbedded}
		clients := map[string]*a2aclient.Client{}
		var stops []func()
		for _, mode := range modes {
			cfg := benchConfig(b)
			withStore(b, &cfg, mode)
			cfg.Agents = []registry.Spec{{ID: "noop", URL: agent.URL}}
			d, base, stop := runBenchDaemon(b, cfg)
			clients[mode] = benchClient(b, base, nil)
			fillDaemon(b, d, clients[mode])
			stops = append(stops, stop)
		}
		for round := range stateHopRounds {
			for i := range modes {
				mode := modes[(i+round)%len(modes)]
				runtime.GC()
				hopRuns(b, answer.name+"/"+mode, clients[mode])
			}
		}
		for _, stop := range stops {
			stop()
		}
	}
}

// fillDaemon gives d's delegation store as many ended delegations as a
// memory store keeps, copies of one run through c, written straight into
// the store with their events (faster than running them all), then warms
// the path up with a few hundred more calls through c.
func fillDaemon(b *testing.B, d *Daemon, c *a2aclient.Client) {
	b.Helper()
	ctx := b.Context()
	if err := send(ctx, c); err != nil {
		b.Fatal(err)
	}
	page, err := d.state.deleg.List(ctx, delegation.Query{PageSize: 1})
	if err != nil || len(page.Records) != 1 {
		b.Fatalf("list the first delegation: %d, %v", len(page.Records), err)
	}
	model := page.Records[0]
	evs, err := d.state.deleg.Events(ctx, model.ID, 0, 0)
	if err != nil || len(evs) == 0 {
		b.Fatalf("events of the first delegation: %d, %v", len(evs), err)
	}
	const n = delegation.DefaultMemoryRecords
	at := time.Now().Add(-time.Hour).UTC()
	parallelN(b, fillWorkers, n, func(i int) error {
		r := model
		r.ID = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		r.CreatedAt = at.Add(time.Duration(i) * time.Millisecond)
		return putEnded(ctx, d.state.deleg, r, evs)
	})
	parallelN(b, 16, 500, func(int) error { return send(ctx, c) })
	kept, q := 0, delegation.Query{PageSize: delegation.MaxPageSize}
	for {
		page, err := d.state.deleg.List(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		kept += len(page.Records)
		if q.PageToken = page.NextPageToken; q.PageToken == "" {
			break
		}
	}
	if kept < n {
		b.Fatalf("the store holds %d delegations, want at least %d", kept, n)
	}
}

// putEnded writes an ended delegation and its events into s: in one
// round trip where s keeps ended delegations so (delegation.EndedStore),
// as a daemon keeps one that ended as it started, else the record, then
// its events one by one.
func putEnded(ctx context.Context, s delegation.Store, r delegation.Record, evs []delegation.Event) error {
	if es, ok := s.(delegation.EndedStore); ok {
		return es.PutEnded(ctx, r, evs)
	}
	if err := s.Put(ctx, r); err != nil {
		return err
	}
	for _, ev := range evs {
		if err := s.Append(ctx, r.ID, ev); err != nil {
			return err
		}
	}
	return nil
}

// parallelN runs fn(0) to fn(n-1) on the given number of workers and
// fails the benchmark with the first error.
func parallelN(b *testing.B, workers, n int, fn func(i int) error) {
	b.Helper()
	var next atomic.Int64
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// BenchmarkStateRestart measures how long a daemon takes from New until
// /readyz answers 200, on a state directory whose embedded store holds
// 10,000 ended delegations with their events; then the same with 100
// delegations running too, which it carries on before it is ready (half
// to a streaming agent, half to one it polls; both real a2a-go agents
// whose work waits until the benchmark ends). Each iteration starts a
// new daemon on the directory the last one stopped on.
func BenchmarkStateRestart(b *testing.B) {
	for _, tc := range []struct {
		name    string
		running int
	}{{"ended-10000", 0}, {"ended-10000+running-100", 100}} {
		b.Run(tc.name, func(b *testing.B) {
			dir := b.TempDir()
			fillEnded(b, dir, 10_000)
			ids := startRunning(b, dir, tc.running)
			var took []time.Duration
			for b.Loop() {
				start := time.Now()
				d, stop := startUntilReady(b, benchStateConfig(b, dir))
				took = append(took, time.Since(start))
				for _, id := range ids {
					live, ok := d.Delegations().Get(id)
					if !ok {
						b.Fatalf("delegation %s was not carried on", id)
					}
					if s := live.Record().State; s.Terminal() {
						b.Fatalf("delegation %s is %s after the restart, want running", id, s)
					}
				}
				stop()
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
		})
	}
}

// benchStateConfig is benchConfig on the embedded store in dir.
func benchStateConfig(b *testing.B, dir string) Config {
	cfg := benchConfig(b)
	cfg.StateDir = dir
	return cfg
}

// startUntilReady builds a daemon from cfg and runs it until /readyz
// answers 200, failing the benchmark after 30 seconds. It returns the
// daemon and how to stop it; it stops when the benchmark ends otherwise.
// It polls every millisecond itself, not with testwait: how long it
// waits is what BenchmarkStateRestart measures.
func startUntilReady(b *testing.B, cfg Config) (*Daemon, func()) {
	b.Helper()
	d, err := New(cfg, slog.New(slog.DiscardHandler))
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
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if addr := d.Addr(); addr != nil {
			resp, err := hc.Get("http://" + addr.String() + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return d, stop
				}
			}
		}
		select {
		case err := <-done:
			b.Fatalf("the daemon stopped before it was ready: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			b.Fatal("the daemon was not ready in 30s")
		}
		time.Sleep(time.Millisecond)
	}
}

// startRunning leaves n delegations running in the store in dir: a
// daemon on it delegates them, half to a streaming agent and half to one
// it polls, and stops once every one is WORKING. The agents' work waits
// until the benchmark ends, so every daemon started later carries them on.
// It returns their ids.
func startRunning(b *testing.B, dir string, n int) []string {
	b.Helper()
	if n == 0 {
		return nil
	}
	release := make(chan struct{})
	streamed := testagent.Start(b, testagent.Options{Name: "Worker", Skill: "work", Streaming: true}, gatedWork(release))
	polled := testagent.Start(b, testagent.Options{Name: "Poller", Skill: "batch"}, gatedWork(release))
	b.Cleanup(func() { close(release) }) // the work completes before the agents stop
	cfg := benchStateConfig(b, dir)
	d, base, stop := runBenchDaemon(b, cfg)
	for _, a := range []*testagent.Agent{streamed, polled} {
		if code := call(b, "POST", base+"/v1/agents", `{"url":"`+a.URL+`"}`, nil); code != http.StatusCreated {
			b.Fatalf("add agent %s = %d", a.URL, code)
		}
	}
	ids := make([]string, n)
	for i := range ids {
		req := delegation.Request{Text: "go", Skill: []string{"work", "batch"}[i%2]}
		del, err := d.Delegations().Delegate(b.Context(), req)
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = del.ID()
	}
	for _, id := range ids {
		testwait.Succeeds(b, 30*time.Second, "delegation "+id+" working", func() error {
			live, ok := d.Delegations().Get(id)
			if !ok {
				b.Fatalf("delegation %s is gone", id)
			}
			switch s := live.Record().State; {
			case s.Terminal():
				b.Fatalf("delegation %s is %s, want WORKING", id, s)
			case s != a2a.TaskStateWorking:
				return fmt.Errorf("it is %s", s)
			}
			return nil
		})
	}
	stop()
	return ids
}

// endedDelegation runs one delegation to a real a2a-go agent that
// streams its work on a task: progress, an artifact in two chunks, and
// the task completed; it returns the record and events the store was given,
// the model of every delegation fillEnded writes.
func endedDelegation(b *testing.B) (delegation.Record, []delegation.Event) {
	b.Helper()
	agent := testagent.Start(b, testagent.Options{Name: "Worker", Skill: "work", Streaming: true}, testagent.Work(0))
	cfg := benchConfig(b)
	cfg.Store.Mode = StoreMemory
	cfg.Agents = []registry.Spec{{ID: "worker", URL: agent.URL}}
	d, _, stop := runBenchDaemon(b, cfg)
	defer stop()
	del, err := d.Delegations().Delegate(b.Context(), delegation.Request{Text: "summarize this", Skill: "work"})
	if err != nil {
		b.Fatal(err)
	}
	var rec delegation.Record
	testwait.Succeeds(b, 30*time.Second, "the model delegation completed", func() error {
		var err error
		if rec, err = d.state.deleg.Get(b.Context(), del.ID()); err != nil {
			b.Fatal(err)
		}
		switch {
		case rec.State == a2a.TaskStateCompleted:
			return nil
		case rec.State.Terminal():
			b.Fatalf("the model delegation is %s (%s), want COMPLETED", rec.State, rec.Error)
		}
		return fmt.Errorf("it is %s", rec.State)
	})
	evs, err := d.state.deleg.Events(b.Context(), del.ID(), 0, 0)
	if err != nil || len(evs) == 0 {
		b.Fatalf("events of the model delegation: %d, %v", len(evs), err)
	}
	return rec, evs
}

// fillWorkers bounds the concurrent writes of fillEnded.
const fillWorkers = 32

// filled is what fillEnded wrote.
type filled struct {
	// took is how long the writes took; done is when they ended.
	took time.Duration
	done time.Time
	// events is how many events each delegation has.
	events int
	// dedupe is the duplicate window of the event stream, the one stream
	// written with message ids: the embedded server keeps the ids written
	// in the last window in memory, and reads them all back when it
	// starts. (The other streams keep their default window, but with no
	// ids written there is nothing in it.)
	dedupe time.Duration
}

// fillEnded writes n ended delegations, each a copy of endedDelegation's
// with its own id and creation time, with its events, into the embedded
// store in dir, directly through the store (putEnded), and closes the
// store.
func fillEnded(b *testing.B, dir string, n int) filled {
	b.Helper()
	model, evs := endedDelegation(b)
	ctx := context.Background()
	s, err := store.Open(ctx, dir, store.Config{}, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := s.Close(); err != nil {
			b.Errorf("close the store: %v", err)
		}
	}()
	// The directory is an orchd's, as a daemon would have left it: its
	// identity in the directory and in the store, without which orchd
	// refuses a store that holds state.
	self, err := loadIdentity(dir)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.Identity(ctx, self); err != nil {
		b.Fatal(err)
	}
	ds, err := s.Delegations(ctx, store.DelegationsConfig{})
	if err != nil {
		b.Fatal(err)
	}
	f := filled{events: len(evs)}
	for name := range s.JetStream().StreamNames(ctx).Name() {
		st, err := s.JetStream().Stream(ctx, name)
		if err != nil {
			b.Fatal(err)
		}
		if strings.HasSuffix(name, "_EVENTS") {
			f.dedupe = st.CachedInfo().Config.Duplicates
		}
	}
	if f.dedupe == 0 {
		b.Fatal("the store has no event stream with a duplicate window")
	}
	start := time.Now()
	at := start.Add(-time.Hour).UTC()
	parallelN(b, fillWorkers, n, func(i int) error {
		r := model
		r.ID = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		r.CreatedAt = at.Add(time.Duration(i) * time.Millisecond)
		r.UpdatedAt = r.CreatedAt.Add(20 * time.Millisecond)
		return putEnded(ctx, ds, r, evs)
	})
	f.done = time.Now()
	f.took = f.done.Sub(start)
	b.Logf("wrote %d ended delegations of %d events each in %s", n, len(evs), f.took.Round(time.Millisecond))
	return f
}

// inUse is the memory the Go runtime holds for live objects and goroutine
// stacks, after a collection.
func inUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

// BenchmarkStateInFlight measures a daemon's memory per in-flight
// delegation, as BenchmarkInFlight in package delegation does for the
// engine alone: 10,000 tasks that never finish, delegated at once to an
// agent in a separate process that does not stream (orchd polls it, once
// a minute here, so no poll runs while it is measured), on each store.
// On the embedded store the NATS server runs in the daemon's process, so
// what it holds for the running records counts too.
func BenchmarkStateInFlight(b *testing.B) {
	const n = 10_000
	for _, mode := range []string{StoreMemory, StoreEmbedded} {
		b.Run(mode+"/polled-10000", func(b *testing.B) {
			for b.Loop() {
				cfg := benchConfig(b)
				withStore(b, &cfg, mode)
				cfg.Delegation.PollInterval = Duration(time.Minute)
				cfg.Agents = []registry.Spec{{ID: "slow", URL: childAgent(b)}}
				d, _, stop := runBenchDaemon(b, cfg)
				before := inUse()
				goroutines := runtime.NumGoroutine()
				ds := make([]*delegation.Delegation, n)
				parallelN(b, 64, n, func(i int) (err error) {
					ds[i], err = d.Delegations().Delegate(context.Background(), delegation.Request{Text: "wait", Skill: "slow"})
					return err
				})
				per := float64(inUse()-before) / n
				for _, del := range ds {
					if s := del.Record().State; s.Terminal() {
						b.Fatalf("delegation %s is %s, want in flight", del.ID(), s)
					}
				}
				b.ReportMetric(per, "B/delegation")
				b.ReportMetric(per/1024, "KiB/delegation")
				b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/n, "goroutines/delegation")
				stop()
			}
		})
	}
}

// slowAgentProcess is the body of the processes childAgent starts: it
// serves an a2a-go agent that does not stream and whose tasks never
// finish (testagent.Hang), prints its URL and exits when its standard
// input closes.
func slowAgentProcess([]string) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return helperFailed(err)
	}
	url := "http://" + ln.Addr().String()
	go func() { _ = http.Serve(ln, agentHandler(url, "Slow", "slow", behaviourExec{testagent.Hang()})) }()
	fmt.Println(url)
	untilStdinCloses()
	return 0
}

// childAgent runs slowAgentProcess's agent in a process of its own until
// the benchmark ends and returns its URL.
func childAgent(b *testing.B) string {
	b.Helper()
	return strings.TrimSpace(startChild(b, helpers.Command(b, "slow-agent")))
}

// startChild starts cmd, which prints one line when it is ready, and
// returns the line; the child's stdin closes, and the child must exit
// cleanly, when the benchmark ends. It fails the benchmark when the
// child prints nothing in 5 minutes.
func startChild(b *testing.B, cmd *exec.Cmd) string {
	b.Helper()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			b.Errorf("child process: %v", err)
		}
	})
	lines := make(chan string, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err != nil {
			line = ""
		}
		lines <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case line := <-lines:
		if line == "" {
			b.Fatal("the child process ended without a word")
		}
		return line
	case <-time.After(5 * time.Minute):
		_ = cmd.Process.Kill()
		b.Fatal("the child process said nothing in 5 minutes")
		return ""
	}
}

// BenchmarkStateRSS measures a daemon's memory on the embedded store
// holding 100,000 ended delegations with their events, against one on an
// empty store, in the same run. The daemon runs in a process of its own
// (stateRSSProcess), started on the filled state directory; it lists a
// page through the API and reports its resident set (VmRSS), its peak
// (VmHWM), the Go heap in use after a collection, and how long it took
// to be ready. The store is filled directly through store.Delegations
// first, in this process, then measured twice: at once, when the events
// of the last duplicate window are still in it (the server reads their
// message ids back into memory as it starts: a restart right after
// 100,000 delegations ended), and again once the window has passed (the
// benchmark waits for it).
func BenchmarkStateRSS(b *testing.B) {
	b.Run("empty", func(b *testing.B) {
		for b.Loop() {
			measureRSS(b, b.TempDir(), 0)
		}
	})
	const n = 100_000
	dir := b.TempDir()
	f := fillEnded(b, dir, n)
	b.Run("ended-100000-fresh", func(b *testing.B) {
		for b.Loop() {
			measureRSS(b, dir, n)
		}
		b.ReportMetric(f.took.Seconds(), "fill-s")
		b.ReportMetric(float64(f.events), "events/delegation")
	})
	time.Sleep(time.Until(f.done.Add(f.dedupe + time.Second))) // the condition is the clock
	b.Run("ended-100000", func(b *testing.B) {
		for b.Loop() {
			measureRSS(b, dir, n)
		}
	})
}

// measureRSS runs stateRSSProcess on dir, which holds n delegations,
// and reports what it measured.
func measureRSS(b *testing.B, dir string, n int) {
	b.Helper()
	var m rssReport
	if err := json.Unmarshal([]byte(startChild(b, helpers.Command(b, "state-rss", dir))), &m); err != nil {
		b.Fatal(err)
	}
	if want := min(n, delegation.DefaultPageSize); m.Listed != want {
		b.Fatalf("the first page listed %d delegations, want %d", m.Listed, want)
	}
	const mib = 1 << 20
	b.ReportMetric(float64(m.RSS)/mib, "rss-MiB")
	b.ReportMetric(float64(m.HWM)/mib, "hwm-MiB")
	b.ReportMetric(float64(m.HeapInuse)/mib, "heap-MiB")
	b.ReportMetric(m.ReadyMS, "ready-ms")
	b.ReportMetric(m.PageMS, "page-ms")
}

// rssReport is what stateRSSProcess prints, as one JSON line.
type rssReport struct {
	// RSS and HWM are VmRSS and VmHWM, in bytes.
	RSS, HWM uint64
	// HeapInuse is the Go heap's in-use spans after a collection.
	HeapInuse uint64
	// ReadyMS is the time from New to /readyz answering 200; PageMS that
	// of GET /v1/delegations.
	ReadyMS, PageMS float64
	// Listed is how many delegations the page held.
	Listed int
}

// stateRSSProcess is the body of the processes BenchmarkStateRSS
// starts. It runs a daemon on the state directory args[0], lists the
// first page of delegations through the API, prints an rssReport and
// exits. Its wait for /readyz is its own loop, not testwait's: there is
// no test in this process to fail, and ReadyMS is measured to the
// millisecond.
func stateRSSProcess(args []string) int {
	if len(args) != 1 {
		return helperFailed(fmt.Errorf("state-rss: want a state directory, got %q", args))
	}
	cfg, err := LoadConfig("")
	if err != nil {
		return helperFailed(err)
	}
	cfg.Listen, cfg.StateDir = "127.0.0.1:0", args[0]
	start := time.Now()
	d, err := New(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return helperFailed(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	rep, err := measureDaemon(d, start)
	cancel()
	if err != nil {
		return helperFailed(err)
	}
	if err := <-done; err != nil {
		return helperFailed(err)
	}
	line, _ := json.Marshal(rep)
	fmt.Println(string(line))
	return 0
}

// measureDaemon waits until d, created at start, is ready, lists the
// first page of delegations and reports the times and memory that took.
func measureDaemon(d *Daemon, start time.Time) (rssReport, error) {
	hc := &http.Client{Timeout: 30 * time.Second}
	var rep rssReport
	for deadline := time.Now().Add(time.Minute); ; {
		if addr := d.Addr(); addr != nil {
			if resp, err := hc.Get("http://" + addr.String() + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			return rep, fmt.Errorf("not ready in a minute")
		}
		time.Sleep(time.Millisecond)
	}
	rep.ReadyMS = float64(time.Since(start).Microseconds()) / 1000
	start = time.Now()
	resp, err := hc.Get("http://" + d.Addr().String() + "/v1/delegations")
	if err != nil {
		return rep, err
	}
	var page httpapi.DelegationList
	err = json.NewDecoder(resp.Body).Decode(&page)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		return rep, fmt.Errorf("list delegations: %d, %v", resp.StatusCode, err)
	}
	rep.PageMS = float64(time.Since(start).Microseconds()) / 1000
	rep.Listed = len(page.Delegations)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.HeapInuse = ms.HeapInuse
	rep.RSS, rep.HWM, err = procMemory()
	return rep, err
}

// procMemory reads this process's VmRSS and VmHWM, in bytes, from
// /proc/self/status.
func procMemory() (rss, hwm uint64, err error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, 0, fmt.Errorf("read process status: %w", err)
	}
	for l := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || f[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("process status %q: %w", l, err)
		}
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			hwm = kb << 10
		}
	}
	if rss == 0 || hwm == 0 {
		return 0, 0, fmt.Errorf("no VmRSS or VmHWM in /proc/self/status")
	}
	return rss, hwm, nil
}
