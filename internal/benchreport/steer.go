package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2aext"

	"github.com/orchd/orchd/steering"
)

// steerConfig sizes the steering run.
type steerConfig struct {
	steerTasks int // tasks steered in each phase on each path
	steersEach int // steers each of them takes, one after the other
	// interruptTasks is how many tasks are interrupted in each phase on
	// each path, interruptsEach times each, every interrupt answered
	// before the next.
	interruptTasks, interruptsEach int
	load                           int // long delegations orchd A holds through B in the load phase
	callers                        int // concurrent callers starting and ending the load
}

// fullSteer is the steering run of the report: 300 steers and 50
// interrupts a phase and path, the load phase under 2,000 delegations
// held through the chain.
var fullSteer = steerConfig{steerTasks: 30, steersEach: 10, interruptTasks: 5, interruptsEach: 10, load: 2_000, callers: 32}

// steerBench names the steering run's results.
const steerBench = "BenchmarkProcessSteer"

// The steering run's phases.
const (
	phaseIdle = "idle" // nothing else runs
	phaseLoad = "load" // while orchd A holds steerConfig.load delegations through B
)

// steerPaths are the ways the steering run's signals go, in the order it
// reports them: straight to the agent, and through orchd A and B.
var steerPaths = []string{pathDirect, pathOrchdOrchd}

// runSteer is the report's steering run.
func runSteer(ctx context.Context, w io.Writer, log *slog.Logger) error {
	return steerRun(ctx, w, log, fullSteer)
}

