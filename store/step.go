package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/delegation"
)

// PutStep implements delegation.StepStore: it appends an event to a
// running delegation's log and puts its record, sending both writes
// before waiting for either. It takes that path when this process wrote
// the delegation last (its log's tail, its index entry and its running
// mark are known here) and the record does not end it; otherwise, or
// when a write of the pair fails, it appends and puts one by one, as
// Append and Put do, which completes what the pair kept, never doubling
// it.
//
// Why: a running delegation's every event, a steering signal or an
// agent's status update, was an Append and a Put, the second waiting for
// the first: two round trips to the server at each hop of a chain before
// a signal's receipt could go back.
func (d *Delegations) PutStep(ctx context.Context, r delegation.Record, ev delegation.Event) error {
	key, err := delegationKey(r.ID)
	if err != nil {
		return fmt.Errorf("put delegation: %w: %w", delegation.ErrBadRequest, err)
	}
	if ev.Seq < 1 {
		return fmt.Errorf("append to delegation %s: %w: event seq %d is below 1", r.ID, delegation.ErrBadRequest, ev.Seq)
	}
	if err := d.quick.settle(ctx, key); err != nil {
		return fmt.Errorf("put delegation %s: %w", r.ID, d.s.unavailable(ctx, err))
	}
	if tail, ok := d.stepsTogether(key, r, ev); ok {
		body, err := json.Marshal(ev)
		if err != nil {
			return fmt.Errorf("append event %d to delegation %s: %w", ev.Seq, r.ID, err)
		}
		rec, err := json.Marshal(r)
		if err != nil {
			return fmt.Errorf("put delegation %s: %w", r.ID, err)
		}
		octx, cancel := d.s.writeContext(ctx)
		err = d.putStep(octx, key, tail, ev.Seq, body, rec)
		cancel()
		if err == nil {
			return nil
		}
	}
	if err := d.Append(ctx, r.ID, ev); err != nil {
		return err
	}
	return d.Put(ctx, r)
}

// stepsTogether says whether the step of ev and r can be sent as a pair,
// and returns the log's tail ev follows: ev is next after the tail this
// process last wrote, and r is a running record whose index entry and
// running mark it wrote.
func (d *Delegations) stepsTogether(key string, r delegation.Record, ev delegation.Event) (eventTail, bool) {
	if r.State.Terminal() {
		return eventTail{}, false
	}
	h := d.hints.get(key)
	return h.tail, h.indexed && h.mark == markWritten && h.tailKnown && ev.Seq == h.tail.seq+1
}

// putStep sends the event, expecting the log's tail to be t and with its
// message id for the duplicate window, and the record, then waits for
// both acknowledgements.
func (d *Delegations) putStep(ctx context.Context, key string, t eventTail, seq int64, body, rec []byte) error {
	if err := d.s.fenced(); err != nil {
		return err
	}
	seqText := strconv.FormatInt(seq, 10)
	em := nats.NewMsg(d.eventsPf + key)
	em.Data = body
	em.Header.Set(seqHeader, seqText)
	rm := nats.NewMsg(d.recordPf + key)
	rm.Data = rec
	var b batch
	b.send(d.s.js, em, jetstream.WithMsgID(key+"."+seqText), jetstream.WithExpectLastSequencePerSubject(t.stream))
	d.expectRecord(rm, key)
	b.send(d.s.js, rm)
	acks, err := b.wait(ctx)
	if err != nil {
		// The one-by-one path reads the tail again. The record's revision
		// stays: should the record have been refused, writeRecord finds
		// out again, and writes it again only once the fence lets it.
		d.hints.forgetTail(key)
		return err
	}
	d.hints.setRecord(key, placeRunning, acks[1].Sequence)
	if acks[0].Duplicate {
		d.hints.forgetTail(key)
	} else {
		d.hints.setTail(key, placeRunning, eventTail{stream: acks[0].Sequence, seq: seq})
	}
	return nil
}

// batch is writes sent one after another without waiting, then waited
// for together: one round trip to the server for all of them.
type batch struct {
	futures []jetstream.PubAckFuture
	err     error // of a send
}

// send publishes m asynchronously; a failure to send is kept for wait.
func (b *batch) send(js jetstream.JetStream, m *nats.Msg, opts ...jetstream.PublishOpt) {
	if b.err != nil {
		return
	}
	f, err := js.PublishMsgAsync(m, opts...)
	if err != nil {
		b.err = err
		return
	}
	b.futures = append(b.futures, f)
}

// wait returns the acknowledgements in the order the writes were sent,
// or the errors of every write that failed, joined.
func (b *batch) wait(ctx context.Context) ([]*jetstream.PubAck, error) {
	if b.err != nil {
		return nil, b.err
	}
	acks := make([]*jetstream.PubAck, len(b.futures))
	var errs []error
	for i, f := range b.futures {
		select {
		case acks[i] = <-f.Ok():
		case err := <-f.Err():
			errs = append(errs, err)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return acks, nil
}
