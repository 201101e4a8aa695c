package delegation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Operations a caller makes on a running delegation: Send gives it input
// and Cancel ends it (Steer, in steer.go, passes a signal down). Each
// first finds who follows the delegation (route, relay.go): this process
// acts on it (sendLocal, cancelLocal), or passes the operation on to the
// process that does.

// Errors of the operations on a running delegation that callers decide on.
var (
	// ErrNotWaiting means input was sent to a delegation that is not
	// waiting for any.
	ErrNotWaiting = errors.New("delegation is not waiting for input")
	// ErrEnded means the delegation has already ended.
	ErrEnded = errors.New("delegation has ended")
)

// Send gives the caller's message to a delegation waiting for input; the
// same downstream task receives it. Once the engine is closed it fails
// with ErrClosed and sends nothing; while an agent the work reaches is
// contained, with ErrContained.
func (e *Engine) Send(ctx context.Context, id string, msg *a2a.Message) (Record, error) {
	if e.ctx.Err() != nil {
		return Record{}, ErrClosed // nothing would follow the task after the input
	}
	d, owner, err := e.route(ctx, id)
	switch {
	case err != nil:
		return Record{}, err
	case d == nil:
		res, err := e.forward(ctx, owner, Op{Kind: "input", ID: id, Message: msg})
		return res.record(), err
	}
	return e.sendLocal(ctx, d, msg)
}

// sendLocal is Send to a delegation live here.
func (e *Engine) sendLocal(ctx context.Context, d *Delegation, msg *a2a.Message) (Record, error) {
	id := d.rec.ID
	d.op.Lock()
	defer d.op.Unlock()
	d.mu.Lock()
	state, taskID, contextID := d.rec.State, d.rec.Downstream.TaskID, d.rec.Downstream.ContextID
	done := d.followDone
	d.mu.Unlock()
	if state.Terminal() {
		return Record{}, fmt.Errorf("%w: %q is %s", ErrEnded, id, state)
	}
	if !waiting(state) {
		return Record{}, fmt.Errorf("%w: %q is %s", ErrNotWaiting, id, state)
	}
	if err := e.containedFor(d); err != nil {
		return Record{}, fmt.Errorf("input to delegation %q not sent: %w", id, err)
	}
	if msg == nil || len(msg.Parts) == 0 {
		return Record{}, fmt.Errorf("%w: the message has no parts", ErrBadRequest)
	}
	if state == a2a.TaskStateAuthRequired {
		// Followed still (settles): following stops for the answer's
		// session, and starts again if the answer does not go through.
		d.stop()
		d.mu.Lock()
		state = d.rec.State
		d.mu.Unlock()
		if state != a2a.TaskStateAuthRequired {
			// The agent went on meanwhile, authorized out of band.
			d.refollow()
			if state.Terminal() {
				return Record{}, fmt.Errorf("%w: %q is %s", ErrEnded, id, state)
			}
			return Record{}, fmt.Errorf("%w: %q is %s", ErrNotWaiting, id, state)
		}
	} else if done != nil {
		// The follower saw the task settle and is returning.
		select {
		case <-done:
		case <-ctx.Done():
			return Record{}, context.Cause(ctx)
		}
	}
	m := *msg
	if m.ID == "" {
		m.ID = a2a.NewMessageID()
	}
	m.Role = a2a.MessageRoleUser
	m.TaskID, m.ContextID = taskID, contextID
	if d.chained {
		d.chain.Attach(&m)
	}
	s, err := d.sendInput(ctx, &m)
	if err != nil {
		if state == a2a.TaskStateAuthRequired {
			d.refollow()
		}
		return Record{}, fmt.Errorf("send input to %s: %w", d.rec.Downstream.Agent, err)
	}
	d.mu.Lock()
	d.emitLocked(Event{Kind: "message", State: a2a.TaskStateWorking, Message: &m})
	d.mu.Unlock()
	d.follow(s)
	return d.Record(), nil
}

// inputRetryFor bounds how long input refused because the execution that
// asked for it is still ending (executionStillEnding) is sent again.
const inputRetryFor = time.Second

