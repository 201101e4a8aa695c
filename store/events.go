package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/delegation"
)

// seqHeader carries an event's Seq, so a log is searched and followed
// without decoding events.
const seqHeader = "Orchd-Seq"

// Wait looks at the log's tail besides listening for appends, in case it
// missed one: interest not yet known across a cluster (waitRecheck after
// it subscribed), a reconnect (at the next waitRecheck after it), or
// anything else (every waitRecheckMax at the latest). The wait between
// two looks doubles from waitRecheck: every follower of a quiet log once
// read its tail every 2 s, 500 reads a second for 1,000 followers.
const (
	waitRecheck    = 2 * time.Second
	waitRecheckMax = 30 * time.Second
)

// eventTail is the last event of a log: its stream sequence and its Seq.
type eventTail struct {
	stream uint64
	seq    int64
}

// Append implements delegation.Store. All logs are on the stream
// <namespace>_EVENTS, one subject per delegation, <namespace>.events.<id>,
// each keeping its latest MaxEvents events for at most Retention. An
// event is written expecting the log's last message to be the one it
// follows, and with the message id <id>.<seq> for the stream's duplicate
// window: a Seq at or below the log's last is already in it, and is kept
// as it is. A log may also hold seals (Seal), copies of the event
// before them, which readers read once.
func (d *Delegations) Append(ctx context.Context, id string, ev delegation.Event) error {
	key, err := delegationKey(id)
	if err != nil {
		return fmt.Errorf("append to delegation: %w: %w", delegation.ErrBadRequest, err)
	}
	if ev.Seq < 1 {
		return fmt.Errorf("append to delegation %s: %w: event seq %d is below 1", id, delegation.ErrBadRequest, ev.Seq)
	}
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("append event %d to delegation %s: %w", ev.Seq, id, err)
	}
	if err := d.quick.settle(ctx, key); err != nil {
		return fmt.Errorf("append event %d to delegation %s: %w", ev.Seq, id, d.s.unavailable(ctx, err))
	}
	octx, cancel := d.s.writeContext(ctx)
	defer cancel()
	if err := attempt(octx, func() error { return d.append(octx, key, ev.Seq, b) }); err != nil {
		return fmt.Errorf("append event %d to delegation %s: %w", ev.Seq, id, d.s.unavailable(ctx, err))
	}
	return nil
}

// append writes the event b, of Seq seq, at the end of the log of key,
// unless the log holds it already.
func (d *Delegations) append(ctx context.Context, key string, seq int64, b []byte) error {
	subject := d.eventsPf + key
	seqText := strconv.FormatInt(seq, 10)
	t, known := d.hints.tailOf(key)
	if !known && seq == 1 {
		known = true // a new log is empty; if it is not, the write says so
	}
	// Each attempt after the first follows a log that changed since it
	// was read; a log has one writer, the delegation's lease holder, so
	// two suffice unless writers compete.
	for range 3 {
		if !known {
			var err error
			if t, err = d.tail(ctx, subject); err != nil {
				return err
			}
		}
		if seq <= t.seq {
			return nil // already in the log
		}
		if err := d.s.fenced(); err != nil {
			return err
		}
		m := nats.NewMsg(subject)
		m.Data = b
		m.Header.Set(seqHeader, seqText)
		ack, err := d.s.js.PublishMsg(ctx, m, jetstream.WithMsgID(key+"."+seqText), jetstream.WithExpectLastSequencePerSubject(t.stream))
		switch {
		case err == nil && ack.Duplicate:
			d.hints.forgetTail(key)
			return nil
		case err == nil:
			d.hints.setTail(key, placeKept, eventTail{stream: ack.Sequence, seq: seq})
			return nil
		case isWrongLastSequence(err):
			d.hints.forgetTail(key)
			known = false
		default:
			d.hints.forgetTail(key)
			return err
		}
	}
	return errors.New("the log kept changing under the write")
}

