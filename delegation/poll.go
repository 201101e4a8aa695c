package delegation

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Following a task by polling it (GetTask): the task of an agent that does
// not stream, of a stream that broke, or of a delegation carried on after
// a restart.
//
// orchd sends to such agents with ReturnImmediately, so it knows the task
// from the first answer however long the work takes (docs/delegation.md
// says why not a blocking send), and then polls at a pace that follows the
// task's age: the wait before the next poll is a third of the time since
// the task last changed state, at least firstPoll and at most
// PollInterval. A task that is over within a millisecond is known to be
// over a millisecond or two later; one that takes 30 ms, within about
// 10 ms of its end; a long one is polled every PollInterval, after a ramp
// of about two dozen polls with the default 500ms. A poll that finds a
// state not seen before (SUBMITTED to WORKING) starts the ramp again,
// once per state, so a task that waited in a queue is then polled at the
// pace of its work, and the polls a task costs stay bounded: with the
// default, about 25 per state plus one per PollInterval of its duration.
// Early polls (those due before PollInterval) are bounded for the whole
// engine by earlyPolls a second: beyond, a poll due early waits twice as
// long (up to PollInterval) instead, so a fan-out of thousands of polled
// delegations costs at most earlyPolls GetTask calls a second more than
// polling every PollInterval did, instead of swamping the agents and orchd.
//
// The age of a task polled anew (after a restart, a broken stream) is that
// of its record's last change, so it is not polled quickly if nothing has
// happened to it for a while.

// firstPoll is the wait before a new task's first poll, and the shortest
// wait between polls.
const firstPoll = time.Millisecond

// paceDivisor divides a task's age into the wait before the next poll: a
// task that ends is known to have ended within about a third of its age.
const paceDivisor = 3

// maxPollBackoff caps the wait between failed polls.
const maxPollBackoff = 5 * time.Second

// earlyPolls is how many early polls an engine makes a second at most, in
// bursts of as many; a quick Task answer costs one or two.
const earlyPolls = 200

// pollBudget is a token bucket of early polls. Its zero value is full.
type pollBudget struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

