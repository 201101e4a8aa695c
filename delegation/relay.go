package delegation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/steering"
)

// Operations on a delegation another process follows.
//
// When several processes share a store, the one holding a delegation's
// lease follows its downstream task; it alone sends the task input,
// signals and cancels, so signals stay in order and each retried message
// id is passed on once. A process asked to act on a delegation it does not
// follow passes the operation to the lease holder over the Relay and
// answers with the holder's answer. A running delegation nobody holds
// (its process died and the lease has not been taken yet) is taken over
// on the spot by the process asked.

// Relay passes operations between the processes sharing a store. The
// daemon's relay runs over NATS request/reply (package store).
type Relay interface {
	// Forward sends op to the process named owner and returns its answer.
	Forward(ctx context.Context, owner string, op Op) (Result, error)
	// Serve answers the operations sent to this process, named owner,
	// with handle, until stop is called.
	Serve(owner string, handle func(context.Context, Op) Result) (stop func(), err error)
}

// Op is an operation on a delegation, as one process passes it to
// another.
type Op struct {
	// Kind is "input", "cancel", "signal" or "push" (a push notification
	// came for the delegation: its follower reads the task).
	Kind string `json:"kind"`
	// ID is the delegation's id.
	ID string `json:"id"`
	// Control is the signal's control, for kind signal.
	Control steering.Control `json:"control,omitempty"`
	// Message is the caller's input or signal.
	Message *a2a.Message `json:"message,omitempty"`
}

// Result is a process's answer to an Op.
type Result struct {
	// Record is the delegation after the operation.
	Record *Record `json:"record,omitempty"`
	// Receipt is a signal's receipt.
	Receipt *steering.Receipt `json:"receipt,omitempty"`
	// Error and Code say why the operation failed; Code names the
	// sentinel error it wraps (see errorCodes), so callers can tell a
	// delegation that ended from one not found.
	Error string `json:"error,omitempty"`
	Code  string `json:"code,omitempty"`
}

// errorCodes names the errors an operation's caller decides on, as they
// travel between processes.
var errorCodes = []struct {
	code string
	err  error
}{
	{"not_found", ErrNotFound}, {"ended", ErrEnded}, {"not_waiting", ErrNotWaiting},
	{"not_steerable", ErrNotSteerable}, {"bad_request", ErrBadRequest}, {"deadline", ErrDeadline},
	{"unavailable", ErrUnavailable}, {"closed", ErrClosed}, {"moved", errMoved}, {"contained", ErrContained},
}

// errMoved is a relayed operation that reached a process no longer
// holding the delegation: the sender looks for the holder again.
var errMoved = errors.New("the delegation moved to another process")

// result is the Result of an operation that ended with err.
func result(rec *Record, r *steering.Receipt, err error) Result {
	res := Result{Record: rec, Receipt: r}
	if err == nil {
		return res
	}
	res.Error = err.Error()
	for _, c := range errorCodes {
		if errors.Is(err, c.err) {
			res.Code = c.code
			break
		}
	}
	return res
}

// record is the Result's record, or none.
func (r Result) record() Record {
	if r.Record == nil {
		return Record{}
	}
	return *r.Record
}

// err turns a Result's error back into one wrapping its sentinel.
func (r Result) err() error {
	if r.Error == "" {
		return nil
	}
	for _, c := range errorCodes {
		if c.code == r.Code {
			return &relayedError{msg: r.Error, sentinel: c.err}
		}
	}
	return errors.New(r.Error)
}

// relayedError is an error another process answered with.
type relayedError struct {
	msg      string
	sentinel error
}

func (e *relayedError) Error() string { return e.msg }
func (e *relayedError) Unwrap() error { return e.sentinel }

// route finds who acts on the delegation: d when it is live here, else
// the process holding its lease (owner). A running delegation nobody
// holds is taken over here. It fails with ErrNotFound or ErrEnded for a
// delegation no process follows.
func (e *Engine) route(ctx context.Context, id string) (d *Delegation, owner string, err error) {
	if d, ok := e.Get(id); ok {
		return d, "", nil
	}
	for range 3 { // the lease may change hands while we look
		rec, err := e.store.Get(ctx, id)
		if err != nil {
			return nil, "", fmt.Errorf("%w: %q", err, id)
		}
		if rec.State.Terminal() || e.cfg.Leases == nil || e.cfg.Relay == nil {
			return nil, "", fmt.Errorf("%w: %q is %s", ErrEnded, id, rec.State)
		}
		holder, err := e.cfg.Leases.Holder(ctx, id)
		if err != nil {
			return nil, "", fmt.Errorf("find the process following delegation %s: %w", id, err)
		}
		if holder != "" && holder != e.cfg.Instance {
			return nil, holder, nil
		}
		d, err := e.takeOver(ctx, id)
		if errors.Is(err, ErrLeaseHeld) {
			continue
		}
		if err != nil || d != nil {
			return d, "", err
		}
	}
	return nil, "", fmt.Errorf("%w: delegation %s changed hands too often to reach", ErrUnavailable, id)
}

