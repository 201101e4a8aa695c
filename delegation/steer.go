package delegation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/orchd/orchd/steering"
)

// ErrNotSteerable means a steer or interrupt cannot be passed on: the
// delegation is not WORKING, or its hop's pinned card does not advertise
// the mode. Nothing was delivered anywhere. The error wrapping it says
// which of the two controls was refused ("cannot interrupt: …").
var ErrNotSteerable = errors.New("cannot steer or interrupt")

// refusedSignalError is ErrNotSteerable for one control, named in its message;
// notAdvertised tells a hop whose card lacks the mode from a delegation
// that is not WORKING, as the metrics do.
type refusedSignalError struct {
	control       steering.Control
	notAdvertised bool
}

func (e refusedSignalError) Error() string { return "cannot " + string(e.control) }
func (e refusedSignalError) Unwrap() error { return ErrNotSteerable }

// Steer passes a steer or interrupt to the downstream task of a WORKING
// delegation, if the hop's pinned card advertises the mode, and returns
// the receipt: this engine's acceptance first, then every hop below. A
// retried message (same id) is passed on once and answered with the first
// receipt. Signals to one delegation are passed on one at a time, in the
// order they arrive. An interrupt returns once the delegation settled
// INPUT_REQUIRED (or CancelWait passed). Nothing waits past the
// delegation's deadline: a signal the agent has not answered by then fails
// with ErrDeadline.
func (e *Engine) Steer(ctx context.Context, id string, c steering.Control, msg *a2a.Message) (r steering.Receipt, err error) {
	ctx, span := e.instruments.start(ctx, "orchd.steer")
	defer func() { e.instruments.steered(ctx, span, c, err) }()
	if c != steering.Steer && c != steering.Interrupt {
		return steering.Receipt{}, fmt.Errorf("%w: unknown control %q", ErrBadRequest, c)
	}
	if msg == nil || len(msg.Parts) == 0 {
		return steering.Receipt{}, fmt.Errorf("%w: the message has no parts", ErrBadRequest)
	}
	d, owner, err := e.route(ctx, id)
	switch {
	case errors.Is(err, ErrEnded):
		// A retry of a signal passed on before the end still gets its
		// receipt.
		if rec, gerr := e.store.Get(ctx, id); gerr == nil && rec.Progress != nil {
			ended := Delegation{prog: *rec.Progress}
			if r, ok := ended.receiptLocked(msg.ID); ok {
				r.Duplicate = true
				return r, nil
			}
		}
		return steering.Receipt{}, err
	case err != nil:
		return steering.Receipt{}, err
	case d == nil:
		res, err := e.forward(ctx, owner, Op{Kind: "signal", ID: id, Control: c, Message: msg})
		if res.Receipt == nil || err != nil {
			return steering.Receipt{}, err
		}
		return *res.Receipt, nil
	}
	return e.steerLocal(ctx, d, c, msg)
}

// steerLocal is Steer of a delegation live here.
func (e *Engine) steerLocal(ctx context.Context, d *Delegation, c steering.Control, msg *a2a.Message) (r steering.Receipt, err error) {
	id := d.rec.ID
	span := trace.SpanFromContext(ctx)
	d.op.Lock()
	defer d.op.Unlock()

	d.mu.Lock()
	if r, ok := d.receiptLocked(msg.ID); ok {
		d.mu.Unlock()
		r.Duplicate = true
		return r, nil
	}
	state, hop, taskID, contextID, modes := d.rec.State, d.rec.Downstream.Agent, d.rec.Downstream.TaskID, d.rec.Downstream.ContextID, d.modes()
	d.mu.Unlock()
	if state == a2a.TaskStateSubmitted && taskID != "" {
		state = d.readSubmitted(ctx, taskID)
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("orchd.delegation.id", id), attribute.String("orchd.steering.control", string(c)), attribute.String("orchd.hop", hop))
	}
	switch {
	case state.Terminal():
		return steering.Receipt{}, fmt.Errorf("%w: %q is %s", ErrEnded, id, state)
	case state != a2a.TaskStateWorking:
		return steering.Receipt{}, fmt.Errorf("%w: delegation %q is %s; only WORKING work can be %s", refusedSignalError{control: c}, id, state, pastTense(c))
	case !modes.Allows(c):
		return steering.Receipt{}, fmt.Errorf("%w: hop %s does not advertise the %s mode of %s", refusedSignalError{control: c, notAdvertised: true}, hop, modeName(c), steering.URI)
	}

	down := *msg
	if down.ID == "" {
		down.ID = a2a.NewMessageID()
	}
	down.Role = a2a.MessageRoleUser
	down.TaskID, down.ContextID = taskID, contextID
	down.Metadata = cloneMetadata(msg.Metadata)
	down.Metadata[steering.ControlKey] = string(c)
	// Bounded by the deadline too: the signal holds op, which the
	// deadline's expiry waits for.
	callCtx, cancel := d.bounded(ctx, e.cfg.CallTimeout+e.cfg.CancelWait, nil)
	defer cancel()
	start := time.Now()
	res, err := d.client.SendMessage(callCtx, &a2a.SendMessageRequest{Message: &down})
	err = callErr(callCtx, err) // the chain's deadline is not the agent's fault
	e.instruments.called(ctx, hop, "SendMessage", start, err)
	if err != nil {
		return steering.Receipt{}, fmt.Errorf("hop %s refused the %s: %w", hop, c, err)
	}
	ack, ok := res.(*a2a.Task)
	if !ok {
		return steering.Receipt{}, fmt.Errorf("hop %s answered the %s with a %T, not an acknowledgement", hop, c, res)
	}
	below, _ := steering.ReceiptFrom(ack)

	ref, _ := msg.Metadata[steering.ReferenceKey].(string)
	d.mu.Lock()
	d.prog.SteerSeq++
	r = steering.Receipt{Control: c, MessageID: down.ID, Seq: d.prog.SteerSeq, ReferenceMessageID: ref,
		Hops: append([]steering.Hop{{Agent: e.cfg.Self, Seq: d.prog.SteerSeq}}, below.Hops...)}
	d.prog.Receipts = append(d.prog.Receipts, r)
	if over := len(d.prog.Receipts) - MaxReceipts; over > 0 {
		d.prog.Receipts = slices.Delete(d.prog.Receipts, 0, over)
	}
	d.emitLocked(Event{Kind: string(c), Message: &down, Receipt: &r})
	d.mu.Unlock()

	if c == steering.Interrupt {
		// The hop acknowledged once its task settled; its state reaches
		// this delegation through the stream or the poll, or from the
		// acknowledgement, whichever comes first.
		d.mu.Lock()
		working := d.rec.State == a2a.TaskStateWorking
		d.mu.Unlock()
		if working && ack.Status.State != a2a.TaskStateWorking {
			d.apply(ack)
		}
		waitCtx, cancelWait := d.bounded(ctx, e.cfg.CancelWait, nil)
		defer cancelWait()
		d.waitSettled(waitCtx)
	}
	return r, nil
}

