package store

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orchd/orchd/delegation"
)

// Quick writes. A delegation its agent ended in its first answer (a
// message, or a task already ended) is stored once, ended, and nothing of
// it goes on: what is kept is the record of an exchange whose answer the
// caller holds. QueueEnded queues such a record instead of writing it
// before the answer, and the committer, a goroutine of the store, writes
// what is queued in groups: every record of a group is sent with
// JetStream's asynchronous publish, its index entry and its record (its
// short log folded in), and the acknowledgements are gathered once for
// the whole group, rather than one round trip, and one wait of a caller,
// each.
//
// The committer writes a group once the oldest queued record has waited
// the lag (Config.QuickWriteLag), at once when quickBatch records are
// queued, and everything queued when the store closes, before the
// connection does. A read or a write of a queued delegation (Get, Events,
// Wait, Put, Append, ...) asks for a write at once and waits for it;
// List waits for every record queued when it starts. So this process
// never reads a queued record as missing; another process sharing the
// store sees it within the lag. A kill -9 loses what is queued: the
// records of exchanges already answered, written within the lag.
//
// The queue is bounded (quickQueue records, quickQueueBytes bytes, those
// being written included); a record that does not fit, one whose log is
// too long to fold, one of a delegation the process already wrote, and
// every record while the store's writes fail or Ready last found it
// unable to take work, and after a queued write failed until one written
// so succeeds, is written before QueueEnded returns, as PutEnded writes
// it. Nothing is dropped, and
// nothing waits for room.
//
// Why: on the embedded store, a hop answered at once spent about a
// quarter of orchd's CPU in the store, most of it per round trip: the
// goroutine hand-offs of a write and its acknowledgement, which a group
// pays once (docs/benchmarks.md).
//
// Not JetStream's atomic batch publish (nats-server 2.12 on): a batch is
// of one stream, and a record takes two (the index and the bucket); it
// commits all or nothing, so one record refused (an id already indexed)
// would fail the group; and nats.go v1.55.0 has no client for it.

// Bounds of the quick writes' queue.
const (
	quickBatch      = 256
	quickQueue      = 4096
	quickQueueBytes = 16 << 20
)

// quickWrite is one queued record; done is closed once it is durable, or
// given up (logged).
type quickWrite struct {
	*endedWrite
	at   time.Time
	done chan struct{}
}

// quickWrites is the queue and its committer.
type quickWrites struct {
	d   *Delegations
	lag time.Duration // 0: off, every record is written before QueueEnded returns
	// batch, max and maxBytes are quickBatch, quickQueue and
	// quickQueueBytes, smaller in tests.
	batch, max, maxBytes int

	// n is len(pending), read without mu so that stores with nothing
	// queued pay nothing.
	n atomic.Int64
	// kick wakes the committer: a first record queued, a batch full, a
	// write asked for at once.
	kick chan struct{}

	mu sync.Mutex
	// queue holds what waits, oldest first; pending what is queued or
	// being written, by key; bytes what pending holds.
	queue   []*quickWrite
	pending map[string]*quickWrite
	bytes   int
	// urgent asks for a write of all that is queued at once; closed
	// refuses more, once the committer writes what is left.
	urgent bool
	closed bool
}

func newQuickWrites(d *Delegations, lag time.Duration) *quickWrites {
	return &quickWrites{d: d, lag: lag, batch: quickBatch, max: quickQueue, maxBytes: quickQueueBytes,
		kick: make(chan struct{}, 1), pending: map[string]*quickWrite{}}
}

// QueueEnded implements delegation.QuickStore.
func (d *Delegations) QueueEnded(ctx context.Context, r delegation.Record, evs []delegation.Event) error {
	w, err := d.encodeEnded(r, evs)
	if err != nil {
		return err
	}
	if d.quick.add(w) {
		return nil
	}
	err = d.putEnded(ctx, w)
	if err == nil && d.quick.lag > 0 {
		d.s.quickRefused.Store(false) // the store writes again
	}
	return err
}

// add queues w, and says whether it did.
func (q *quickWrites) add(w *endedWrite) bool {
	if q.lag <= 0 || w.folded == nil || !q.d.hints.isNew(w.key) || q.d.s.quickRefused.Load() || q.d.s.writeFailure() != nil {
		return false
	}
	size := w.size()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed || len(q.pending) >= q.max || q.bytes+size > q.maxBytes || q.pending[w.key] != nil {
		return false
	}
	q.queue = append(q.queue, &quickWrite{endedWrite: w, at: time.Now(), done: make(chan struct{})})
	q.pending[w.key] = q.queue[len(q.queue)-1]
	q.n.Add(1)
	q.bytes += size
	if len(q.queue) == 1 || len(q.queue) == q.batch {
		q.wake()
	}
	return true
}