// steerRun measures steering across a chain as users run it: orchd A
// (`orchd serve`, the embedded store) registers orchd B as its agent, B
// (the same, its own store) registers the steerable a2a-go agent
// (steerableHandler), each a process of its own. It sends signals to
// WORKING tasks of the agent through A's HTTP API (POST
// /v1/delegations/{id}:steer and :interrupt, path orchd-orchd), and the
// same signals straight to the agent with an a2a-go client activating the
// steering extension (path direct), the paths taking turns task by task.
// It writes a line saying how the run was sized, then one result line per
// phase, signal and path:
//
//	BenchmarkProcessSteer/config 1 <n> load-delegations <n> steer-tasks <n> steers-each <n> interrupt-tasks <n> interrupts-each
//	BenchmarkProcessSteer/<idle|load>/<steer|interrupt>/<direct|orchd-orchd> 1 <ms> p50-ms <ms> p99-ms <n> signals <n> failed <n> misdelivered
//	BenchmarkProcessSteer/load 1 <n> delegations <n> start-failed <ms> start-wall-ms <n> working-after <n> end-failed <MiB> orchd-a-rss-MiB <MiB> orchd-b-rss-MiB <MiB> agent-rss-MiB
//	BenchmarkProcessSteer/agent 1 <n> signals-sent <n> signals-taken
//	BenchmarkProcessSteer/logs/<orchd-a|orchd-b> 1 <n> warn-lines <n> error-lines
//
// A steer's latency is from sending it to its receipt, which comes back
// once the agent's executor has it queued (and, through the chain, A and
// B stored it); each task takes cfg.steersEach steers and is then
// canceled. An interrupt's is from sending it to its answer, which comes
// back once the task settled INPUT_REQUIRED at every hop; then, untimed,
// the task is read (it must be INPUT_REQUIRED) and answered, and works
// again before the next. Every receipt is checked: one hop directly,
// three through the chain (A, B, the agent), a steer numbered n at each.
// failed counts signals not answered with such a receipt; misdelivered,
// for steers, those the agent did not take once each in the order sent
// (it keeps them per task, steerLog), for interrupts, those after which
// the task was not INPUT_REQUIRED. The idle phase runs with nothing else;
// the load phase while A holds cfg.load more delegations to the agent
// through B, each WORKING (the load line: how long starting them took,
// how many still worked after the phase, how many could not be canceled
// at its end, and the resident memory of A, B and the agent holding
// them). signals-taken is what the agent counted, against the signals
// answered.
func steerRun(ctx context.Context, w io.Writer, log *slog.Logger, cfg steerConfig) error {
	h, err := newHarness(ctx, log)
	if err != nil {
		return err
	}
	defer h.close()
	agentProc, steerable, err := h.role(ctx, "steerable")
	if err != nil {
		return err
	}
	agentURL := steerable[0]
	b, bBase, err := h.daemon(ctx, orchdSpec{name: "orchd-b", skills: []string{kindSteer}, agents: [][2]string{{kindSteer, agentURL}}})
	if err != nil {
		return err
	}
	a, aBase, err := h.daemon(ctx, orchdSpec{name: "orchd-a", agents: [][2]string{{"b", bBase}}})
	if err != nil {
		return err
	}
	direct, closeDirect, err := directSignals(ctx, agentURL)
	if err != nil {
		return err
	}
	defer closeDirect()
	apiTransport := hopTransport()
	defer apiTransport.CloseIdleConnections()
	chain := &fronts{base: aBase, api: &http.Client{Transport: apiTransport}}
	paths := map[string]signalPath{pathDirect: direct, pathOrchdOrchd: chainSignals(chain)}

	fmt.Fprintf(w, "%s/config\t1\t%d load-delegations\t%d steer-tasks\t%d steers-each\t%d interrupt-tasks\t%d interrupts-each\n",
		steerBench, cfg.load, cfg.steerTasks, cfg.steersEach, cfg.interruptTasks, cfg.interruptsEach)
	var sent int
	idle, err := steerPhase(ctx, cfg, paths)
	if err != nil {
		return fmt.Errorf("idle phase: %w", err)
	}

	ids := make([]string, cfg.load)
	startLoad := chain.apiSteerer().start
	start := startAll(ctx, scaleConfig{delegations: cfg.load, callers: cfg.callers}, func(ctx context.Context, i int) error {
		id, err := startLoad(ctx)
		ids[i] = id
		return err
	})
	if start.errs > 0 {
		log.Warn("steering run: load delegations failed to start", "failed", start.errs, "first", start.first)
	}
	log.Info("steering run: load held", "delegations", len(start.lat), "took", start.wall.Round(time.Millisecond))
	loaded, err := steerPhase(ctx, cfg, paths)
	if err != nil {
		return fmt.Errorf("load phase: %w", err)
	}
	var rss [3]procStatus
	for i, p := range []*proc{a, b, agentProc} {
		if rss[i], err = readStatus(p.pid()); err != nil {
			return err
		}
	}
	working, ended := endLoad(ctx, cfg, chain, ids)
	if ended.errs > 0 {
		log.Warn("steering run: load delegations not canceled", "failed", ended.errs, "first", ended.first)
	}

	var taken map[string][]int
	if err := getJSON(ctx, agentURL+steersPath, &taken); err != nil {
		return err
	}
	for _, ph := range []struct {
		name string
		rs   map[string]*phaseResult
	}{{phaseIdle, idle}, {phaseLoad, loaded}} {
		for _, path := range steerPaths {
			r := ph.rs[path]
			n, bad := misdelivered(r.steered, taken, cfg.steersEach)
			r.steers.misdelivered += n
			for _, k := range bad {
				log.Warn("steering run: steers not taken once each in order", "phase", ph.name, "path", path, "task", k, "taken", taken[k])
			}
			for _, s := range []struct {
				c steering.Control
				r *signalTally
			}{{steering.Steer, &r.steers}, {steering.Interrupt, &r.interrupts}} {
				slices.Sort(s.r.lat)
				sent += len(s.r.lat)
				if s.r.failed > 0 || s.r.misdelivered > 0 {
					log.Warn("steering run: signals failed", "phase", ph.name, "signal", s.c, "path", path,
						"failed", s.r.failed, "misdelivered", s.r.misdelivered, "first", s.r.first)
				}
				fmt.Fprintf(w, "%s/%s/%s/%s\t1\t%.2f p50-ms\t%.2f p99-ms\t%d signals\t%d failed\t%d misdelivered\n",
					steerBench, ph.name, s.c, path, ms(pctOf(s.r.lat, 50)), ms(pctOf(s.r.lat, 99)),
					len(s.r.lat)+s.r.failed, s.r.failed, s.r.misdelivered)
			}
		}
	}
	fmt.Fprintf(w, "%s/load\t1\t%d delegations\t%d start-failed\t%.0f start-wall-ms\t%d working-after\t%d end-failed\t%.1f orchd-a-rss-MiB\t%.1f orchd-b-rss-MiB\t%.1f agent-rss-MiB\n",
		steerBench, cfg.load, start.errs, ms(start.wall), working, ended.errs, mib(rss[0].rssKiB), mib(rss[1].rssKiB), mib(rss[2].rssKiB))
	var st agentStats
	if err := getJSON(ctx, agentURL+statsPath, &st); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s/agent\t1\t%d signals-sent\t%d signals-taken\n", steerBench, sent, st.Signals)
	for _, d := range []struct {
		name string
		p    *proc
	}{{"orchd-a", a}, {"orchd-b", b}} {
		warns, errs, first := d.p.logCounts()
		fmt.Fprintf(w, "%s/logs/%s\t1\t%d warn-lines\t%d error-lines\n", steerBench, d.name, warns, errs)
		for _, l := range first {
			log.Warn("orchd logged", "daemon", d.name, "line", l)
		}
	}
	return nil
}

