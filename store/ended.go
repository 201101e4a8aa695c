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

// PutEnded implements delegation.EndedStore: it keeps a delegation that
// ended as it started, its events and its record, the record last. The
// writes of a new delegation (its index entry, each event unless the
// record holds them, the record) are sent together and acknowledged
// together, one round trip to the server instead of one per write; a
// delegation the store already knows, or writes that fail, take the
// one-by-one path of Append and Put, which is idempotent, so what a
// failed first try left is completed, never doubled.
//
// Why: a delegation answered at once (an agent answering with a message,
// or with a task it already ended) was three to four synchronous writes,
// each waiting for the one before; together they cost a third of the
// hop's time in the store.
func (d *Delegations) PutEnded(ctx context.Context, r delegation.Record, evs []delegation.Event) error {
	w, err := d.encodeEnded(r, evs)
	if err != nil {
		return err
	}
	return d.putEnded(ctx, w)
}

// endedWrite is a delegation that ended as it started, encoded: its
// record alone (plain), with its log folded in when the log is short
// (folded, else nil), and its events (bodies, Seq 1 on).
type endedWrite struct {
	id, key string
	plain   []byte
	folded  []byte
	bodies  [][]byte
}

// size is about how many bytes the write holds in memory.
func (w *endedWrite) size() int {
	n := len(w.plain) + len(w.folded)
	for _, b := range w.bodies {
		n += len(b)
	}
	return n
}

// encodeEnded checks and encodes what PutEnded keeps.
func (d *Delegations) encodeEnded(r delegation.Record, evs []delegation.Event) (*endedWrite, error) {
	key, err := delegationKey(r.ID)
	if err != nil {
		return nil, fmt.Errorf("put delegation: %w: %w", delegation.ErrBadRequest, err)
	}
	if !r.State.Terminal() {
		return nil, fmt.Errorf("put delegation %s: %w: PutEnded with state %s", r.ID, delegation.ErrBadRequest, r.State)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			return nil, fmt.Errorf("put delegation %s: %w: event %d has seq %d, want %d", r.ID, delegation.ErrBadRequest, i, ev.Seq, i+1)
		}
	}
	w := &endedWrite{id: r.ID, key: key}
	if w.plain, err = json.Marshal(r); err != nil {
		return nil, fmt.Errorf("put delegation %s: %w", r.ID, err)
	}
	w.bodies = make([][]byte, len(evs))
	for i, ev := range evs {
		if w.bodies[i], err = json.Marshal(ev); err != nil {
			return nil, fmt.Errorf("append event %d to delegation %s: %w", ev.Seq, r.ID, err)
		}
	}
	if folded, ok := d.fold(w.plain, w.bodies); ok {
		w.folded = folded
	}
	return w, nil
}

// putEnded writes w, after any write of its delegation still queued
// (quick.go): together when the delegation is new here, else, or when
// that fails, one by one.
func (d *Delegations) putEnded(ctx context.Context, w *endedWrite) error {
	if err := d.quick.settle(ctx, w.key); err != nil {
		return fmt.Errorf("put delegation %s: %w", w.id, d.s.unavailable(ctx, err))
	}
	octx, cancel := d.s.writeContext(ctx)
	defer cancel()
	if d.hints.isNew(w.key) {
		if w.folded != nil {
			if d.putTogether(octx, w.key, w.folded, nil) == nil {
				return nil
			}
		} else if d.putTogether(octx, w.key, w.plain, w.bodies) == nil {
			return nil
		}
	}
	return d.putEndedOneByOne(ctx, octx, w)
}

// putEndedOneByOne writes w as Append and Put would, each write after the
// one before: it completes what a write together left, never doubling it.
// octx bounds it; errors are reported for ctx.
func (d *Delegations) putEndedOneByOne(ctx, octx context.Context, w *endedWrite) error {
	for i, body := range w.bodies {
		seq := int64(i + 1)
		if err := attempt(octx, func() error { return d.append(octx, w.key, seq, body) }); err != nil {
			return fmt.Errorf("append event %d to delegation %s: %w", seq, w.id, d.s.unavailable(ctx, err))
		}
	}
	if err := attempt(octx, func() error { return d.put(octx, w.key, true, w.plain) }); err != nil {
		return fmt.Errorf("put delegation %s: %w", w.id, d.s.unavailable(ctx, err))
	}
	return nil
}

// putTogether sends a new delegation's index entry, its events (bodies,
// Seq 1 on; none when the record holds its log) and its ended record
// without waiting between them, then waits for every acknowledgement. The
// index entry and the first event expect their subjects to be empty, as
// for a new delegation; each event has the message id Append gives it, so
// the one-by-one path that follows a failure finds those stored and goes
// on after them.
func (d *Delegations) putTogether(ctx context.Context, key string, record []byte, bodies [][]byte) error {
	var b batch
	d.sendTogether(&b, key, record, bodies)
	acks, err := b.wait(ctx)
	if err != nil {
		return err
	}
	d.keptTogether(key, acks)
	return nil
}