// wake wakes the committer, without waiting.
func (q *quickWrites) wake() {
	select {
	case q.kick <- struct{}{}:
	default:
	}
}

// settle returns once the queued write of key, if there is one, is done,
// having asked for it at once; or when ctx ends, with its error.
func (q *quickWrites) settle(ctx context.Context, key string) error {
	if q == nil || q.n.Load() == 0 {
		return nil
	}
	q.mu.Lock()
	w := q.pending[key]
	if w != nil {
		q.urgent = true
		q.wake()
	}
	q.mu.Unlock()
	if w == nil {
		return nil
	}
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// settleAll is settle for every write queued now.
func (q *quickWrites) settleAll(ctx context.Context) error {
	if q == nil || q.n.Load() == 0 {
		return nil
	}
	q.mu.Lock()
	waits := make([]chan struct{}, 0, len(q.pending))
	for _, w := range q.pending {
		waits = append(waits, w.done)
	}
	if len(waits) > 0 {
		q.urgent = true
		q.wake()
	}
	q.mu.Unlock()
	for _, done := range waits {
		select {
		case <-done:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	return nil
}

// run is the committer: it writes what is queued, as the type says,
// until stop is closed, then what is left.
func (q *quickWrites) run(stop <-chan struct{}) {
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		group, wait := q.next(false)
		if len(group) > 0 {
			q.write(group)
			continue
		}
		var due <-chan time.Time
		if wait > 0 {
			t.Reset(wait)
			due = t.C
		}
		select {
		case <-q.kick:
		case <-due:
		case <-stop:
			t.Stop()
			q.mu.Lock()
			q.closed = true
			q.mu.Unlock()
			for {
				group, _ := q.next(true)
				if len(group) == 0 {
					return
				}
				q.write(group)
			}
		}
		t.Stop()
	}
}

// next takes the group to write now, at most batch records, when one is
// due (or all is, with now); else it says how long until the oldest
// record is, 0 when nothing is queued.
func (q *quickWrites) next(now bool) ([]*quickWrite, time.Duration) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 {
		q.urgent = false
		return nil, 0
	}
	if wait := q.lag - time.Since(q.queue[0].at); !now && !q.urgent && len(q.queue) < q.batch && wait > 0 {
		return nil, wait
	}
	n := min(len(q.queue), q.batch)
	group := make([]*quickWrite, n)
	copy(group, q.queue)
	clear(q.queue[:n])
	q.queue = q.queue[n:]
	if len(q.queue) == 0 {
		q.queue = nil
	}
	return group, 0
}

// write writes a group: each record's index entry and record sent
// without waiting, then every acknowledgement gathered, bounded by the
// store's timeout. A record whose writes failed is written again one by
// one, which completes what the group kept; one that cannot be written
// at all is logged, as lost.
func (q *quickWrites) write(group []*quickWrite) {
	d := q.d
	ctx, cancel := d.s.writeContext(context.Background())
	defer cancel()
	batches := make([]batch, len(group))
	for i, w := range group {
		d.sendTogether(&batches[i], w.key, w.folded, nil)
	}
	var again []*quickWrite
	for i, w := range group {
		acks, err := batches[i].wait(ctx)
		if err != nil {
			d.s.quickRefused.Store(true) // the next ones are written before their answer
			again = append(again, w)
			continue
		}
		d.keptTogether(w.key, acks)
		q.done(w)
	}
	if len(again) == 0 {
		return
	}
	// One more timeout for all of them: a store that does not answer
	// holds a stop up that long at most.
	rctx, rcancel := d.s.writeContext(context.Background())
	defer rcancel()
	for _, w := range again {
		if err := d.putEndedOneByOne(rctx, rctx, w.endedWrite); err != nil {
			d.s.log.Error("state store: the record of a delegation answered at once is lost", "delegation", w.id, "err", err)
		}
		q.done(w)
	}
}

// done takes w, written or given up, off the pending writes.
func (q *quickWrites) done(w *quickWrite) {
	q.mu.Lock()
	if q.pending[w.key] == w {
		delete(q.pending, w.key)
		q.n.Add(-1)
		q.bytes -= w.size()
	}
	q.mu.Unlock()
	close(w.done)
}

var _ delegation.QuickStore = (*Delegations)(nil)
