package delegation

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
)

func TestPace_Wait(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		name     string
		age      time.Duration
		interval time.Duration
		want     time.Duration
	}{
		{"new task", 0, 500 * time.Millisecond, firstPoll},
		{"clock behind the record", -time.Second, 500 * time.Millisecond, firstPoll},
		{"2ms old", 2 * time.Millisecond, 500 * time.Millisecond, firstPoll},
		{"30ms old", 30 * time.Millisecond, 500 * time.Millisecond, 10 * time.Millisecond},
		{"300ms old", 300 * time.Millisecond, 500 * time.Millisecond, 100 * time.Millisecond},
		{"an hour old", time.Hour, 500 * time.Millisecond, 500 * time.Millisecond},
		{"interval under firstPoll", 0, 100 * time.Microsecond, 100 * time.Microsecond},
		{"long interval", 90 * time.Second, time.Minute, 30 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPace(now, tc.age, tc.interval, a2a.TaskStateSubmitted)
			if got := p.wait(now); got != tc.want {
				t.Errorf("wait = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPace_NewStateStartsTheRampOnce(t *testing.T) {
	t.Parallel()
	start := time.Now()
	p := newPace(start, 0, 500*time.Millisecond, a2a.TaskStateSubmitted)
	later := start.Add(3 * time.Second)
	for _, step := range []struct {
		state a2a.TaskState
		want  time.Duration
	}{
		{a2a.TaskStateSubmitted, 500 * time.Millisecond}, // the state it started in
		{a2a.TaskStateWorking, firstPoll},                // new: the ramp starts again
		{a2a.TaskStateSubmitted, firstPoll},              // seen before: no reset, age still 0
	} {
		p.saw(later, step.state)
		if got := p.wait(later); got != step.want {
			t.Errorf("after %s: wait = %s, want %s", step.state, got, step.want)
		}
	}
	p.saw(later.Add(time.Second), a2a.TaskStateWorking) // flipping back: no reset either
	if got := p.wait(later.Add(3 * time.Second)); got != 500*time.Millisecond {
		t.Errorf("after flipping between seen states: wait = %s, want 500ms", got)
	}
}

func TestPollBudget_Take(t *testing.T) {
	t.Parallel()
	var b pollBudget
	now := time.Now()
	for i := range earlyPolls {
		if !b.take(now) {
			t.Fatalf("early poll %d of a full budget refused", i+1)
		}
	}
	if b.take(now) {
		t.Error("an early poll past the burst was allowed")
	}
	later := now.Add(10 * time.Millisecond) // refills earlyPolls/100
	got := 0
	for b.take(later) {
		got++
	}
	if want := earlyPolls / 100; got != want {
		t.Errorf("after 10ms, %d early polls allowed, want %d", got, want)
	}
	if b.take(later.Add(-time.Millisecond)) {
		t.Error("a clock read before the last one refilled the budget")
	}
	if !b.take(later.Add(time.Hour)) || b.tokens != earlyPolls-1 {
		t.Errorf("after an hour: tokens %v, want the burst (%d) less the one taken", b.tokens, earlyPolls)
	}
}

// timed is a non-streaming agent's work that says when it ended: it
// creates a task, stays SUBMITTED for queued, WORKING for working (with a
// first artifact chunk), then appends a second chunk and completes. With
// release set it also waits, after the first chunk, until release is
// closed.
type timed struct {
	queued, working time.Duration
	release         <-chan struct{}
	mu              sync.Mutex
	ended           time.Time
}

func (w *timed) do(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
	pause := func(d time.Duration) bool {
		if d == 0 {
			return true
		}
		select {
		case <-time.After(d):
			return true
		case <-ctx.Done():
			return false
		}
	}
	if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !pause(w.queued) {
		return
	}
	if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
		return
	}
	art := a2a.NewArtifactEvent(ec, a2a.NewTextPart("one "))
	if !yield(art, nil) || !pause(w.working) {
		return
	}
	if w.release != nil {
		select {
		case <-w.release:
		case <-ctx.Done():
			return
		}
	}
	more := a2a.NewArtifactUpdateEvent(ec, art.Artifact.ID, a2a.NewTextPart("two"))
	more.Append, more.LastChunk = true, true
	if !yield(more, nil) {
		return
	}
	w.mu.Lock()
	w.ended = time.Now()
	w.mu.Unlock()
	yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done"))), nil)
}

func (w *timed) endedAt() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended
}

// TestPoll_KnowsTheEndPromptly delegates to real agents that do not
// stream and checks that orchd learns each task's end within about a
// third of the task's age (plus slack for a loaded machine), where a
// fixed PollInterval made it wait up to the next interval, in a bounded
// number of polls, with the artifact whole. The rows on promptness poll
// at most every 2s, so waiting for the next interval could not pass them;
// those on the number of polls use the default 500ms.
func TestPoll_KnowsTheEndPromptly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name            string
		interval        time.Duration
		queued, working time.Duration
		// lag bounds the time from the agent's end to orchd's COMPLETED
		// event.
		lag time.Duration
		// maxPolls bounds the GetTask calls.
		maxPolls int
	}{
		{"at once", 2 * time.Second, 0, 0, time.Second, 8},
		{"after 30ms", 2 * time.Second, 0, 30 * time.Millisecond, time.Second, 20},
		{"after 300ms", 2 * time.Second, 0, 300 * time.Millisecond, time.Second, 30},
		{"after 2s", 500 * time.Millisecond, 0, 2 * time.Second, 700 * time.Millisecond, 35},
		{"queued 1s, then 2s", 500 * time.Millisecond, time.Second, 2 * time.Second, 700 * time.Millisecond, 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			w := &timed{queued: tc.queued, working: tc.working}
			agent := testagent.Start(t, testagent.Options{Name: "Batch", Skill: "batch"}, w.do)
			f := newFixture(t, Config{PollInterval: tc.interval})
			f.add(t, "batch", agent.URL)
			d, err := f.engine.Delegate(t.Context(), Request{Text: "crunch", Skill: "batch"})
			if err != nil {
				t.Fatal(err)
			}
			r := waitState(t, d, a2a.TaskStateCompleted)
			evs, _, _ := d.Events(0)
			end := evs[len(evs)-1]
			if lag := end.At.Sub(w.endedAt()); lag > tc.lag || lag < 0 {
				t.Errorf("orchd knew the task ended %s after the agent ended it, want at most %s", lag, tc.lag)
			}
			polls := 0
			for _, m := range agent.Calls() {
				if m == "GetTask" {
					polls++
				}
			}
			if polls > tc.maxPolls {
				t.Errorf("%d polls, want at most %d", polls, tc.maxPolls)
			}
			if len(r.Artifacts) != 1 || len(r.Artifacts[0].Parts) != 2 {
				t.Errorf("artifacts %+v, want one of two parts", r.Artifacts)
			}
			if r.Result == nil || messageText(r.Result) != "done" {
				t.Errorf("result %v, want done", r.Result)
			}
			t.Logf("%d polls, lag %s", polls, end.At.Sub(w.endedAt()))
		})
	}
}

