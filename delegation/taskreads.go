package delegation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Reading the task of a delegation followed without a stream: by push,
// a notification (or the safety timer) asks for a read; polling, the
// timer set to the poll's pace does. Either way the read waits in its
// agent's queue and runs in one of a bounded number of workers, and no
// goroutine is the delegation's own between reads.

// maxTaskReads bounds the task reads push notifications and polls ask of
// one agent at once, from one process. A read is a GetTask call held open
// until the agent answers, with its goroutine and connection: at 10,000
// delegations to one a2a-go agent, a read per notification in flight at
// once held 2,300 reads and as many connections to the busy agent at the
// peak of the starts (2026-12-07). Past the bound a read waits in its
// agent's queue, and notifications that come meanwhile are folded into
// it, as they are into a read under way: the task read shows every status
// since the last, so nothing is lost, only read later. Polls are also
// paced (pace, pollBudget).
const maxTaskReads = 64

// taskReads runs the reads of push and polling followers
// (readFollower.run), at most maxTaskReads at once per agent, in the order
// they were asked for. Its workers are the engine's goroutines: started
// when reads wait, gone when none does.
type taskReads struct {
	mu     sync.Mutex
	agents map[string]*agentReads
}

// agentReads is one agent's queue of reads and how many workers serve it.
type agentReads struct {
	waiting []*readFollower
	workers int
}

// add queues f's read of its task at its agent's, starting a worker when
// fewer than maxTaskReads serve the agent. It reports false when the
// engine is closed, and f is not queued.
func (r *taskReads) add(e *Engine, f *readFollower) bool {
	r.mu.Lock()
	if r.agents == nil {
		r.agents = map[string]*agentReads{}
	}
	q := r.agents[f.agent]
	if q == nil {
		q = &agentReads{}
		r.agents[f.agent] = q
	}
	start := q.workers < maxTaskReads
	if start {
		if !e.track() {
			if q.workers == 0 && len(q.waiting) == 0 {
				delete(r.agents, f.agent)
			}
			r.mu.Unlock()
			return false
		}
		q.workers++
	}
	q.waiting = append(q.waiting, f)
	r.mu.Unlock()
	if start {
		go r.work(e, f.agent, q)
	}
	return true
}

// work runs the reads waiting for agent until none is left. A read of a
// closed engine's follower ends at once (run sees its context done).
func (r *taskReads) work(e *Engine, agent string, q *agentReads) {
	defer e.wg.Done()
	for {
		r.mu.Lock()
		if len(q.waiting) == 0 {
			q.workers--
			if q.workers == 0 {
				delete(r.agents, agent)
			}
			r.mu.Unlock()
			return
		}
		f := q.waiting[0]
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
		r.mu.Unlock()
		f.run()
	}
}

// remove takes f's read out of its agent's queue, if it waits there yet,
// and reports whether it did: a follower stopped meanwhile (a cancel, the
// deadline) ends without waiting for the reads ahead of it. Callers hold
// f's hook's lock (the one lock order: pushHook.mu, then taskReads.mu).
func (r *taskReads) remove(f *readFollower) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.agents[f.agent]
	if q == nil {
		return false
	}
	i := slices.Index(q.waiting, f)
	if i < 0 {
		return false
	}
	q.waiting = slices.Delete(q.waiting, i, i+1)
	return true
}

// readFollower follows one stretch of a task by reading it, until the
// task settles or following stops: by push, when kicked by a notification
// or by its safety timer; polling (pace set, followPoll), when its timer
// says the next poll is due. Each read runs in a worker of its agent's
// read queue (taskReads): no goroutine is its own while it waits.
type readFollower struct {
	h      *pushHook
	d      *Delegation
	agent  string // the agent whose queue its reads wait in (taskReads)
	ctx    context.Context
	cancel context.CancelFunc
	// done is closed once the follower has stopped and no read runs.
	done chan struct{}
	// pace schedules the polls of a polling follower; nil by push.
	pace *pace

	// Guarded by h.mu.
	timer    *time.Timer
	due      time.Duration // what the timer of a polling follower was set to
	running  bool          // a read runs
	again    bool          // kicked while a read ran
	stopped  bool
	closed   bool
	failures int
	since    time.Time // the first failure of the current run
	wait     time.Duration
}

// kick reads the task now, or once more after the read under way.
func (f *readFollower) kick() {
	h := f.h
	h.mu.Lock()
	if f.stopped {
		h.mu.Unlock()
		return
	}
	if f.running {
		f.again = true
		h.mu.Unlock()
		return
	}
	f.running = true
	h.mu.Unlock()
	if !f.d.engine.reads.add(f.d.engine, f) {
		h.mu.Lock()
		f.running = false
		f.stopLocked()
		h.mu.Unlock()
	}
}

// run reads the task until no kick is left, then returns; a taskReads
// worker runs it.
func (f *readFollower) run() {
	d, e, h := f.d, f.d.engine, f.h
	for {
		d.mu.Lock()
		taskID := d.rec.Downstream.TaskID
		d.mu.Unlock()
		task, err := d.getTask(f.ctx, taskID)
		settled := errors.Is(err, ErrAnswerTooLarge) // getTask gave the task up
		if err == nil {
			settled = d.apply(task)
		}
		lost := ""
		h.mu.Lock()
		if taskID != "" {
			h.task = taskID
		}
		if err == nil {
			h.known, h.knows = markOf(task.Status)
		}
		switch {
		case f.stopped || f.ctx.Err() != nil:
			f.running = false
			f.stopLocked()
			h.mu.Unlock()
			return
		case err == nil:
			f.failures, f.wait = 0, e.cfg.PollInterval
			switch {
			case settled:
			case f.pace != nil:
				now := time.Now()
				f.pace.saw(now, task.Status.State)
				f.due = f.pace.wait(now)
				f.timer.Reset(f.due)
			default:
				f.timer.Reset(e.cfg.SilenceTimeout)
			}
		default:
			if f.failures++; f.failures == 1 {
				f.since = time.Now()
			}
			if f.failures >= lostAfter && time.Since(f.since) >= e.cfg.SilenceTimeout {
				what := "reads"
				if f.pace != nil {
					what = "polls"
				}
				lost = fmt.Sprintf("lost track of task %s: %d %s failed in a row over %s, the last with: %v",
					taskID, f.failures, what, time.Since(f.since).Round(time.Millisecond), err)
			} else {
				f.wait = min(2*f.wait, max(maxPollBackoff, e.cfg.PollInterval))
				f.due = f.wait
				f.timer.Reset(f.wait)
			}
		}
		if !settled && lost == "" && f.again {
			f.again = false
			h.mu.Unlock()
			continue
		}
		f.running = false
		if settled || lost != "" {
			f.stopLocked()
		}
		h.mu.Unlock()
		if lost != "" {
			d.fail(lost)
		}
		if settled || lost != "" {
			d.settled()
		}
		return
	}
}

// stop ends the follower and, once no read runs, closes done: the
// delegation's stopFollow.
func (f *readFollower) stop() {
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	f.stopLocked()
}

// stopLocked is stop; callers hold h.mu.
func (f *readFollower) stopLocked() {
	if !f.stopped {
		f.stopped = true
		f.cancel()
		if f.timer != nil {
			f.timer.Stop()
		}
		if f.h.f == f {
			f.h.f = nil
		}
	}
	if f.running && f.d.engine.reads.remove(f) {
		f.running = false // its read had not begun
	}
	if !f.running && !f.closed {
		f.closed = true
		close(f.done)
	}
}