// sendInput sends the caller's input to the task waiting for it. An agent
// that refuses it because the execution that asked for it is still ending
// has not taken the message, so it is sent again, from 5ms apart, for up
// to inputRetryFor.
func (d *Delegation) sendInput(ctx context.Context, msg *a2a.Message) (*session, error) {
	deadline := time.Now().Add(inputRetryFor)
	for wait := 5 * time.Millisecond; ; wait *= 2 {
		s, err := d.send(ctx, msg)
		if err == nil || !executionStillEnding(err) || time.Now().Add(wait).After(deadline) {
			return s, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, err
		}
	}
}

// Cancel cancels the downstream task. The delegation ends CANCELED when the
// agent confirms, or FAILED, with the reason, when it does not within
// CancelWait. Once its deadline has passed it ends FAILED, as at the
// deadline.
func (e *Engine) Cancel(ctx context.Context, id string) (Record, error) {
	d, owner, err := e.route(ctx, id)
	switch {
	case errors.Is(err, ErrEnded):
		r, lerr := e.LookupHead(ctx, id)
		if lerr != nil {
			return Record{}, lerr
		}
		return r, fmt.Errorf("%w: %q is %s", ErrEnded, id, r.State)
	case err != nil:
		return Record{}, err
	case d == nil:
		res, err := e.forward(ctx, owner, Op{Kind: "cancel", ID: id})
		return res.record(), err
	}
	return e.cancelLocal(ctx, d)
}

// cancelLocal is Cancel of a delegation live here.
func (e *Engine) cancelLocal(ctx context.Context, d *Delegation) (Record, error) {
	id := d.rec.ID
	d.op.Lock()
	defer d.op.Unlock()
	d.mu.Lock()
	state, taskID := d.rec.State, d.rec.Downstream.TaskID
	d.mu.Unlock()
	if state.Terminal() {
		return d.Record(), fmt.Errorf("%w: %q is %s", ErrEnded, id, state)
	}
	if d.pastDeadline() {
		// Past its deadline the delegation ends FAILED, however the
		// cancel and the deadline's timer interleave.
		d.expireLocked()
		return d.Record(), nil
	}
	callCtx, cancel := context.WithTimeout(ctx, e.cfg.CancelWait)
	defer cancel()
	task, err := e.cancelTask(callCtx, d, taskID)
	if err == nil && task != nil {
		d.apply(task)
	}
	// Wait for the confirmation to arrive on the stream or the poll.
	if !d.waitEnded(callCtx) {
		reason := fmt.Sprintf("cancel was not confirmed within %s", e.cfg.CancelWait)
		if err != nil {
			reason += ": " + err.Error()
		}
		d.fail(reason)
	}
	d.stop()
	d.settled()
	return d.Record(), nil
}

// cancelTask asks the agent to cancel its task, again while it answers
// that the task cannot be canceled, within ctx: an a2a-go agent refuses a
// cancel that meets an execution of the task as it ends or settles
// waiting for input (an interrupt just taken, say), though the task can
// be canceled a moment later (internal/taskexec/local_manager.go:391-396
// in a2a-go v2.4.0). It stops asking once the delegation ended (the task
// ended meanwhile, on the stream or the poll); a task that truly cannot
// be canceled keeps being refused, and the cancel ends as unconfirmed, as
// it would have.
func (e *Engine) cancelTask(ctx context.Context, d *Delegation, taskID a2a.TaskID) (*a2a.Task, error) {
	delay := 50 * time.Millisecond
	for {
		start := time.Now()
		task, err := d.client.CancelTask(ctx, &a2a.CancelTaskRequest{ID: taskID})
		e.instruments.called(ctx, d.rec.Downstream.Agent, "CancelTask", start, err)
		if !errors.Is(err, a2a.ErrTaskNotCancelable) {
			return task, err
		}
		wait, cancel := context.WithTimeout(ctx, delay)
		ended := d.waitEnded(wait)
		cancel()
		if ended || ctx.Err() != nil {
			return task, err
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// waitEnded waits until the delegation ended or ctx ends, and says
// whether it ended.
func (d *Delegation) waitEnded(ctx context.Context) bool {
	for {
		d.mu.Lock()
		ended, changed := d.rec.State.Terminal(), d.changedLocked()
		d.mu.Unlock()
		if ended {
			return true
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return false
		}
	}
}
