package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/orchd/orchd/steering"
)

// scaleConfig sizes the scale run.
type scaleConfig struct {
	delegations int           // long delegations started, in each run
	followed    int           // of them followed by server-sent events the whole time
	callers     int           // concurrent callers starting them
	work, tick  time.Duration // how long the agent works on each, and how often it says so
	steered     int           // delegations steered while the load runs
	steersEach  int           // steers sent to each of them, one after the other
	interrupts  int           // delegations interrupted while the load runs, then answered
	// signalsAt is when the steers and interrupts begin, after the first
	// start (or takeUp after all started, if later): the same moment of
	// the work in the direct run and through orchd, whose starts end at
	// different times.
	signalsAt time.Duration
	ended     int           // ended delegations in the store before the recovery run
	killAfter time.Duration // how long after the last start the recovery run kills orchd
	sample    time.Duration // how often orchd's threads and goroutines are read
}

// fullScale is the scale run of the report. Its agent ticks every 15 s,
// not every 5: an a2a-go v2.4.0 agent spends about 0.6 ms of CPU on each
// event it sends, most of it deep-copying the task through encoding/gob
// with a new encoder and decoder each time (internal/utils/utils.go:34-37,
// from internal/taskupdate/manager.go:213 and the in-memory task store),
// so 10,000 tasks ticking every 5 s took 1.2 of
// this machine's 2 cores for the agent alone, and the agent missed
// callTimeout both directly and through orchd.
var fullScale = scaleConfig{delegations: 10_000, followed: 1_000, callers: 64, work: 60 * time.Second, tick: 15 * time.Second,
	steered: 100, steersEach: 5, interrupts: 100, signalsAt: 20 * time.Second, ended: 100_000, killAfter: 15 * time.Second, sample: time.Second}

// scaleBench names the scale run's results.
const scaleBench = "BenchmarkProcessScale"

// scaleCallTimeout bounds one request of the scale run, and reading one
// delegation's whole log.
const scaleCallTimeout = 3 * time.Minute

// runScale is the report's scale run.
func runScale(ctx context.Context, w io.Writer, log *slog.Logger) error {
	return scaleRun(ctx, w, log, fullScale)
}

// scaleRun measures one orchd holding cfg.delegations long delegations to
// an a2a-go agent in its own process (longHandlers), against the same
// load sent to the agent directly, then orchd killed with kill -9 while
// it holds them, over a store that also holds cfg.ended ended ones. It
// writes a line saying how it was sized, then one result line per run:
//
//	BenchmarkProcessScale/config   1 <n> delegations <n> followed <n> callers <ms> work-ms <ms> tick-ms <n> steered <n> steers-each <n> interrupts <ms> signals-at-ms <n> ended
//	BenchmarkProcessScale/direct   1 <n> delegations <ms> start-wall-ms <ms> start-p50-ms <ms> start-p99-ms <ms> event-p50-ms <ms> event-p99-ms <n> completed <n> lost <n> agent-events <MiB> agent-peak-rss-MiB <ms> agent-cpu-ms
//	                                 <n> steers <n> steers-failed <n> steers-misdelivered <ms> steer-p50-ms <ms> steer-p99-ms
//	                                 <n> interrupts <n> interrupts-failed <ms> interrupt-p50-ms <ms> interrupt-p99-ms
//	BenchmarkProcessScale/orchd    1 ... the direct run's first line, then <MiB> peak-rss-MiB <MiB> rss-before-MiB <n> peak-threads <n> peak-goroutines <ms> orchd-cpu-ms
//	                                 ... the direct run's signals, then <n> log-gaps <n> log-duplicates <n> warn-lines <n> error-lines
//	BenchmarkProcessScale/push     1 ... as orchd's, through an orchd following the agent by push notifications
//	BenchmarkProcessScale/poll     1 ... as orchd's, through an orchd polling the agent's tasks, at most every tick
//	BenchmarkProcessScale/recovery 1 <n> delegations <n> ended-before <ms> ready-ms <n> completed <n> lost <n> log-gaps <n> log-duplicates
//	                                 <n> followers <n> follower-gaps <n> follower-duplicates <n> followers-resumed <MiB> peak-rss-MiB <n> warn-lines <n> error-lines
//
// Events are the agent's events through orchd's logs: every event of
// every delegation's log (agent-events in the direct run: the events its
// streams carried). event-p50/p99 is the time from the agent sending a
// tick to a follower reading it. A delegation is completed when its log
// ends COMPLETED after the agent's artifact and holds every tick the
// agent says it sent, once and in order; lost otherwise. Both runs steer
// and interrupt the same work on the same schedule (scaleSignals), the
// direct one with an a2a-go client activating the steering extension, so
// the agent's own share of a signal's time shows.
func scaleRun(ctx context.Context, w io.Writer, log *slog.Logger, cfg scaleConfig) error {
	if cfg.followed+cfg.steered+cfg.interrupts > cfg.delegations {
		return fmt.Errorf("scale run: %d followed, %d steered and %d interrupted are more than the %d delegations",
			cfg.followed, cfg.steered, cfg.interrupts, cfg.delegations)
	}
	h, err := newHarness(ctx, log)
	if err != nil {
		return err
	}
	defer h.close()
	agentProc, longURLs, err := h.role(ctx, "long", cfg.work.String(), cfg.tick.String())
	if err != nil {
		return err
	}
	_, quick, err := h.role(ctx, "agents", "1ms")
	if err != nil {
		return err
	}
	longURL := longURLs[0]
	agents := [][2]string{{kindLong, longURL}, {kindMessage, quick[slices.Index(agentKinds, kindMessage)]}}

	fmt.Fprintf(w, "%s/config\t1\t%d delegations\t%d followed\t%d callers\t%.0f work-ms\t%.0f tick-ms\t%d steered\t%d steers-each\t%d interrupts\t%.0f signals-at-ms\t%d ended\n",
		scaleBench, cfg.delegations, cfg.followed, cfg.callers, ms(cfg.work), ms(cfg.tick), cfg.steered, cfg.steersEach, cfg.interrupts, ms(cfg.signalsAt), cfg.ended)
	if err := scaleDirect(ctx, w, log, cfg, agentProc, longURL); err != nil {
		return err
	}
	spec := orchdSpec{name: "orchd", skills: []string{kindLong, kindMessage}, agents: agents}
	if err := scaleOrchd(ctx, w, log, h, cfg, spec, agentProc, longURL); err != nil {
		return err
	}
	push := spec
	push.name, push.extra = scalePush, "delegation:\n  follow: push\n"
	if err := scaleOrchd(ctx, w, log, h, cfg, push, agentProc, longURL); err != nil {
		return err
	}
	poll := spec
	poll.name, poll.extra = scalePoll, fmt.Sprintf("delegation:\n  follow: poll\n  pollInterval: %s\n", cfg.tick)
	if err := scaleOrchd(ctx, w, log, h, cfg, poll, agentProc, longURL); err != nil {
		return err
	}
	spec.name = "orchd-recovery"
	return scaleRecovery(ctx, w, log, h, cfg, spec)
}

