package delegation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Leases decide which process follows a running delegation, when several
// share a store. Each process holds one liveness lease (Join), which
// expires unless its holder renews it; a running delegation names the
// process that took it (Member.Take), and is that process's while its
// liveness lease lasts. When a process dies its lease expires, the others
// learn of it (Member.Departed) and take its delegations over. The
// daemon's leases live in NATS JetStream (package store); an engine with
// no Leases owns every delegation it knows, as a lone process does.
type Leases interface {
	// Join takes the liveness lease of the process named owner, with a
	// new epoch: delegations taken by an earlier process of that name
	// are not this one's. It fails with an error wrapping ErrLeaseHeld
	// while a live process has that name.
	Join(ctx context.Context, owner string) (Member, error)
	// Holder returns the live process following the delegation, or ""
	// when none does.
	Holder(ctx context.Context, id string) (string, error)
	// TTL is how long a liveness lease lasts unless renewed.
	TTL() time.Duration
}

// Member is a process's held liveness lease.
type Member interface {
	// Renew extends the liveness lease by the TTL. It fails with an error
	// wrapping ErrLeaseLost once the lease expired or another process
	// found it expired: the process must then stop following every
	// delegation it took, and Join again.
	Renew(ctx context.Context) error
	// Leave gives the liveness lease up, for the others to take this
	// process's delegations over at once, and stops watching theirs.
	Leave(ctx context.Context) error
	// Take takes the delegation for this process: one nobody holds, one
	// this process holds already (anew), or one whose holder is gone. It
	// fails with an error wrapping ErrLeaseHeld while a live process
	// holds it.
	Take(ctx context.Context, id string) (Lease, error)
	// Orphans returns the delegations whose holder is gone, and those of
	// running (ids the caller knows run) that nobody took at all, in the
	// order this process is to take them: its share of them first, so
	// the live processes share the work out rather than race for it.
	Orphans(ctx context.Context, running []string) ([]string, error)
	// Departed is signalled when another process may be gone: its
	// liveness lease was given up, expired, or was not renewed in time,
	// or the process is no longer connected to the store while this one
	// renews (the daemon's leases find a dead process so, in a few
	// renewals, a tenth of the TTL each).
	Departed() <-chan struct{}
}

// Lease is a held delegation: this process follows it.
type Lease interface {
	// Release gives the delegation up, for another process to take at
	// once.
	Release(ctx context.Context) error
	// Token increases with every change of holder: a fencing token.
	Token() uint64
}

// Lease errors.
var (
	// ErrLeaseHeld means another owner holds the lease.
	ErrLeaseHeld = errors.New("lease held by another owner")
	// ErrLeaseLost means the lease expired or another owner took it.
	ErrLeaseLost = errors.New("lease lost")
)

// RenewEvery is how often a process renews its liveness lease of the
// given TTL: a tenth of it, at least every 100ms. A renewal is one write
// per process, however many delegations it follows, so renewing often is
// cheap; and a lease rides out a stall of the store's writes as long as
// the TTL less the time since its last renewal. A NATS node that crashes
// while leading the leases' stream stalls them for an election, 5–8.5 s
// measured: renewing a tenth of a 10 s TTL apart rides that out, where a
// third apart (the earlier schedule) lost the lease when the crash came
// late in the interval.
func RenewEvery(ttl time.Duration) time.Duration { return max(ttl/10, 100*time.Millisecond) }

// sweepEvery is how often an engine with Leases lists every running
// delegation to take those nobody took at all (a release after a failed
// resume, or records older than the leases): the safety net under the
// departures, which carry a dead process's delegations on.
func sweepEvery(ttl time.Duration) time.Duration { return max(time.Minute, 6*ttl) }

// member returns this process's liveness lease, joining first when it
// has none (at Start, or after it lost one).
func (e *Engine) member(ctx context.Context) (Member, error) {
	e.memberMu.Lock()
	defer e.memberMu.Unlock()
	if e.joined != nil {
		return e.joined, nil
	}
	if e.leaving != nil {
		return nil, fmt.Errorf("%w: the liveness lease was lost and is not given up yet", ErrUnavailable)
	}
	m, err := e.cfg.Leases.Join(ctx, e.cfg.Instance)
	if err != nil {
		return nil, err
	}
	e.joined, e.renewed = m, time.Now()
	return m, nil
}

// take takes delegation id for this process.
func (e *Engine) take(ctx context.Context, id string) (Lease, error) {
	m, err := e.member(ctx)
	if err != nil {
		return nil, err
	}
	return m.Take(ctx, id)
}