// readSubmitted reads the downstream task of a delegation that a signal
// finds SUBMITTED, and applies it: followed by polls or push, the
// delegation may not have heard yet that the agent took the task up, and
// a signal to WORKING work must not be refused for that. It returns the
// delegation's state after, or SUBMITTED when the read fails. Callers
// hold op.
func (d *Delegation) readSubmitted(ctx context.Context, taskID a2a.TaskID) a2a.TaskState {
	task, err := d.getTask(ctx, taskID)
	if err != nil {
		return a2a.TaskStateSubmitted
	}
	if d.apply(task) {
		d.settled()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.rec.State
}

// receiptLocked returns the receipt of the signal with the message id, if it
// was passed on; callers hold mu.
func (d *Delegation) receiptLocked(id string) (steering.Receipt, bool) {
	if id == "" {
		return steering.Receipt{}, false
	}
	for i := len(d.prog.Receipts) - 1; i >= 0; i-- {
		if r := d.prog.Receipts[i]; r.MessageID == id {
			return r, true
		}
	}
	return steering.Receipt{}, false
}

// waitSettled waits until the delegation stops WORKING or ctx ends.
func (d *Delegation) waitSettled(ctx context.Context) {
	for {
		d.mu.Lock()
		state, changed := d.rec.State, d.changedLocked()
		d.mu.Unlock()
		if state != a2a.TaskStateWorking {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// pastTense is "steered" or "interrupted".
func pastTense(c steering.Control) string {
	if c == steering.Interrupt {
		return "interrupted"
	}
	return "steered"
}

func modeName(c steering.Control) string {
	if c == steering.Interrupt {
		return "interruptible"
	}
	return "steerable"
}

func cloneMetadata(m map[string]any) map[string]any {
	out := make(map[string]any, len(m)+1)
	for k, v := range m {
		out[k] = v
	}
	return out
}

// SteeringState is what a caller can do to a delegation's course: whether
// its hop takes steers and interrupts (the modes of the hop's pinned
// card; an orchd hop advertises a mode only when its whole chain takes
// it), and the receipts of the latest signals, oldest first.
type SteeringState struct {
	Steerable     bool               `json:"steerable"`
	Interruptible bool               `json:"interruptible"`
	Receipts      []steering.Receipt `json:"receipts,omitempty"`
}

// SteeringOf returns the steering state of delegation id: from this
// process when the delegation is live here, else from its stored record,
// which every signal updates before it is acknowledged.
func (e *Engine) SteeringOf(ctx context.Context, id string) (SteeringState, error) {
	var p Progress
	if d, ok := e.Get(id); ok {
		d.mu.Lock()
		p = d.prog
		p.Receipts = slices.Clone(p.Receipts)
		d.mu.Unlock()
	} else {
		rec, err := e.store.Get(ctx, id)
		if err != nil {
			return SteeringState{}, fmt.Errorf("%w: %q", err, id)
		}
		if rec.Progress != nil {
			p = *rec.Progress
		}
	}
	return SteeringState{Steerable: p.Steerable, Interruptible: p.Interruptible, Receipts: p.Receipts}, nil
}