// scaleDirect sends the scale load to the agent directly, with a2a-go
// streaming clients, and writes its result line.
func scaleDirect(ctx context.Context, w io.Writer, log *slog.Logger, cfg scaleConfig, agentProc *proc, longURL string) error {
	c, closeC, err := hopClient(ctx, longURL+"/rpc")
	if err != nil {
		return err
	}
	defer closeC()
	if err := resetPeak(agentProc.pid()); err != nil {
		return err
	}
	cpu0, err := cpuTime(agentProc.pid())
	if err != nil {
		return err
	}
	sp, closeS, err := directSignals(ctx, longURL)
	if err != nil {
		return err
	}
	defer closeS()
	streams := make([]*directStream, cfg.delegations)
	ids := make([]string, cfg.delegations)
	var all sync.WaitGroup
	start := startAll(ctx, cfg, func(ctx context.Context, i int) error {
		s := &directStream{follow: i < cfg.followed}
		streams[i] = s
		started := make(chan streamStart, 1)
		all.Go(func() { s.run(ctx, c, started) })
		st := <-started
		ids[i] = st.id
		return st.err
	})
	steers, interrupts := scaleSignals(ctx, log, cfg, start.began, ids, scaleSignaler{
		steer: func(ctx context.Context, id string, n int) error {
			return sp.signal(ctx, id, steering.Steer, n+1, steerText(id, n))
		},
		interrupt: func(ctx context.Context, id string) error {
			return sp.signal(ctx, id, steering.Interrupt, 0, "interrupt")
		},
	})
	all.Wait()
	cpu1, err := cpuTime(agentProc.pid())
	if err != nil {
		return err
	}
	st, err := readStatus(agentProc.pid())
	if err != nil {
		return err
	}
	var lat []time.Duration
	completed, lost, events := 0, 0, 0
	var first error
	for _, s := range streams {
		if s == nil {
			lost++
			continue
		}
		lat = append(lat, s.lat...)
		events += s.events
		if s.err == nil {
			completed++
		} else {
			lost++
			first = cmpOr(first, s.err)
		}
	}
	if first != nil || start.errs > 0 {
		log.Warn("scale run, direct: calls failed", "lost", lost, "start errors", start.errs, "first", cmpOr(first, start.first))
	}
	misdelivered, err := steersMisdelivered(ctx, log, cfg, longURL, ids)
	if err != nil {
		return err
	}
	slices.Sort(lat)
	fmt.Fprintf(w, "%s/direct\t1\t%d delegations\t%.0f start-wall-ms\t%.1f start-p50-ms\t%.1f start-p99-ms\t%.1f event-p50-ms\t%.1f event-p99-ms\t%d completed\t%d lost\t%d agent-events\t%.1f agent-peak-rss-MiB\t%.0f agent-cpu-ms",
		scaleBench, cfg.delegations, ms(start.wall), ms(start.pct(50)), ms(start.pct(99)), ms(pctOf(lat, 50)), ms(pctOf(lat, 99)),
		completed, lost, events, mib(st.hwmKiB), ms(cpu1-cpu0))
	writeSignals(w, steers, interrupts, misdelivered)
	fmt.Fprintln(w)
	return nil
}