// sendTogether adds the writes of putTogether to b: the index entry, the
// events (if bodies holds any) and the record, in that order.
func (d *Delegations) sendTogether(b *batch, key string, record []byte, bodies [][]byte) {
	b.send(d.s.js, nats.NewMsg(d.indexPf+key), jetstream.WithExpectLastSequencePerSubject(0))
	for i, body := range bodies {
		seq := strconv.Itoa(i + 1)
		m := nats.NewMsg(d.eventsPf + key)
		m.Data = body
		m.Header.Set(seqHeader, seq)
		opts := []jetstream.PublishOpt{jetstream.WithMsgID(key + "." + seq)}
		if i == 0 {
			opts = append(opts, jetstream.WithExpectLastSequencePerSubject(0))
		}
		b.send(d.s.js, m, opts...)
	}
	rm := nats.NewMsg(d.recordPf + key)
	rm.Data = record
	b.send(d.s.js, rm, jetstream.WithMsgTTL(d.cfg.Retention))
}

// keptTogether notes what the writes of sendTogether, acknowledged with
// acks, left: the index entry, no running mark, and the log's tail when
// it went to the event stream, and the record's revision.
func (d *Delegations) keptTogether(key string, acks []*jetstream.PubAck) {
	d.hints.update(key, placeEnded, func(h *hint) {
		h.indexed = true
		h.mark = markRemoved // a record that never ran has no r. key
		// acks are the index entry's, the events' and the record's: the
		// tail is the last event's.
		if n := len(acks) - 2; n > 0 {
			h.tail, h.tailKnown = eventTail{stream: acks[n].Sequence, seq: int64(n)}, true
		}
		h.record, h.recordKnown = acks[len(acks)-1].Sequence, true
	})
}

// Folded logs. The log of a delegation that ended as it started is
// short, and complete: nothing is appended to it after. PutEnded keeps
// such a log, when it is small, in the record's own stored value, under
// foldedLogField, instead of one event stream message per event: the
// delegation then costs two writes (its index entry and its record), not
// two and one per event. Events and Wait read a folded log from the
// record when the event stream holds none for the delegation, and Put
// keeps it when it rewrites the record.
//
// Why: the store's work was a quarter of a delegation's CPU time through
// orchd, most of it per message (docs/benchmarks.md).
const (
	foldedLogField     = "eventLog"
	maxFoldedEvents    = 8
	maxFoldedLogBytes  = 16 << 10
	foldedLogFieldJSON = `,"` + foldedLogField + `":[`
)

// fold returns record, a record's JSON object, with the events bodies
// added as its folded log; false when the log is too long to fold.
func (d *Delegations) fold(record []byte, bodies [][]byte) ([]byte, bool) {
	n := 0
	for _, b := range bodies {
		n += len(b) + 1
	}
	if len(bodies) == 0 || len(bodies) > min(maxFoldedEvents, d.cfg.MaxEvents) || n > maxFoldedLogBytes ||
		len(record) < 2 || record[len(record)-1] != '}' {
		return nil, false
	}
	out := make([]byte, 0, len(record)+len(foldedLogFieldJSON)+n+1)
	out = append(out, record[:len(record)-1]...)
	out = append(out, foldedLogFieldJSON...)
	for i, b := range bodies {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	return append(out, ']', '}'), true
}

// foldedLog is the part of a stored record that holds a folded log.
type foldedLog struct {
	EventLog []json.RawMessage `json:"eventLog"`
}

// folded reads the folded log of the record under key: nil when the
// record has none, or is gone.
func (d *Delegations) folded(ctx context.Context, key string) ([]json.RawMessage, error) {
	e, err := d.kv.Get(ctx, delegationRecordPrefix+key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f foldedLog
	if err := json.Unmarshal(e.Value(), &f); err != nil {
		return nil, fmt.Errorf("record %s is not readable: %w", key, err)
	}
	return f.EventLog, nil
}

// foldedEvents returns at most limit events of the folded log of key
// with a Seq above after.
func (d *Delegations) foldedEvents(ctx context.Context, key string, after int64, limit int) ([]delegation.Event, error) {
	log, err := d.folded(ctx, key)
	if err != nil {
		return nil, err
	}
	var out []delegation.Event
	for _, raw := range log {
		var ev delegation.Event
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("event of record %s is not readable: %w", key, err)
		}
		if ev.Seq > after && len(out) < limit {
			out = append(out, ev)
		}
	}
	return out, nil
}

// keepFolded returns record, the JSON of a record about to replace the
// one under key, with the folded log the stored one holds, if any.
func (d *Delegations) keepFolded(ctx context.Context, key string, record []byte) ([]byte, error) {
	log, err := d.folded(ctx, key)
	if err != nil || len(log) == 0 {
		return record, err
	}
	bodies := make([][]byte, len(log))
	for i, raw := range log {
		bodies[i] = raw
	}
	out, ok := d.fold(record, bodies)
	if !ok {
		return nil, fmt.Errorf("record %s: its folded log of %d events cannot be kept", key, len(log))
	}
	return out, nil
}
