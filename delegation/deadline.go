package delegation

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Time bounds over a delegation's whole life, beyond admission:
//
//   - its deadline (the caller's, the incoming chain's, or start +
//     MaxDuration, whichever is earliest) ends it FAILED when it passes,
//     whatever the delegation is doing, after canceling the downstream
//     task;
//   - every call to the agent, the opening of a stream included, is
//     bounded by CallTimeout; sends and steering signals by the deadline
//     too when that is nearer, and polls end when the deadline's expiry
//     stops the follower;
//   - a stream silent for SilenceTimeout is checked with GetTask: an agent
//     that answers is alive, one that does not answer lostAfter times in a
//     row is given up.

// lostAfter is how many GetTask calls in a row may fail, polling a task or
// checking a silent stream, before the agent is given up.
const lostAfter = 5

// lifetime is what bounds a started delegation in time.
type lifetime struct {
	// ended is done once the delegation has ended; arm sets it before the
	// delegation is shared.
	ended context.Context
	end   context.CancelFunc
	// timer fires at the deadline; set under Delegation.mu.
	timer *time.Timer
}

// stamp writes a deadline in errors: UTC, to the millisecond.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// shortState names a state without its TASK_STATE_ prefix.
func shortState(s a2a.TaskState) string { return strings.TrimPrefix(string(s), "TASK_STATE_") }

// capped applies MaxDuration to a delegation starting now: the earlier of
// deadline (zero for none) and now + MaxDuration.
func (e *Engine) capped(deadline time.Time) time.Time {
	if e.cfg.MaxDuration <= 0 {
		return deadline
	}
	limit := e.cfg.Now().Add(e.cfg.MaxDuration)
	if deadline.IsZero() || limit.Before(deadline) {
		return limit
	}
	return deadline
}

// arm starts a delegation's lifetime: the deadline timer, when the
// delegation has a deadline. It runs before the delegation is shared.
func (d *Delegation) arm() {
	e := d.engine
	d.life.ended, d.life.end = context.WithCancel(context.Background())
	if dl := d.chain.Deadline; !dl.IsZero() {
		d.mu.Lock()
		d.life.timer = time.AfterFunc(dl.Sub(e.cfg.Now()), func() { e.owned(d.expire) })
		d.mu.Unlock()
	}
}

// endLifeLocked releases what bounds the delegation once it has ended. Callers
// hold mu.
func (d *Delegation) endLifeLocked() {
	if d.life.timer != nil {
		d.life.timer.Stop()
	}
	if d.life.end != nil {
		d.life.end()
	}
}

// AfterEnd arranges for f to run in its own goroutine once the delegation
// has ended, at once if it has; no goroutine waits meanwhile. stop undoes
// the arrangement and reports whether it did so before f started.
func (d *Delegation) AfterEnd(f func()) (stop func() bool) {
	if d.life.ended == nil {
		return func() bool { return false }
	}
	return context.AfterFunc(d.life.ended, f)
}

// pastDeadline reports whether the delegation's deadline has passed.
func (d *Delegation) pastDeadline() bool {
	dl := d.chain.Deadline
	return !dl.IsZero() && !d.engine.cfg.Now().Before(dl)
}

// expire ends a delegation whose deadline has passed.
func (d *Delegation) expire() {
	d.op.Lock()
	defer d.op.Unlock()
	d.expireLocked()
}

// expireLocked stops following the downstream task, cancels it (waiting at
// most CancelWait) and ends the delegation FAILED, saying when and where
// the work was. Callers hold op.
func (d *Delegation) expireLocked() {
	e := d.engine
	if d.Record().State.Terminal() {
		return
	}
	d.stop()
	d.mu.Lock()
	state, agent, taskID := d.rec.State, d.rec.Downstream.Agent, d.rec.Downstream.TaskID
	d.mu.Unlock()
	if state.Terminal() {
		return // it ended on its own meanwhile
	}
	outcome := d.cancelDownstream(agent, taskID)
	reason := fmt.Sprintf("deadline %s passed while agent %s was %s; %s", stamp(d.chain.Deadline), agent, shortState(state), outcome)
	d.mu.Lock()
	if !d.rec.State.Terminal() {
		d.rec.Error = reason
		d.emitLocked(Event{Kind: "state", State: a2a.TaskStateFailed, Error: reason})
	}
	d.mu.Unlock()
	e.log.Warn("delegation deadline passed", "delegation", d.rec.ID, "agent", agent, "state", state, "outcome", outcome)
	d.settled()
}

// cancelDownstream cancels the task of an expired delegation and says how
// that went.
func (d *Delegation) cancelDownstream(agent string, taskID a2a.TaskID) string {
	if taskID == "" {
		return "no downstream task to cancel"
	}
	e := d.engine
	base := d.traced(e.ctx)
	ctx, cancel := context.WithTimeout(base, e.cfg.CancelWait)
	defer cancel()
	start := time.Now()
	task, err := d.client.CancelTask(ctx, &a2a.CancelTaskRequest{ID: taskID})
	// Observed against base: a cancel not answered within CancelWait is
	// the agent's doing, as in Engine.Cancel.
	e.instruments.called(base, agent, "CancelTask", start, err)
	switch {
	case err != nil && ctx.Err() != nil:
		return fmt.Sprintf("the cancel sent downstream was not answered within cancelWait (%s)", e.cfg.CancelWait)
	case errors.Is(err, a2a.ErrTaskNotCancelable):
		return "the downstream task had already ended" // a hop below met the same deadline
	case err != nil:
		return "canceling downstream failed: " + err.Error()
	case task.Status.State == a2a.TaskStateCanceled:
		return "canceled downstream"
	case task.Status.State.Terminal():
		return "the downstream task ended " + shortState(task.Status.State)
	}
	return "asked downstream to cancel; its task is " + shortState(task.Status.State)
}