// directStream is one of the direct run's streams.
type directStream struct {
	follow bool            // its ticks' latencies are kept
	lat    []time.Duration // from the agent sending each tick to reading it
	events int
	err    error // why it did not complete, if it did not
}

// streamStart is how a direct stream started: its task's id, or why it
// has none.
type streamStart struct {
	id  string
	err error
}

// run sends the long agent a streaming message with c and reads the
// stream to its end, saying on started how it started once its first
// event came, or the call failed before one. When the stream ends
// INPUT_REQUIRED, as an interrupt stops the work, it answers the task
// once, as orchd's API is answered in the run through orchd, and reads
// that stream to its end too.
func (s *directStream) run(ctx context.Context, c *a2aclient.Client, started chan<- streamStart) {
	ctx, cancel := context.WithTimeout(ctx, scaleCallTimeout)
	defer cancel()
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("work"))
	msg.Metadata = map[string]any{"skill": kindLong}
	log := eventLog{done: -1}
	id, first := "", true
	for answered := false; ; answered = true {
		for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}) {
			if err != nil {
				s.err = err
				break
			}
			if first {
				first = false
				id = string(ev.TaskInfo().TaskID)
				started <- streamStart{id: id}
			}
			s.events++
			switch e := ev.(type) {
			case *a2a.Task:
				log.state = e.Status.State
			case *a2a.TaskStatusUpdateEvent:
				log.status(e.Status.State, e.Status.Message, s.follow, &s.lat)
			case *a2a.TaskArtifactUpdateEvent:
				log.artifact(e.Artifact)
			}
		}
		if answered || s.err != nil || id == "" || log.state != a2a.TaskStateInputRequired {
			break
		}
		msg = a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go on"))
		msg.TaskID = a2a.TaskID(id)
	}
	if first {
		s.err = cmpOr(s.err, errors.New("the stream ended before its first event"))
		started <- streamStart{err: s.err}
	}
	if s.err == nil {
		s.err = log.check()
	}
}

// eventLog is what a reader of one delegation's events saw: enough to
// check it ended as the long agent ends its work.
type eventLog struct {
	state      a2a.TaskState
	artifacted bool
	ticks      []int // the tick numbers, in the order read
	done       int   // how many ticks the agent says it sent; -1 before it says
	steers     int   // steer events
}

// status folds a status (its state and message) into the log, keeping
// the latency of a tick in lat when keep is set.
func (l *eventLog) status(state a2a.TaskState, m *a2a.Message, keep bool, lat *[]time.Duration) {
	l.state = state
	if m == nil || len(m.Parts) != 1 {
		return
	}
	text := m.Parts[0].Text()
	if rest, ok := strings.CutPrefix(text, tickPrefix); ok {
		f := strings.Fields(rest)
		if len(f) != 2 {
			return
		}
		n, err1 := strconv.Atoi(f[0])
		sent, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return
		}
		l.ticks = append(l.ticks, n)
		if keep {
			*lat = append(*lat, time.Since(time.Unix(0, sent)))
		}
		return
	}
	if rest, ok := strings.CutPrefix(text, donePrefix); ok && state == a2a.TaskStateCompleted {
		if n, err := strconv.Atoi(rest); err == nil {
			l.done = n
		}
	}
}

// artifact folds an artifact into the log.
func (l *eventLog) artifact(a *a2a.Artifact) {
	l.artifacted = l.artifacted || a != nil && len(a.Parts) == 1 && a.Parts[0].Text() == pong
}