// takeOverLease takes delegation id, which another process may have
// followed, and seals its log when the store can (LogSealer), before
// anything of it is read: an event that process sent before it lost the
// delegation, still on its way, is then refused, rather than take the
// place of this process's event of that number. A seal that fails gives
// the lease back.
func (e *Engine) takeOverLease(ctx context.Context, id string) (Lease, error) {
	lease, err := e.take(ctx, id)
	if err != nil {
		return nil, err
	}
	if ls, ok := e.store.(LogSealer); ok {
		if err := ls.Seal(ctx, id); err != nil {
			release(lease)
			return nil, err
		}
	}
	return lease, nil
}

// keepAlive renews the liveness lease. A lease lost, or not renewed for
// its TTL (the store out of reach: the others may have found it expired),
// stops this process following every delegation it took, since the
// others take them over; it then joins again and carries on those nobody
// took yet. A renewal may take until the lease would expire, no longer,
// so a process stops following its delegations by its own clock when the
// others may take them.
func (e *Engine) keepAlive() {
	e.memberMu.Lock()
	m, renewed := e.joined, e.renewed
	e.memberMu.Unlock()
	ttl := e.cfg.Leases.TTL()
	var err error
	if m != nil {
		deadline := time.Now().Add(ttl / 3)
		if end := renewed.Add(ttl); end.Before(deadline) {
			deadline = end
		}
		ctx, cancel := context.WithDeadline(e.ctx, deadline)
		err = m.Renew(ctx)
		cancel()
		if err == nil {
			e.memberMu.Lock()
			e.renewed = time.Now()
			e.memberMu.Unlock()
			return
		}
		if e.ctx.Err() != nil {
			return
		}
		if !errors.Is(err, ErrLeaseLost) && time.Since(renewed) < ttl {
			e.log.Warn("renew the liveness lease", "error", err)
			return
		}
		e.log.Warn("lost the liveness lease; the other processes follow its delegations now", "error", err)
		e.dropTaken()
		e.memberMu.Lock()
		e.joined, e.leaving = nil, m
		e.memberMu.Unlock()
	}
	ctx, cancel := context.WithTimeout(e.ctx, ttl/3)
	defer cancel()
	e.memberMu.Lock()
	old := e.leaving
	e.memberMu.Unlock()
	if old != nil {
		// The lost lease goes first (its key, should it still hold this
		// process's stamp, would refuse the join), and its watch stops.
		if err := old.Leave(ctx); err != nil {
			e.log.Warn("give the lost liveness lease up", "error", err)
			return
		}
		e.memberMu.Lock()
		e.leaving = nil
		e.memberMu.Unlock()
	}
	_, err = e.member(ctx)
	if err != nil {
		if e.ctx.Err() == nil {
			e.log.Warn("take a liveness lease", "error", err)
		}
		return
	}
	e.adoptOrphans()
}

// dropTaken stops following every delegation this process took: another
// process follows them now, or will.
func (e *Engine) dropTaken() {
	for _, d := range e.liveNow() {
		d.mu.Lock()
		held := d.lease != nil
		d.lease = nil
		d.mu.Unlock()
		if !held {
			continue
		}
		d.stop()
		d.mu.Lock()
		if d.life.timer != nil {
			d.life.timer.Stop() // its new owner keeps the deadline
		}
		d.mu.Unlock()
		e.forget(d.rec.ID)
	}
}

// leave gives the liveness lease up, at Close, so another process takes
// this one's delegations over at once rather than after the TTL.
func (e *Engine) leave() {
	e.memberMu.Lock()
	ms := []Member{e.joined, e.leaving}
	e.joined, e.leaving = nil, nil
	e.memberMu.Unlock()
	for _, m := range ms {
		if m == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = m.Leave(ctx)
		cancel()
	}
}

// adoptOrphans carries on the delegations whose holder is gone, in the
// order Member.Orphans gives, so the processes left share them out
// rather than race for each in turn; those nobody took at all are the
// sweep's (adopt). It reports whether the look is to be made again soon:
// the store kept it from reading the owner records, or from taking some
// of them, and no departure may come to start another (lookAgain).
func (e *Engine) adoptOrphans() (again bool) {
	m, err := e.member(e.ctx)
	if err != nil {
		return errors.Is(err, ErrUnavailable)
	}
	ids, err := m.Orphans(e.ctx, nil)
	if err != nil {
		if e.ctx.Err() == nil {
			e.log.Warn("look for delegations to carry on", "error", err)
		}
		return errors.Is(err, ErrUnavailable)
	}
	return e.adoptAll(e.ctx, ids, false)
}