// signalPath is one way of signalling the steerable agent's tasks.
type signalPath struct {
	// start starts a task and returns its id once it is WORKING.
	start func(context.Context) (string, error)
	// signal sends task id the n-th signal of its kind with text and
	// checks the receipt.
	signal func(ctx context.Context, id string, c steering.Control, n int, text string) error
	// state reads the task's state.
	state func(context.Context, string) (a2a.TaskState, error)
	// resume answers an interrupted task and returns once it works again.
	resume func(context.Context, string) error
	cancel func(context.Context, string) error
}

// chainHops is how many hops accept a signal sent through the chain:
// orchd A, orchd B and the agent.
const chainHops = 3

// chainSignals signals delegations through the API of the orchd f
// fronts, delegating to the steerable agent's skill.
func chainSignals(f *fronts) signalPath {
	s := f.apiSteerer()
	state := func(ctx context.Context, id string) (a2a.TaskState, error) {
		var rec apiRecord
		err := f.apiDo(ctx, "GET", "/v1/delegations/"+id, "", http.StatusOK, &rec)
		return rec.State, err
	}
	return signalPath{start: s.start, cancel: s.cancel, state: state,
		signal: func(ctx context.Context, id string, c steering.Control, n int, text string) error {
			var r receiptAnswer
			if err := f.apiDo(ctx, "POST", "/v1/delegations/"+id+":"+string(c), fmt.Sprintf(`{"text": %q}`, text), http.StatusOK, &r); err != nil {
				return err
			}
			return r.checkHops(receiptSeq(c, n), chainHops)
		},
		resume: func(ctx context.Context, id string) error {
			if err := f.apiDo(ctx, "POST", "/v1/delegations/"+id+"/messages", `{"text": "go on"}`, http.StatusOK, nil); err != nil {
				return err
			}
			return waitState(ctx, state, id, a2a.TaskStateWorking)
		},
	}
}

// receiptSeq is the number a signal's receipt must give it at every hop:
// a steer's n, as each task's steers are its only signals; any for an
// interrupt (0).
func receiptSeq(c steering.Control, n int) int {
	if c == steering.Steer {
		return n
	}
	return 0
}

// waitState reads task id until it is in state want, for at most
// callTimeout.
func waitState(ctx context.Context, state func(context.Context, string) (a2a.TaskState, error), id string, want a2a.TaskState) error {
	return waitUntil(ctx, func(ctx context.Context) (string, error) {
		s, err := state(ctx, id)
		return string(s), err
	}, string(want), "task "+id)
}