// Seal implements delegation.LogSealer: it appends a seal to the log, a
// copy of the log's last event marked with sealHeader; a message with no
// body when the log is empty or its last event is over maxSealCopy. An earlier holder's write still on its
// way expects the log's tail before the seal, and is refused. Readers see
// the seal as the event it restates, and keep the first copy they read;
// the write that follows it expects it as the log's tail, as it would
// an event. Why: a late event that arrived after the new holder read the
// log took the place of the new holder's event of that number.
//
// The seal restates the event, rather than being skipped, so that the
// log's last message still holds its last event: a read from the last
// event on (Events after the one before, ReadMany) reads that message
// alone, where skipping it would search the stream. A large event is not
// copied: a takeover of thousands of delegations would write them all
// again, and reading those few logs from their last event searches.
func (d *Delegations) Seal(ctx context.Context, id string) error {
	key, err := delegationKey(id)
	if err != nil {
		return fmt.Errorf("seal the log of delegation: %w: %w", delegation.ErrBadRequest, err)
	}
	octx, cancel := d.s.writeContext(ctx)
	defer cancel()
	subject := d.eventsPf + key
	err = attempt(octx, func() error {
		if err := d.s.fenced(); err != nil {
			return err
		}
		m := nats.NewMsg(subject)
		seq := int64(0)
		last, err := d.events.GetLastMsgForSubject(octx, subject)
		switch {
		case err == nil:
			if seq, err = eventSeq(last); err != nil {
				return err
			}
			if len(last.Data) <= maxSealCopy {
				m.Data = last.Data
			}
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return err
		}
		m.Header.Set(seqHeader, strconv.FormatInt(seq, 10))
		m.Header.Set(sealHeader, "1")
		ack, err := d.s.js.PublishMsg(octx, m)
		if err != nil {
			return err
		}
		d.hints.setTail(key, placeRunning, eventTail{stream: ack.Sequence, seq: seq})
		return nil
	})
	if err != nil {
		return fmt.Errorf("seal the log of delegation %s: %w", id, d.s.unavailable(ctx, err))
	}
	return nil
}

// sealHeader marks a seal (Seal) in a log, for whoever reads the stream
// itself.
const sealHeader = "Orchd-Seal"

// maxSealCopy is the largest event a seal restates: a status or a small
// artifact, as a folded log's bound (maxFoldedLogBytes).
const maxSealCopy = 16 << 10

// tail reads the last event of the log on subject; zero when it is empty.
func (d *Delegations) tail(ctx context.Context, subject string) (eventTail, error) {
	m, err := d.events.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return eventTail{}, nil
	}
	if err != nil {
		return eventTail{}, err
	}
	seq, err := eventSeq(m)
	return eventTail{stream: m.Sequence, seq: seq}, err
}

// eventSeq reads the Seq of a stored event.
func eventSeq(m *jetstream.RawStreamMsg) (int64, error) {
	if v := m.Header.Get(seqHeader); v != "" {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			return n, nil
		}
	}
	var ev delegation.Event
	if err := json.Unmarshal(m.Data, &ev); err != nil {
		return 0, fmt.Errorf("event at %d is not readable: %w", m.Sequence, err)
	}
	return ev.Seq, nil
}

// Events implements delegation.Store. It finds the first event above
// after by a binary search over stream sequences (each probe reads the
// log's next message at or after a sequence, so it costs one read
// whatever the log's length and its neighbours), then reads forward. A
// limit of 0 or less, or over MaxEvents, means MaxEvents.
func (d *Delegations) Events(ctx context.Context, id string, after int64, limit int) ([]delegation.Event, error) {
	key, err := delegationKey(id)
	if err != nil {
		return nil, nil // no log can have this id
	}
	if limit <= 0 || limit > d.cfg.MaxEvents {
		limit = d.cfg.MaxEvents
	}
	octx, cancel := d.s.opContext(ctx)
	defer cancel()
	if err := d.quick.settle(octx, key); err != nil {
		return nil, fmt.Errorf("events of delegation %s: %w", id, d.s.unavailable(ctx, err))
	}
	subject := d.eventsPf + key
	var evs []delegation.Event
	err = attempt(octx, func() (err error) {
		evs, err = d.readEvents(octx, key, subject, after, limit)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("events of delegation %s: %w", id, d.s.unavailable(ctx, err))
	}
	return evs, nil
}

func (d *Delegations) readEvents(ctx context.Context, key, subject string, after int64, limit int) ([]delegation.Event, error) {
	last, err := d.events.GetLastMsgForSubject(ctx, subject)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return d.foldedEvents(ctx, key, after, limit) // the log may be in the record (ended.go)
	}
	if err != nil {
		return nil, err
	}
	lastSeq, err := eventSeq(last)
	if err != nil || lastSeq <= after {
		return nil, err
	}
	if lastSeq == after+1 && len(last.Data) > 0 {
		// Only the last event follows: no search for the first (which
		// walks the stream), as when a log is read from its record's
		// last event on.
		var ev delegation.Event
		if err := json.Unmarshal(last.Data, &ev); err != nil {
			return nil, fmt.Errorf("event at %d is not readable: %w", last.Sequence, err)
		}
		return []delegation.Event{ev}, nil
	}
	m, err := d.firstAfter(ctx, subject, after, last)
	if m == nil || err != nil {
		return nil, err
	}
	var out []delegation.Event
	for {
		if len(m.Data) > 0 { // else a seal that does not restate its event
			var ev delegation.Event
			if err := json.Unmarshal(m.Data, &ev); err != nil {
				return nil, fmt.Errorf("event at %d is not readable: %w", m.Sequence, err)
			}
			// A seal restates the event before it: the first copy read
			// is kept.
			if ev.Seq > after && (len(out) == 0 || ev.Seq > out[len(out)-1].Seq) {
				out = append(out, ev)
			}
		}
		if len(out) == limit || m.Sequence >= last.Sequence {
			return out, nil
		}
		m, err = d.next(ctx, subject, m.Sequence+1)
		if m == nil || err != nil {
			return out, err
		}
	}
}