// lookAgain returns when to look for delegations to carry on again
// after a look the store kept from finishing (adoptOrphans), nil when
// none is due: half the lease TTL later, at least a second, rather than
// at the next sweep, a minute or more away.
func (e *Engine) lookAgain(again bool) <-chan time.Time {
	if !again {
		return nil
	}
	return time.After(max(e.cfg.Leases.TTL()/2, time.Second))
}

// adoptWorkers bounds how many delegations one look carries on at once.
// Each mostly waits for the store's round trips (its record, its log's
// tail, its lease): carried on one after the other, 3,000 delegations
// took 7 s of a start after kill -9; a few dozen at once keep the store
// busy without flooding it.
const adoptWorkers = 32

// readTogether is how many delegations adoptAll reads with one call to
// a ManyReader (about a megabyte of records), and readersTogether how
// many such calls it makes at once: decoding the records is most of a
// call's work, and a start has nothing else to do.
const (
	readTogether    = 1000
	readersTogether = 4
)

// adoptAll runs adoptOne on each id not live here, adoptWorkers at a
// time, and returns once all are done; feedAdoptions reads them together
// when it can. At a start (gather set), their
// agents are asked for their tasks again (reopenAndFollow) only once all
// are read: while the store is read for every delegation nothing else
// competes for it, and the process is ready sooner. Otherwise (another
// process departed) each is followed again as soon as it is taken: what
// counts then is how soon the work is followed again. It reports whether
// the store kept some lease from being taken.
func (e *Engine) adoptAll(ctx context.Context, ids []string, gather bool) (takeFailed bool) {
	start := time.Now()
	next := make(chan adoption)
	var mu sync.Mutex
	var carried int
	var follows []func()
	var wg sync.WaitGroup
	for range min(adoptWorkers, len(ids)) {
		wg.Go(func() {
			for a := range next {
				follow, ok, unavailable := e.adoptOne(ctx, a.id, a.read)
				if follow != nil && !gather {
					follow()
					follow = nil
				}
				mu.Lock()
				if ok {
					carried++
				}
				takeFailed = takeFailed || unavailable
				if follow != nil {
					follows = append(follows, follow)
				}
				mu.Unlock()
			}
		})
	}
	e.feedAdoptions(ctx, ids, next)
	close(next)
	wg.Wait()
	for _, f := range follows {
		f()
	}
	if carried > 0 {
		e.log.Info("carrying on running delegations", "delegations", carried, "took", time.Since(start).Round(time.Millisecond))
	}
	return takeFailed
}

// adoption is a delegation for adoptOne to carry on, with what a
// ManyReader read of it (nil: adoptOne reads its record).
type adoption struct {
	id   string
	read *Read
}

// feedAdoptions sends each of ids not live here to next, until ctx is
// done. With no Leases, a store that is a ManyReader reads them first,
// readTogether in a call and readersTogether calls at once; one that
// fails leaves its delegations for adoptOne to read one by one.
func (e *Engine) feedAdoptions(ctx context.Context, ids []string, next chan<- adoption) {
	many, _ := e.store.(ManyReader)
	if e.cfg.Leases != nil {
		many = nil // a record is read once its lease is taken
	}
	feed := func(chunk []string) {
		var reads map[string]Read
		if many != nil {
			var err error
			if reads, err = many.ReadMany(ctx, chunk); err != nil && ctx.Err() == nil {
				e.log.Warn("could not read running delegations together; reading them one by one", "delegations", len(chunk), "error", err)
			}
		}
		for _, id := range chunk {
			if _, live := e.Get(id); live {
				continue
			}
			a := adoption{id: id}
			if r, ok := reads[id]; ok {
				a.read = &r
			}
			select {
			case next <- a:
			case <-ctx.Done():
				return
			}
		}
	}
	readers := 1
	if many != nil {
		readers = readersTogether
	}
	chunks := make(chan []string)
	var feeders sync.WaitGroup
	for range readers {
		feeders.Go(func() {
			for chunk := range chunks {
				feed(chunk)
			}
		})
	}
	for chunk := range slices.Chunk(ids, readTogether) {
		chunks <- chunk
	}
	close(chunks)
	feeders.Wait()
}

// release gives a lease up, if there is one, bounded in time.
func release(l Lease) {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.Release(ctx)
}