// TestPoll_ThirtyMillisecondTask checks how promptly orchd learns the end
// of a task that takes 30ms, with the default PollInterval: in the median
// of several delegations, within about 10ms on an idle machine (the next
// poll is due at most a third of the task's age later), where waiting for
// the next interval took about 470ms. The bound leaves room for a loaded
// machine and the race detector, which made the median up to 60ms.
func TestPoll_ThirtyMillisecondTask(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{PollInterval: 500 * time.Millisecond})
	var lags []time.Duration
	for i := range 9 {
		w := &timed{working: 30 * time.Millisecond}
		agent := testagent.Start(t, testagent.Options{Name: "Batch", Skill: "batch"}, w.do)
		id := fmt.Sprintf("batch-%d", i)
		f.add(t, id, agent.URL)
		d, err := f.engine.Delegate(t.Context(), Request{Text: "crunch", Agent: id})
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, d, a2a.TaskStateCompleted)
		evs, _, _ := d.Events(0)
		lags = append(lags, evs[len(evs)-1].At.Sub(w.endedAt()))
	}
	slices.Sort(lags)
	if median := lags[len(lags)/2]; median > 150*time.Millisecond || lags[0] < 0 {
		t.Errorf("orchd learned the ends %v after the agent, want a median of at most 150ms", lags)
	}
	t.Logf("lags %v", lags)
}