// take reports whether an early poll may be made at now, and counts it if
// so.
func (b *pollBudget) take(now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.last.IsZero():
		b.tokens, b.last = earlyPolls, now
	case now.After(b.last): // callers' clocks may be read out of order
		b.tokens = min(earlyPolls, b.tokens+now.Sub(b.last).Seconds()*earlyPolls)
		b.last = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// pace schedules the polls of one task.
type pace struct {
	// least and most bound every wait.
	least, most time.Duration
	// since is when the task last changed state, as far as the poller
	// knows.
	since time.Time
	// seen are the states the task has been in while polled; only a state
	// not seen yet starts the ramp again.
	seen []a2a.TaskState
}

// newPace schedules polls of a task that last changed age ago, in state,
// with waits up to interval.
func newPace(now time.Time, age, interval time.Duration, state a2a.TaskState) *pace {
	return &pace{least: min(firstPoll, interval), most: interval, since: now.Add(-max(age, 0)), seen: []a2a.TaskState{state}}
}

// wait is how long to wait, at now, before the next poll.
func (p *pace) wait(now time.Time) time.Duration {
	return min(max(now.Sub(p.since)/paceDivisor, p.least), p.most)
}

// saw records the state a poll found at now: a state not seen before
// starts the ramp again.
func (p *pace) saw(now time.Time, state a2a.TaskState) {
	for _, s := range p.seen {
		if s == state {
			return
		}
	}
	p.seen = append(p.seen, state)
	p.since = now
}

// followPoll follows the downstream task by polling it with no goroutine
// of its own: a timer set to the pace above queues each poll at the
// agent's, as a push notification queues a read (taskReads), so at most
// maxTaskReads polls of one agent run at once, and 10,000 polled
// delegations do not hold 10,000 goroutines and their stacks between
// polls. It reports false, and nothing follows the task, when the
// delegation has no task yet to poll.
func (d *Delegation) followPoll() bool {
	e := d.engine
	d.mu.Lock()
	taskID, state, agent := d.rec.Downstream.TaskID, d.rec.State, d.rec.Downstream.Agent
	age := e.cfg.Now().Sub(d.rec.UpdatedAt)
	d.mu.Unlock()
	if taskID == "" {
		return false
	}
	h := &pushHook{d: d, task: taskID} // the follower's own: no webhook
	ctx, cancel := context.WithCancel(d.traced(e.ctx))
	f := &readFollower{h: h, d: d, agent: agent, ctx: ctx, cancel: cancel, done: make(chan struct{}), wait: e.cfg.PollInterval,
		pace: newPace(time.Now(), age, e.cfg.PollInterval, state)}
	d.mu.Lock()
	d.stopFollow, d.followDone = f.stop, f.done
	d.mu.Unlock()
	h.mu.Lock()
	defer h.mu.Unlock()
	if e.ctx.Err() != nil || f.stopped {
		// Closed or stopped meanwhile: nothing follows the task.
		f.stopLocked()
		return true
	}
	h.f = f
	f.due = f.pace.wait(time.Now())
	f.timer = time.AfterFunc(f.due, f.pollDue)
	return true
}

// pollDue runs when a polling follower's timer fires. A poll due before
// PollInterval waits twice as long instead (up to PollInterval) when the
// engine's early polls are spent (pollBudget).
func (f *readFollower) pollDue() {
	e := f.d.engine
	h := f.h
	h.mu.Lock()
	if !f.stopped && f.due < e.cfg.PollInterval && !e.early.take(time.Now()) {
		f.due = min(2*f.due, e.cfg.PollInterval)
		f.timer.Reset(f.due)
		h.mu.Unlock()
		return
	}
	h.mu.Unlock()
	f.kick()
}

// poll follows the downstream task with GetTask until it settles, and
// reports whether it did: a follower whose stream ended first polls in
// its own goroutine this way. Polls keep the pace above. Failed polls back
// off, doubling from PollInterval up to maxPollBackoff; the task is given
// up once polls have failed lostAfter times in a row over at least
// SilenceTimeout, so an agent (or an orchd below) that restarts is waited
// for.
func (d *Delegation) poll(ctx context.Context) bool {
	e := d.engine
	d.mu.Lock()
	taskID, state := d.rec.Downstream.TaskID, d.rec.State
	age := e.cfg.Now().Sub(d.rec.UpdatedAt)
	d.mu.Unlock()
	if taskID == "" {
		d.fail("the stream ended before the agent created a task")
		return true
	}
	p := newPace(time.Now(), age, e.cfg.PollInterval, state)
	wait := p.wait(time.Now()) // the wait the timer was set to
	t := time.NewTimer(wait)
	defer t.Stop()
	failures, backoff := 0, e.cfg.PollInterval
	var since time.Time // the first failure of the current run
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		if wait < e.cfg.PollInterval && !e.early.take(time.Now()) {
			// The engine's early polls are spent: wait longer, up to
			// PollInterval, without polling.
			wait = min(2*wait, e.cfg.PollInterval)
			t.Reset(wait)
			continue
		}
		task, err := d.getTask(ctx, taskID)
		if errors.Is(err, ErrAnswerTooLarge) {
			return true // getTask gave the task up
		}
		if err != nil {
			if ctx.Err() != nil {
				return false
			}
			if failures++; failures == 1 {
				since = time.Now()
			}
			if failures >= lostAfter && time.Since(since) >= e.cfg.SilenceTimeout {
				d.fail(fmt.Sprintf("lost track of task %s: %d polls failed in a row over %s, the last with: %v",
					taskID, failures, time.Since(since).Round(time.Millisecond), err))
				return true
			}
			backoff = min(2*backoff, max(maxPollBackoff, e.cfg.PollInterval))
			wait = backoff
			t.Reset(wait)
			continue
		}
		failures, backoff = 0, e.cfg.PollInterval
		if d.apply(task) {
			return true
		}
		now := time.Now()
		p.saw(now, task.Status.State)
		wait = p.wait(now)
		t.Reset(wait)
	}
}