// callContext bounds one call to the agent by CallTimeout, or by the
// delegation's deadline when that is nearer; the context's cause says
// which.
func (d *Delegation) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	limit := d.engine.cfg.CallTimeout
	return d.bounded(ctx, limit, &callTimeoutError{agent: d.rec.Downstream.Agent, limit: limit})
}

// bounded bounds ctx by limit, with cause (nil for none), or by the
// delegation's deadline when that is nearer, with ErrDeadline as the cause.
func (d *Delegation) bounded(ctx context.Context, limit time.Duration, cause error) (context.Context, context.CancelFunc) {
	if dl := d.chain.Deadline; !dl.IsZero() {
		if left := dl.Sub(d.engine.cfg.Now()); left < limit {
			limit, cause = left, fmt.Errorf("%w: it was %s", ErrDeadline, stamp(dl))
		}
	}
	return context.WithTimeoutCause(ctx, limit, cause)
}

// callErr is the error of a call made with callCtx: why callCtx gave up,
// when it did, else err.
func callErr(callCtx context.Context, err error) error {
	if callCtx.Err() == nil {
		return err
	}
	if cause := context.Cause(callCtx); cause != callCtx.Err() { //nolint:errorlint // is there a cause of its own, not the bare context error?
		return cause
	}
	return err
}

// callTimeoutError is an agent not answering a call within CallTimeout.
// It is a context.DeadlineExceeded, so the next candidate is tried.
type callTimeoutError struct {
	agent string
	limit time.Duration
}

func (e *callTimeoutError) Error() string {
	return fmt.Sprintf("agent %s did not answer within callTimeout (%s)", e.agent, e.limit)
}

func (e *callTimeoutError) Unwrap() error { return context.DeadlineExceeded }

// silence watches a stream for events while the follower waits on it:
// after SilenceTimeout without one it asks the agent for the task.
type silence struct {
	d *Delegation
	// ctx is the follower's: it ends when following stops; stopFollower
	// ends it.
	ctx          context.Context
	stopFollower context.CancelFunc

	mu    sync.Mutex
	timer *time.Timer
	// events counts the stream's events, so a probe can tell the stream
	// spoke while it waited for the agent's answer.
	events uint64
	failed int
	done   bool
}

// watchSilence starts watching a followed stream: after SilenceTimeout
// with no event heard, the agent is asked for the task. ctx is the
// follower's; stop, the follower's, ends it, for a probe that finds the
// task settled. The follower tells the watch of each event (heard) and
// ends it (stop).
func (d *Delegation) watchSilence(ctx context.Context, stop context.CancelFunc) *silence {
	e := d.engine
	w := &silence{d: d, ctx: ctx, stopFollower: stop}
	w.mu.Lock()
	w.timer = time.AfterFunc(e.cfg.SilenceTimeout, func() { e.owned(w.probe) })
	w.mu.Unlock()
	return w
}

func (w *silence) heard() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events++
	w.failed = 0
	if !w.done {
		w.timer.Reset(w.d.engine.cfg.SilenceTimeout)
	}
}

func (w *silence) stop() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	w.timer.Stop()
}

// probe asks the agent for the task of a silent stream. An answer is
// applied (it may show the task settled while the stream said nothing);
// lostAfter failures in a row, PollInterval apart, fail the delegation.
// Either way a settled task stops the follower waiting on the stream. When
// the stream spoke while the agent was asked, the outcome is dropped: the
// stream is alive, and its events are newer than the answer.
func (w *silence) probe() {
	d, e := w.d, w.d.engine
	w.mu.Lock()
	seen := w.events
	w.mu.Unlock()
	d.mu.Lock()
	taskID := d.rec.Downstream.TaskID
	d.mu.Unlock()
	task, err := d.getTask(w.ctx, taskID)
	// The outcome is applied under mu: an event the stream brings
	// meanwhile waits in heard and is applied after it.
	w.mu.Lock()
	if w.done || w.ctx.Err() != nil || w.events != seen {
		w.mu.Unlock()
		return
	}
	var settled bool
	switch {
	case err == nil:
		w.failed = 0
		w.timer.Reset(e.cfg.SilenceTimeout)
		settled = d.apply(task)
	case w.failed+1 < lostAfter:
		w.failed++
		w.timer.Reset(e.cfg.PollInterval)
	default:
		w.done = true
		d.fail(fmt.Sprintf("agent went silent: no stream event for %s, then %d GetTask calls in a row failed, the last with: %v",
			e.cfg.SilenceTimeout, lostAfter, err))
		settled = true
	}
	w.mu.Unlock()
	if settled {
		w.stopFollower()
		d.settled()
	}
}