// directSignals signals the steerable agent's tasks at url straight,
// with an a2a-go client that activates the steering extension, as
// BenchmarkSteerChain's direct runs do. It returns how to close the
// client's idle connections.
func directSignals(ctx context.Context, url string) (signalPath, func(), error) {
	t := hopTransport()
	hc := &http.Client{Transport: t}
	card, err := agentcard.NewResolver(hc).Resolve(ctx, url)
	if err != nil {
		return signalPath{}, nil, fmt.Errorf("the steerable agent's card: %w", err)
	}
	c, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithJSONRPCTransport(hc),
		a2aclient.WithCallInterceptors(a2aext.NewActivator(steering.URI)))
	if err != nil {
		return signalPath{}, nil, fmt.Errorf("client of the steerable agent: %w", err)
	}
	state := func(ctx context.Context, id string) (a2a.TaskState, error) {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		tk, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: a2a.TaskID(id)})
		if err != nil {
			return "", err
		}
		return tk.Status.State, nil
	}
	send := func(ctx context.Context, m *a2a.Message, immediately bool) (a2a.SendMessageResult, error) {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		req := &a2a.SendMessageRequest{Message: m}
		if immediately {
			req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
		}
		return c.SendMessage(ctx, req)
	}
	return signalPath{state: state,
		start: func(ctx context.Context) (string, error) {
			res, err := send(ctx, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("work")), true)
			if err != nil {
				return "", err
			}
			tk, ok := res.(*a2a.Task)
			if !ok {
				return "", fmt.Errorf("the agent answered with a %T, want a Task", res)
			}
			return string(tk.ID), waitState(ctx, state, string(tk.ID), a2a.TaskStateWorking)
		},
		signal: func(ctx context.Context, id string, ctl steering.Control, n int, text string) error {
			m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
			m.TaskID = a2a.TaskID(id)
			m.Metadata = map[string]any{steering.ControlKey: string(ctl)}
			res, err := send(ctx, m, false)
			if err != nil {
				return err
			}
			tk, ok := res.(*a2a.Task)
			if !ok {
				return fmt.Errorf("%s answered with a %T, want the acknowledgement Task", ctl, res)
			}
			rc, ok := steering.ReceiptFrom(tk)
			if !ok {
				return fmt.Errorf("%s answered without a receipt", ctl)
			}
			r := receiptAnswer{Duplicate: rc.Duplicate}
			for _, hop := range rc.Hops {
				r.Hops = append(r.Hops, receiptHop{hop.Agent, hop.Seq})
			}
			return r.checkHops(receiptSeq(ctl, n), 1)
		},
		resume: func(ctx context.Context, id string) error {
			m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go on"))
			m.TaskID = a2a.TaskID(id)
			if _, err := send(ctx, m, true); err != nil {
				return err
			}
			return waitState(ctx, state, id, a2a.TaskStateWorking)
		},
		cancel: func(ctx context.Context, id string) error {
			ctx, cancel := context.WithTimeout(ctx, callTimeout)
			defer cancel()
			_, err := c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: a2a.TaskID(id)})
			return err
		},
	}, t.CloseIdleConnections, nil
}

// signalTally is what sending one kind of signal on one path measured.
type signalTally struct {
	lat          []time.Duration // each answered signal's latency
	failed       int
	misdelivered int
	first        error
}

// note adds one signal's outcome.
func (t *signalTally) note(d time.Duration, err error) {
	if err != nil {
		t.failed++
		t.first = cmpOr(t.first, err)
		return
	}
	t.lat = append(t.lat, d)
}

// phaseResult is what one phase measured on one path.
type phaseResult struct {
	steers, interrupts signalTally
	steered            []string // the keys of the tasks steered (steerKey)
}