// check says why the log is not that of completed work, if it is not:
// COMPLETED after the artifact, and, when the agent worked to its end,
// every tick it says it sent, once, in order.
func (l *eventLog) check() error {
	if l.state != a2a.TaskStateCompleted || !l.artifacted {
		return fmt.Errorf("ended %s, artifact %v: %w", l.state, l.artifacted, errLost)
	}
	if l.done < 0 {
		return nil // answered after an interrupt: its ticks were cut short
	}
	for i, n := range l.ticks {
		if n != i+1 {
			return fmt.Errorf("ticks %v, want 1 to %d in order: %w", l.ticks, l.done, errLost)
		}
	}
	if len(l.ticks) != l.done {
		return fmt.Errorf("%d ticks, the agent sent %d: %w", len(l.ticks), l.done, errLost)
	}
	return nil
}

// startResult is what starting the run's delegations measured.
type startResult struct {
	lat   []time.Duration // each start's latency, sorted
	errs  int
	first error
	began time.Time // when the first start was sent
	wall  time.Duration
}

// pct is the p-th percentile of the starts' latencies.
func (r startResult) pct(p int) time.Duration { return pctOf(r.lat, p) }

// pctOf is the p-th percentile of sorted latencies; 0 for none.
func pctOf(lat []time.Duration, p int) time.Duration {
	return cellResult{lat: lat}.pct(p)
}

// inParallel runs f on each index below n, workers at a time, and
// returns once all are done.
func inParallel(n, workers int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				f(i)
			}
		})
	}
	wg.Wait()
}

// startAll runs start for each of cfg.delegations indexes, cfg.callers
// at a time, and measures each.
func startAll(ctx context.Context, cfg scaleConfig, start func(context.Context, int) error) startResult {
	lat := make([]time.Duration, cfg.delegations)
	errs := make([]error, cfg.delegations)
	t0 := time.Now()
	inParallel(cfg.delegations, cfg.callers, func(i int) {
		if ctx.Err() != nil {
			return
		}
		s := time.Now()
		errs[i] = start(ctx, i)
		lat[i] = time.Since(s)
	})
	r := startResult{began: t0, wall: time.Since(t0)}
	for i, err := range errs {
		if err != nil {
			r.errs++
			r.first = cmpOr(r.first, err)
			continue
		}
		r.lat = append(r.lat, lat[i])
	}
	slices.Sort(r.lat)
	return r
}

// scaleAPI is the harness's client of one orchd's HTTP API, following
// the daemon when it is started again on another address.
type scaleAPI struct {
	hc   *http.Client
	base atomic.Pointer[string]
}

// newScaleAPI is a client of the orchd at base.
func newScaleAPI(base string) *scaleAPI {
	a := &scaleAPI{hc: &http.Client{Transport: hopTransport()}}
	a.base.Store(&base)
	return a
}

// url is path at the orchd's current address.
func (a *scaleAPI) url(path string) string { return *a.base.Load() + path }

// post POSTs body to path and decodes a 2xx answer into out (may be nil).
func (a *scaleAPI) post(ctx context.Context, path, body string, out any) error {
	ctx, cancel := context.WithTimeout(ctx, scaleCallTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", a.url(path), strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxJSON))
	if err != nil {
		return fmt.Errorf("POST %s: %w", path, err)
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("POST %s: HTTP %d: %s", path, resp.StatusCode, bounded(b))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}

// delegate starts one long delegation and returns its id.
func (a *scaleAPI) delegate(ctx context.Context) (string, error) {
	var rec struct {
		ID string `json:"id"`
	}
	if err := a.post(ctx, "/v1/delegations", `{"text": "work", "skill": "`+kindLong+`"}`, &rec); err != nil {
		return "", err
	}
	if rec.ID == "" {
		return "", errors.New("POST /v1/delegations: no id")
	}
	return rec.ID, nil
}

// follower reads one delegation's events from orchd's API to the end,
// across lost connections and restarts of orchd, resuming with
// Last-Event-ID.
type follower struct {
	id      string
	keep    bool          // the ticks' latencies are kept
	within  time.Duration // how long run follows at most; scaleCallTimeout when 0
	last    int64
	gaps    int // events missing between two read
	dups    int // events read again
	resumed int // streams opened again after one was cut
	lat     []time.Duration
	log     eventLog
	// since, when set, has next kept: when the first event stored after
	// it was, by its "at".
	since, next time.Time
}

// newFollower follows delegation id.
func newFollower(id string, keep bool) *follower {
	return &follower{id: id, keep: keep, log: eventLog{done: -1}}
}

// run follows the delegation until its log ends or ctx is done.
func (f *follower) run(ctx context.Context, a *scaleAPI) error {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(f.within, scaleCallTimeout))
	defer cancel()
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return fmt.Errorf("delegation %s's events: %w", f.id, ctx.Err())
			case <-time.After(100 * time.Millisecond):
			}
		}
		ended, opened, _ := f.stream(ctx, a)
		if opened && attempt > 0 {
			f.resumed++
		}
		if ended {
			if err := f.log.check(); err != nil {
				return fmt.Errorf("delegation %s: %w", f.id, err)
			}
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("delegation %s's events: %w", f.id, ctx.Err())
		}
	}
}