// takeOver takes the lease of delegation id, unfollowed here, and
// resumes it, returning it live (nil when it could not be resumed), or an
// error wrapping ErrLeaseHeld when another process holds it.
func (e *Engine) takeOver(ctx context.Context, id string) (*Delegation, error) {
	unlock := e.lockTakeOver(id)
	defer unlock()
	if d, ok := e.Get(id); ok { // adopt took it over meanwhile
		return d, nil
	}
	lease, err := e.takeOverLease(ctx, id)
	if errors.Is(err, ErrLeaseHeld) {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("take delegation %s over: %w", id, err)
	}
	rec, err := e.store.Get(ctx, id)
	if err != nil {
		release(lease)
		return nil, fmt.Errorf("%w: %q", err, id)
	}
	follow, err := e.resume(ctx, rec, nil, lease)
	if err != nil {
		return nil, fmt.Errorf("take delegation %s over: %w", id, err)
	}
	if follow != nil {
		follow()
	}
	d, _ := e.Get(id)
	return d, nil
}

// relayTimeout bounds an operation passed to another process: the longest
// the owner may take (a signal's call and an interrupt's wait).
func (e *Engine) relayTimeout() time.Duration {
	return e.cfg.CallTimeout + e.cfg.CancelWait + time.Second
}

// forward passes op to the owner and returns its answer. An owner that no
// longer holds the delegation answers errMoved, and the holder is looked
// for again.
func (e *Engine) forward(ctx context.Context, owner string, op Op) (Result, error) {
	// An owner that does not answer may have died holding the lease: the
	// lease expires within its TTL, and the delegation is then taken
	// over, here or by another process.
	patience := time.Now().Add(e.cfg.Leases.TTL() + time.Second)
	for moves := 0; moves < 3; {
		res, err := e.forwardOnce(ctx, owner, op)
		if err != nil {
			if ctx.Err() != nil || time.Now().After(patience) {
				return Result{}, fmt.Errorf("%w: pass the %s of delegation %s to the process following it: %v", ErrUnavailable, op.Kind, op.ID, err)
			}
			select {
			case <-time.After(min(e.cfg.Leases.TTL()/4, 500*time.Millisecond)):
			case <-ctx.Done():
			}
		} else if err := res.err(); !errors.Is(err, errMoved) {
			return res, err
		} else {
			moves++
		}
		d, next, err := e.route(ctx, op.ID)
		if err != nil {
			return Result{}, err
		}
		if d != nil {
			res := e.serve(ctx, op)
			return res, res.err()
		}
		owner = next
	}
	return Result{}, fmt.Errorf("%w: delegation %s changed hands too often to reach", ErrUnavailable, op.ID)
}

// holderCheckEvery is how often a relayed operation waiting for its
// answer checks that the process it was passed to still holds the
// delegation.
const holderCheckEvery = 500 * time.Millisecond

// forwardOnce passes op to owner, waiting up to relayTimeout for its
// answer. Meanwhile it checks every holderCheckEvery that owner still
// holds the delegation, and answers errMoved once another process does:
// an owner killed just as op was sent may keep its subscription on the
// NATS servers until they notice its connection closed, so no "no
// responders" comes back, and the request would wait out relayTimeout
// while another process follows the delegation. A lease nobody holds is
// waited on: the owner lets it go when the delegation ends, maybe by op.
func (e *Engine) forwardOnce(ctx context.Context, owner string, op Op) (Result, error) {
	mctx, moved := context.WithCancelCause(ctx)
	defer moved(nil)
	fctx, cancel := context.WithTimeout(mctx, e.relayTimeout())
	defer cancel()
	watched := make(chan struct{})
	go func() { // ends when the answer comes (cancel) or the owner moved
		defer close(watched)
		tick := time.NewTicker(holderCheckEvery)
		defer tick.Stop()
		for {
			select {
			case <-fctx.Done():
				return
			case <-tick.C:
			}
			holder, err := e.cfg.Leases.Holder(fctx, op.ID)
			if err == nil && holder != "" && holder != owner {
				moved(errMoved)
				return
			}
		}
	}()
	res, err := e.cfg.Relay.Forward(fctx, owner, op)
	cancel()
	<-watched
	if err != nil && errors.Is(context.Cause(mctx), errMoved) {
		return result(nil, nil, fmt.Errorf("%w: %s stopped holding delegation %s while its %s waited", errMoved, owner, op.ID, op.Kind)), nil
	}
	return res, err
}

// serve performs an operation on a delegation live here: one passed by
// another process, or this process's own after route found it here.
func (e *Engine) serve(ctx context.Context, op Op) Result {
	d, ok := e.Get(op.ID)
	if !ok {
		return result(nil, nil, errMoved)
	}
	switch op.Kind {
	case "input":
		rec, err := e.sendLocal(ctx, d, op.Message)
		return result(&rec, nil, err)
	case "cancel":
		rec, err := e.cancelLocal(ctx, d)
		return result(&rec, nil, err)
	case "signal":
		r, err := e.steerLocal(ctx, d, op.Control, op.Message)
		return result(nil, &r, err)
	case "push":
		return result(nil, nil, e.notifyLocal(d))
	}
	return result(nil, nil, fmt.Errorf("%w: unknown operation %q", ErrBadRequest, op.Kind))
}

// serveRelayed answers operations other processes pass here, until the
// engine closes; with no Relay it does nothing.
func (e *Engine) serveRelayed() error {
	if e.cfg.Relay == nil {
		return nil
	}
	stop, err := e.cfg.Relay.Serve(e.cfg.Instance, func(ctx context.Context, op Op) Result {
		if !e.track() {
			return result(nil, nil, ErrClosed)
		}
		defer e.wg.Done()
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(e.ctx, cancel)()
		return e.serve(ctx, op)
	})
	if err != nil {
		return fmt.Errorf("serve operations passed by other processes: %w", err)
	}
	e.mu.Lock()
	e.stopRelay = stop
	e.mu.Unlock()
	return nil
}