// next reads the log's first message at or after seq; nil when none.
func (d *Delegations) next(ctx context.Context, subject string, seq uint64) (*jetstream.RawStreamMsg, error) {
	m, err := d.events.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
}

// firstAfter finds the log's first event with a Seq above after, given
// the log's last message, whose Seq is above after. Seqs grow with stream
// sequences, so "the next message at or after p has a Seq above after" is
// false, then true, as p grows: the search keeps lo where it is false and
// hi where it is true, with best the next message at or after hi.
func (d *Delegations) firstAfter(ctx context.Context, subject string, after int64, last *jetstream.RawStreamMsg) (*jetstream.RawStreamMsg, error) {
	first, err := d.next(ctx, subject, 1)
	if first == nil || err != nil {
		return nil, err
	}
	seq, err := eventSeq(first)
	if err != nil || seq > after {
		return first, err
	}
	lo, hi, best := first.Sequence, last.Sequence, last
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		m, err := d.next(ctx, subject, mid)
		if err != nil {
			return nil, err
		}
		if m == nil {
			// The log lost messages under the search: go on from what is known.
			break
		}
		seq, err := eventSeq(m)
		if err != nil {
			return nil, err
		}
		if seq > after {
			hi, best = mid, m
		} else {
			lo = m.Sequence
		}
	}
	return best, nil
}

// Wait implements delegation.Store. It subscribes to the log's subject
// before it reads the log's tail, so an append between the two is not
// missed, and reads the tail again every few seconds in case a message
// was (a reconnect, or a cluster not yet routing to the subscription).
func (d *Delegations) Wait(ctx context.Context, id string, after int64) error {
	key, err := delegationKey(id)
	if err != nil {
		return fmt.Errorf("wait for delegation: %w: %w", delegation.ErrBadRequest, err)
	}
	if err := d.quick.settle(ctx, key); err != nil {
		return fmt.Errorf("wait for delegation %s: %w", id, d.s.unavailable(ctx, err))
	}
	subject := d.eventsPf + key
	sub, err := d.s.nc.SubscribeSync(subject)
	if err != nil {
		return fmt.Errorf("wait for delegation %s: %w", id, d.s.unavailable(ctx, err))
	}
	defer func() { _ = sub.Unsubscribe() }() // the connection drops it anyway when it closes
	if err := sub.SetPendingLimits(1024, 16<<20); err != nil {
		return fmt.Errorf("wait for delegation %s: %w", id, err)
	}
	nc := d.s.nc
	reconnects := nc.Stats().Reconnects
	every := waitRecheck
	for {
		above, err := d.holdsAbove(ctx, key, subject, after)
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("wait for delegation %s: %w", id, d.s.unavailable(ctx, err))
		}
		if above {
			return nil
		}
		look := time.Now().Add(every)
		every = min(2*every, waitRecheckMax)
		for {
			wctx, cancel := context.WithTimeout(ctx, waitRecheck)
			m, err := sub.NextMsgWithContext(wctx)
			cancel()
			if err == nil {
				// A published event may still be refused by the stream
				// (a duplicate, a lost race): the tail has the last word.
				if n, perr := strconv.ParseInt(m.Header.Get(seqHeader), 10, 64); perr == nil && n > after {
					break
				}
				continue
			}
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			if !errors.Is(err, context.DeadlineExceeded) {
				return fmt.Errorf("wait for delegation %s: %w", id, d.s.unavailable(ctx, err))
			}
			if r := nc.Stats().Reconnects; r != reconnects {
				reconnects, every = r, waitRecheck
				break // look at the tail again
			}
			if !time.Now().Before(look) {
				break
			}
		}
	}
}

// holdsAbove reports whether the log of key (on subject) holds an event
// with a Seq above after: by its tail, or, when the stream holds none of
// it, by the log its record may hold (ended.go). It is bounded by the
// store's timeout.
func (d *Delegations) holdsAbove(ctx context.Context, key, subject string, after int64) (bool, error) {
	octx, cancel := d.s.opContext(ctx)
	defer cancel()
	var above bool
	err := attempt(octx, func() error {
		t, err := d.tail(octx, subject)
		if err != nil || t.seq > 0 {
			above = t.seq > after
			return err
		}
		evs, err := d.foldedEvents(octx, key, after, 1)
		above = len(evs) > 0
		return err
	})
	return above, err
}