// stream reads one stream of the delegation's events, after the last
// event read: whether the log ended, and whether the stream was opened.
func (f *follower) stream(ctx context.Context, a *scaleAPI) (ended, opened bool, err error) {
	req, err := http.NewRequestWithContext(ctx, "GET", a.url("/v1/delegations/"+f.id+"/events"), nil)
	if err != nil {
		return false, false, err
	}
	if f.last > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(f.last, 10))
	}
	resp, err := a.hc.Do(req)
	if err != nil {
		return false, false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxJSON))
		return false, false, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 4<<10), maxEventLine)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		var ev struct {
			Seq      int64         `json:"seq"`
			Kind     string        `json:"kind"`
			State    a2a.TaskState `json:"state"`
			Message  *a2a.Message  `json:"message"`
			Artifact *a2a.Artifact `json:"artifact"`
			At       time.Time     `json:"at"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			return false, true, err
		}
		if !f.since.IsZero() && f.next.IsZero() && ev.At.After(f.since) {
			f.next = ev.At
		}
		switch {
		case ev.Seq <= f.last:
			f.dups++
			continue
		case ev.Seq > f.last+1:
			f.gaps++
		}
		f.last = ev.Seq
		switch ev.Kind {
		case "artifact":
			f.log.artifact(ev.Artifact)
			f.log.state = ev.State
		case "steer":
			f.log.steers++
			f.log.state = ev.State
		default:
			f.log.status(ev.State, ev.Message, f.keep, &f.lat)
		}
	}
	return sc.Err() == nil && f.log.state.Terminal(), true, sc.Err()
}

// signalResult is what sending steers or interrupts measured.
type signalResult struct {
	lat    []time.Duration // each signal's latency to its answer, sorted
	failed int
	first  error
}

// startedFollowed is the run's delegations once started: their ids (""
// for one that did not start), the followers of the first cfg.followed,
// and each follower's outcome once following is done.
type startedFollowed struct {
	start     startResult
	ids       []string
	followers []*follower
	errs      []error
	following sync.WaitGroup
}

// startFollowed starts cfg.delegations long delegations through api,
// cfg.callers at a time, and follows each of the first cfg.followed as
// soon as it started, keeping its ticks' latencies when keep is set.
func startFollowed(ctx context.Context, cfg scaleConfig, api *scaleAPI, keep bool) *startedFollowed {
	sf := &startedFollowed{ids: make([]string, cfg.delegations), followers: make([]*follower, cfg.followed), errs: make([]error, cfg.followed)}
	sf.start = startAll(ctx, cfg, func(ctx context.Context, i int) error {
		id, err := api.delegate(ctx)
		if err != nil {
			return err
		}
		sf.ids[i] = id
		if i < cfg.followed {
			f := newFollower(id, keep)
			sf.followers[i] = f
			sf.following.Go(func() { sf.errs[i] = f.run(ctx, api) })
		}
		return nil
	})
	return sf
}

// logsRead is what reading every delegation's log to its end found.
type logsRead struct {
	completed, lost int
	events          int // events in the logs read
	gaps, dups      int
	first           error
	lostAt          []int // the indexes of the delegations lost
	// next is, for each delegation with an event stored after since,
	// how long after since the first was.
	next map[int]time.Duration
}

// readLogs reads the log of each delegation of ids to its end, callers at
// a time, each through the API apiFor gives for its index; a delegation
// never started ("" in ids) is lost. With since set, it keeps when each
// log's first event after since was stored (logsRead.next).
func readLogs(ctx context.Context, ids []string, callers int, apiFor func(int) *scaleAPI, since time.Time) logsRead {
	r := logsRead{next: map[int]time.Duration{}}
	var mu sync.Mutex
	inParallel(len(ids), callers, func(i int) {
		err := errors.New("not started")
		var f *follower
		if ids[i] != "" {
			f = newFollower(ids[i], false)
			f.since = since
			err = f.run(ctx, apiFor(i))
		}
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			r.lost++
			r.lostAt = append(r.lostAt, i)
			r.first = cmpOr(r.first, err)
		} else {
			r.completed++
		}
		if f != nil {
			if !f.next.IsZero() {
				r.next[i] = f.next.Sub(since)
			}
			r.events += int(f.last)
			r.gaps += f.gaps
			r.dups += f.dups
		}
	})
	return r
}

// scalePush names the scale run through an orchd that follows the
// agent's tasks by push notifications (delegation.follow: push), in its
// result line and as its daemon.
const scalePush = "push"

// scalePoll names the scale run through an orchd that polls the agent's
// tasks (delegation.follow: poll), at most once a tick of the agent's
// (pollInterval): what an operator sets for agents that change that
// often.
const scalePoll = "poll"

// scaleOrchd sends the scale load through orchd run as spec says, and
// writes its result line, named spec.name.
func scaleOrchd(ctx context.Context, w io.Writer, log *slog.Logger, h *harness, cfg scaleConfig, spec orchdSpec, agentProc *proc, longURL string) error {
	d, base, err := h.daemon(ctx, spec)
	if err != nil {
		return err
	}
	api := newScaleAPI(base)
	defer api.hc.CloseIdleConnections()
	before, err := readStatus(d.pid())
	if err != nil {
		return err
	}
	for _, p := range []*proc{d, agentProc} {
		if err := resetPeak(p.pid()); err != nil {
			return err
		}
	}
	agentCPU0, err := cpuTime(agentProc.pid())
	if err != nil {
		return err
	}
	orchdCPU0, err := cpuTime(d.pid())
	if err != nil {
		return err
	}
	smp := startSampler(ctx, d.pid(), base, true, cfg.sample)
	sf := startFollowed(ctx, cfg, api, true)
	start, ids, followers, followErrs := sf.start, sf.ids, sf.followers, sf.errs
	log.Info("scale run: delegations started", "started", len(start.lat), "errors", start.errs, "took", start.wall.Round(time.Millisecond))
	steers, interrupts := scaleSignals(ctx, log, cfg, start.began, ids, apiSignaler(api))
	sf.following.Wait()
	// Every delegation's log, read to its end once the work is over.
	logs := readLogs(ctx, ids, cfg.callers, func(int) *scaleAPI { return api }, time.Time{})
	peaks := smp.stop()
	orchdCPU1, err := cpuTime(d.pid())
	if err != nil {
		return err
	}
	agentCPU1, err := cpuTime(agentProc.pid())
	if err != nil {
		return err
	}
	st, err := readStatus(d.pid())
	if err != nil {
		return err
	}
	agentSt, err := readStatus(agentProc.pid())
	if err != nil {
		return err
	}
	misdelivered, err := steersMisdelivered(ctx, log, cfg, longURL, ids)
	if err != nil {
		return err
	}
	var lat []time.Duration
	for i, f := range followers {
		if f != nil {
			lat = append(lat, f.lat...)
		}
		if followErrs[i] != nil {
			log.Warn("scale run: a follower failed", "error", followErrs[i])
		}
	}
	slices.Sort(lat)
	if logs.first != nil || start.errs > 0 {
		log.Warn("scale run, through orchd: delegations lost", "lost", logs.lost, "start errors", start.errs, "first", cmpOr(logs.first, start.first))
	}
	warns, errs, firstLines := d.logCounts()
	for _, l := range firstLines {
		log.Warn("orchd logged", "line", l)
	}
	fmt.Fprintf(w, "%s/%s\t1\t%d delegations\t%.0f start-wall-ms\t%.1f start-p50-ms\t%.1f start-p99-ms\t%.1f event-p50-ms\t%.1f event-p99-ms\t%d completed\t%d lost\t%d agent-events\t%.1f agent-peak-rss-MiB\t%.0f agent-cpu-ms",
		scaleBench, spec.name, cfg.delegations, ms(start.wall), ms(start.pct(50)), ms(start.pct(99)), ms(pctOf(lat, 50)), ms(pctOf(lat, 99)),
		logs.completed, logs.lost, logs.events, mib(agentSt.hwmKiB), ms(agentCPU1-agentCPU0))
	fmt.Fprintf(w, "\t%.1f peak-rss-MiB\t%.1f rss-before-MiB\t%d peak-threads\t%d peak-goroutines\t%.0f orchd-cpu-ms",
		mib(st.hwmKiB), mib(before.rssKiB), max(peaks.threads, st.threads), peaks.goroutines, ms(orchdCPU1-orchdCPU0))
	writeSignals(w, steers, interrupts, misdelivered)
	fmt.Fprintf(w, "\t%d log-gaps\t%d log-duplicates\t%d warn-lines\t%d error-lines\n", logs.gaps, logs.dups, warns, errs)
	return d.stop()
}

// seq is 0, 1, … n-1.
func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// scaleSignaler is how the scale run signals one delegation, named by
// its key: through orchd's API, or to the agent's task directly.
type scaleSignaler struct {
	// steer sends the n-th steer (from 0) with steerText and checks its
	// receipt.
	steer func(ctx context.Context, key string, n int) error
	// interrupt interrupts the work and returns once it settled.
	interrupt func(ctx context.Context, key string) error
	// answer answers the interrupted work, so it completes; nil when
	// whoever reads the work answers it.
	answer func(ctx context.Context, key string) error
}

// steerText is the text of the n-th steer of the delegation or task key:
// the long agent keeps n per key (steerLog).
func steerText(key string, n int) string {
	return steerPrefix + key + " " + strconv.Itoa(n)
}

// steeredAt and interruptedAt are the indexes of the k-th steered and the
// k-th interrupted delegation: the last started, after the followed ones,
// so that each has most of its work ahead when the signals begin, however
// long the starts took.
func (cfg scaleConfig) steeredAt(k int) int {
	return cfg.delegations - cfg.interrupts - cfg.steered + k
}

func (cfg scaleConfig) interruptedAt(k int) int { return cfg.delegations - cfg.interrupts + k }

// takeUp is how long the scale run gives its agent to take up the work
// last started before it signals it: the agent's first status, WORKING,
// follows the task at once, but a busy agent may be late with it.
const takeUp = time.Second

// scaleSignals steers and interrupts the work of keys ("" for work that
// did not start) while it goes on, with sig, from cfg.signalsAt after
// began, and at least takeUp after it is called, once all started: the
// last started are signalled, and a signal to work the agent has not
// taken up yet (SUBMITTED) is refused, as only WORKING work can be
// steered. cfg.steered delegations (steeredAt) each get cfg.steersEach
// steers, one a second; cfg.interrupts others (interruptedAt) are each
// interrupted once, spread over the same seconds, and then answered, so
// their work completes. The first error of each kind is logged.
func scaleSignals(ctx context.Context, log *slog.Logger, cfg scaleConfig, began time.Time, keys []string, sig scaleSignaler) (steers, interrupts signalResult) {
	begin := began.Add(cfg.signalsAt)
	if settled := time.Now().Add(takeUp); settled.After(begin) {
		begin = settled
	}
	select {
	case <-time.After(time.Until(begin)):
	case <-ctx.Done():
		return steers, interrupts
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	note := func(r *signalResult, d time.Duration, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			r.failed++
			r.first = cmpOr(r.first, err)
			return
		}
		r.lat = append(r.lat, d)
	}
	spread := time.Duration(cfg.steersEach) * time.Second
	for k := range cfg.steered {
		i := cfg.steeredAt(k)
		if i < 0 || i >= len(keys) || keys[i] == "" {
			continue
		}
		wg.Go(func() {
			// Spread over the first second, so the steers do not all
			// arrive at once.
			time.Sleep(time.Duration(k) * time.Second / time.Duration(max(cfg.steered, 1)))
			for n := range cfg.steersEach {
				t0 := time.Now()
				err := sig.steer(ctx, keys[i], n)
				note(&steers, time.Since(t0), err)
				time.Sleep(time.Second)
			}
		})
	}
	for k := range cfg.interrupts {
		i := cfg.interruptedAt(k)
		if i < 0 || i >= len(keys) || keys[i] == "" {
			continue
		}
		wg.Go(func() {
			time.Sleep(time.Duration(k) * spread / time.Duration(max(cfg.interrupts, 1)))
			t0 := time.Now()
			err := sig.interrupt(ctx, keys[i])
			note(&interrupts, time.Since(t0), err)
			if err == nil && sig.answer != nil {
				err = sig.answer(ctx, keys[i])
			}
			if err != nil {
				mu.Lock()
				interrupts.first = cmpOr(interrupts.first, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(steers.lat)
	slices.Sort(interrupts.lat)
	if steers.first != nil {
		log.Warn("scale run: steers failed", "failed", steers.failed, "first", steers.first)
	}
	if interrupts.first != nil {
		log.Warn("scale run: interrupts or their answers failed", "failed", interrupts.failed, "first", interrupts.first)
	}
	return steers, interrupts
}

// apiSignaler signals delegations through orchd's API.
func apiSignaler(api *scaleAPI) scaleSignaler {
	return scaleSignaler{
		steer: func(ctx context.Context, id string, n int) error {
			return api.post(ctx, "/v1/delegations/"+id+":steer", fmt.Sprintf(`{"text": %q}`, steerText(id, n)), nil)
		},
		interrupt: func(ctx context.Context, id string) error {
			return api.post(ctx, "/v1/delegations/"+id+":interrupt", `{}`, nil)
		},
		answer: func(ctx context.Context, id string) error {
			return api.post(ctx, "/v1/delegations/"+id+"/messages", `{"text": "go on"}`, nil)
		},
	}
}

// steersMisdelivered counts the steered work of keys whose agent, at
// longURL, did not take each of its steers once, in order.
func steersMisdelivered(ctx context.Context, log *slog.Logger, cfg scaleConfig, longURL string, keys []string) (int, error) {
	var taken map[string][]int
	if err := getJSON(ctx, longURL+steersPath, &taken); err != nil {
		return 0, err
	}
	n := 0
	for k := range cfg.steered {
		i := cfg.steeredAt(k)
		if i < 0 || i >= len(keys) {
			continue
		}
		if want := seq(cfg.steersEach); !slices.Equal(taken[keys[i]], want) {
			n++
			log.Warn("scale run: steers not taken once each in order", "work", keys[i], "taken", taken[keys[i]], "want", want)
		}
	}
	return n, nil
}

// writeSignals writes what sending steers and interrupts measured to a
// result line.
func writeSignals(w io.Writer, steers, interrupts signalResult, misdelivered int) {
	fmt.Fprintf(w, "\t%d steers\t%d steers-failed\t%d steers-misdelivered\t%.2f steer-p50-ms\t%.2f steer-p99-ms",
		len(steers.lat)+steers.failed, steers.failed, misdelivered, ms(pctOf(steers.lat, 50)), ms(pctOf(steers.lat, 99)))
	fmt.Fprintf(w, "\t%d interrupts\t%d interrupts-failed\t%.2f interrupt-p50-ms\t%.2f interrupt-p99-ms",
		len(interrupts.lat)+interrupts.failed, interrupts.failed, ms(pctOf(interrupts.lat, 50)), ms(pctOf(interrupts.lat, 99)))
}

// scaleRecovery fills a new orchd's store with cfg.ended ended
// delegations, starts the scale load through it, kills it with kill -9
// cfg.killAfter after the last start, starts it again on the same state
// directory, and writes the result line: how soon it was ready, and
// whether every delegation was carried on to COMPLETED with its log
// whole, the followers resuming with Last-Event-ID.
func scaleRecovery(ctx context.Context, w io.Writer, log *slog.Logger, h *harness, cfg scaleConfig, spec orchdSpec) error {
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
	t0 := time.Now()
	err = prefill(ctx, fillC, cfg.ended)
	closeFill()
	if err != nil {
		return fmt.Errorf("fill orchd's store: %w", err)
	}
	log.Info("store filled", "delegations", cfg.ended, "took", time.Since(t0).Round(time.Millisecond))
	api := newScaleAPI(base)
	defer api.hc.CloseIdleConnections()
	sf := startFollowed(ctx, cfg, api, false)
	start, ids, followers, followErrs := sf.start, sf.ids, sf.followers, sf.errs
	if start.errs > 0 {
		log.Warn("scale recovery run: starts failed", "errors", start.errs, "first", start.first)
	}
	time.Sleep(cfg.killAfter)
	d.kill()
	w0, e0, _ := d.logCounts()
	t0 = time.Now()
	d, base, err = h.daemon(ctx, spec)
	if err != nil {
		return err
	}
	ready := time.Since(t0)
	log.Info("orchd started again after kill -9", "ready", ready.Round(time.Millisecond))
	api.base.Store(&base)
	if err := resetPeak(d.pid()); err != nil {
		return err
	}
	sf.following.Wait()
	logs := readLogs(ctx, ids, cfg.callers, func(int) *scaleAPI { return api }, time.Time{})
	if logs.first != nil {
		log.Warn("scale recovery run: delegations lost", "lost", logs.lost, "first", logs.first)
	}
	fgaps, fdups, resumed := 0, 0, 0
	for i, f := range followers {
		if f == nil {
			continue
		}
		fgaps += f.gaps
		fdups += f.dups
		if f.resumed > 0 {
			resumed++
		}
		if followErrs[i] != nil {
			log.Warn("scale recovery run: a follower failed", "error", followErrs[i])
		}
	}
	st, err := readStatus(d.pid())
	if err != nil {
		return err
	}
	warns, errs, firstLines := d.logCounts()
	for _, l := range firstLines {
		log.Warn("orchd logged", "line", l)
	}
	fmt.Fprintf(w, "%s/recovery\t1\t%d delegations\t%d ended-before\t%.0f ready-ms\t%d completed\t%d lost\t%d log-gaps\t%d log-duplicates\t%d followers\t%d follower-gaps\t%d follower-duplicates\t%d followers-resumed\t%.1f peak-rss-MiB\t%d warn-lines\t%d error-lines\t%d warn-lines-before-kill\t%d error-lines-before-kill\n",
		scaleBench, cfg.delegations, cfg.ended, ms(ready), logs.completed, logs.lost, logs.gaps, logs.dups, len(followers), fgaps, fdups, resumed, mib(st.hwmKiB), warns, errs, w0, e0)
	return d.stop()
}