// TestPoll_ArtifactsBecomeEvents checks that a polled agent's artifacts
// become artifact events, as a streamed agent's do: a poll that finds an
// artifact new brings it whole, one that finds it grown brings the parts
// it gained, appended, before the state it ends in; the record holds the
// artifact whole.
func TestPoll_ArtifactsBecomeEvents(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	w := &timed{release: release} // a poll sees the first chunk alone, a later one both
	agent := testagent.Start(t, testagent.Options{Name: "Batch", Skill: "batch"}, w.do)
	f := newFixture(t, Config{PollInterval: 500 * time.Millisecond})
	f.add(t, "batch", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "crunch", Skill: "batch"})
	if err != nil {
		t.Fatal(err)
	}
	waitRecord(t, d, "artifact", func(r Record) bool { return len(r.Artifacts) > 0 })
	close(release)
	waitState(t, d, a2a.TaskStateCompleted)
	evs, _, _ := d.Events(0)
	var kinds, texts []string
	var appends []bool
	for _, ev := range evs {
		kinds = append(kinds, ev.Kind)
		if ev.Kind == "artifact" {
			var s string
			for _, p := range ev.Artifact.Parts {
				s += string(p.Content.(a2a.Text))
			}
			texts, appends = append(texts, s), append(appends, ev.Append)
		}
	}
	if !slices.Equal(texts, []string{"one ", "two"}) || !slices.Equal(appends, []bool{false, true}) {
		t.Errorf("artifact events carry %q, appending %v; want the first chunk, then the second appended", texts, appends)
	}
	if arts := d.Record().Artifacts; len(arts) != 1 || len(arts[0].Parts) != 2 {
		t.Errorf("the record's artifacts: %+v, want one of both chunks", arts)
	}
	if kinds[len(kinds)-1] != "state" || evs[len(evs)-1].State != a2a.TaskStateCompleted {
		t.Errorf("events %v: want the artifacts, then COMPLETED", kinds)
	}
	stored, err := f.engine.store.Events(t.Context(), d.ID(), 0, 100)
	if err != nil || len(stored) != len(evs) {
		t.Errorf("stored events: %d, %v; want the %d kept in memory", len(stored), err, len(evs))
	}
}

// BenchmarkPollsPerTask delegates tasks of several lengths to a real agent
// that does not stream, with the default PollInterval, and reports how
// many GetTask calls each cost and how long after the agent's end orchd
// knew it ended.
//
//	go test ./delegation -run '^$' -bench PollsPerTask -benchtime 3x
func BenchmarkPollsPerTask(b *testing.B) {
	for _, length := range []time.Duration{30 * time.Millisecond, 300 * time.Millisecond, 2 * time.Second, 5 * time.Second} {
		b.Run(length.String(), func(b *testing.B) {
			polls, lag := 0, time.Duration(0)
			for b.Loop() {
				w := &timed{working: length}
				agent := testagent.Start(b, testagent.Options{Name: "Batch", Skill: "batch"}, w.do)
				f := newFixture(b, Config{PollInterval: 500 * time.Millisecond})
				f.add(b, "batch", agent.URL)
				d, err := f.engine.Delegate(b.Context(), Request{Text: "crunch", Skill: "batch"})
				if err != nil {
					b.Fatal(err)
				}
				waitState(b, d, a2a.TaskStateCompleted)
				evs, _, _ := d.Events(0)
				lag += evs[len(evs)-1].At.Sub(w.endedAt())
				for _, m := range agent.Calls() {
					if m == "GetTask" {
						polls++
					}
				}
			}
			b.ReportMetric(float64(polls)/float64(b.N), "polls/task")
			b.ReportMetric(float64(lag.Microseconds())/float64(b.N)/1000, "lag-ms")
		})
	}
}

// TestPoll_PollsOfOneAgentAreBounded polls more delegations to one agent
// than maxTaskReads while the agent holds every read: the polls wait in
// the agent's read queue, served by maxTaskReads workers, rather than
// each in a goroutine of its own, and once the agent answers every
// delegation is followed to its end.
func TestPoll_PollsOfOneAgentAreBounded(t *testing.T) {
	t.Parallel()
	agent := startPushAgent(t, false)
	release := agent.holdReads(t)
	f := newFixture(t, Config{Follow: FollowPoll, PollInterval: 100 * time.Millisecond})
	f.add(t, "pusher", agent.URL)
	n := maxTaskReads + 16
	ds := make([]*Delegation, n)
	for i := range ds {
		d, err := f.engine.Delegate(t.Context(), Request{Text: "work", Skill: "push"})
		if err != nil {
			t.Fatal(err)
		}
		ds[i] = d
	}
	testwait.Until(t, 10*time.Second, "every delegation's poll to wait or run", func() bool {
		f.engine.reads.mu.Lock()
		defer f.engine.reads.mu.Unlock()
		q := f.engine.reads.agents["pusher"]
		return q != nil && q.workers+len(q.waiting) == n
	})
	f.engine.reads.mu.Lock()
	q := f.engine.reads.agents["pusher"]
	workers, waiting := q.workers, len(q.waiting)
	f.engine.reads.mu.Unlock()
	agent.mu.Lock()
	most := agent.mostReading
	agent.mu.Unlock()
	if workers != maxTaskReads || waiting != n-maxTaskReads || most > maxTaskReads {
		t.Errorf("%d workers, %d polls waiting, %d at the agent at most; want %d, %d, at most %d", workers, waiting, most, maxTaskReads, n-maxTaskReads, maxTaskReads)
	}
	release()
	agent.finish()
	for _, d := range ds {
		waitState(t, d, a2a.TaskStateCompleted)
	}
	agent.mu.Lock()
	most = agent.mostReading
	agent.mu.Unlock()
	if most > maxTaskReads {
		t.Errorf("%d polls at the agent at once, want at most %d", most, maxTaskReads)
	}
}