// steerPhase sends one phase's signals on every path, the paths taking
// turns task by task: cfg.steerTasks tasks steered cfg.steersEach times
// each, then cfg.interruptTasks tasks interrupted and answered
// cfg.interruptsEach times each. A task that cannot be started, answered
// or canceled ends the run.
func steerPhase(ctx context.Context, cfg steerConfig, paths map[string]signalPath) (map[string]*phaseResult, error) {
	rs := map[string]*phaseResult{}
	for _, p := range steerPaths {
		rs[p] = &phaseResult{}
	}
	for t := range cfg.steerTasks + cfg.interruptTasks {
		for k := range steerPaths {
			name := steerPaths[(k+t)%len(steerPaths)]
			p, r := paths[name], rs[name]
			id, err := p.start(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: start a task: %w", name, err)
			}
			if t < cfg.steerTasks {
				r.steered = append(r.steered, id)
				for n := 1; n <= cfg.steersEach; n++ {
					t0 := time.Now()
					err := p.signal(ctx, id, steering.Steer, n, steerText(id, n))
					r.steers.note(time.Since(t0), err)
				}
			} else {
				for n := 1; n <= cfg.interruptsEach; n++ {
					if err := interruptOnce(ctx, p, &r.interrupts, id, n); err != nil {
						return nil, fmt.Errorf("%s: %w", name, err)
					}
				}
			}
			if err := p.cancel(ctx, id); err != nil {
				return nil, fmt.Errorf("%s: cancel task %s: %w", name, id, err)
			}
		}
	}
	return rs, nil
}

// interruptOnce sends task id its n-th interrupt, timed into tally, then
// checks it settled INPUT_REQUIRED and answers it, so it works again.
func interruptOnce(ctx context.Context, p signalPath, tally *signalTally, id string, n int) error {
	t0 := time.Now()
	err := p.signal(ctx, id, steering.Interrupt, n, "interrupt "+strconv.Itoa(n))
	tally.note(time.Since(t0), err)
	state, serr := p.state(ctx, id)
	switch {
	case serr != nil:
		return fmt.Errorf("read task %s after an interrupt: %w", id, serr)
	case state == a2a.TaskStateInputRequired:
		if rerr := p.resume(ctx, id); rerr != nil {
			return fmt.Errorf("answer interrupted task %s: %w", id, rerr)
		}
	case state == a2a.TaskStateWorking:
		if err == nil {
			tally.misdelivered++
			tally.first = cmpOr(tally.first, fmt.Errorf("task %s still WORKING after its interrupt was answered", id))
		}
	default:
		return fmt.Errorf("task %s is %s after an interrupt: %w", id, state, cmpOr(err, errors.New("not interrupted")))
	}
	return nil
}

// misdelivered counts the steers the agent did not take once each, in
// the order sent: for each task of keys, the numbers 1 to each it took
// other than in their place, and those it lacks; bad are the tasks with
// any.
func misdelivered(keys []string, taken map[string][]int, each int) (n int, bad []string) {
	for _, k := range keys {
		got, before := taken[k], n
		for i := range max(len(got), each) {
			if i >= len(got) || i >= each || got[i] != i+1 {
				n++
			}
		}
		if n > before {
			bad = append(bad, k)
		}
	}
	return n, bad
}

// endLoad counts the load's delegations still WORKING and cancels them,
// cfg.callers at a time; ended counts those that could not be read or
// canceled (not those that never started).
func endLoad(ctx context.Context, cfg steerConfig, f *fronts, ids []string) (working int, ended startResult) {
	states := make([]a2a.TaskState, len(ids))
	ended = startAll(ctx, scaleConfig{delegations: len(ids), callers: cfg.callers}, func(ctx context.Context, i int) error {
		if ids[i] == "" {
			return nil // counted as start-failed
		}
		var rec apiRecord
		if err := f.apiDo(ctx, "GET", "/v1/delegations/"+ids[i], "", http.StatusOK, &rec); err != nil {
			return err
		}
		states[i] = rec.State
		return f.apiDo(ctx, "POST", "/v1/delegations/"+ids[i]+":cancel", "", http.StatusOK, nil)
	})
	for _, s := range states {
		if s == a2a.TaskStateWorking {
			working++
		}
	}
	return working, ended
}
