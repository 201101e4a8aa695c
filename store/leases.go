package store

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/delegation"
)

// LeasesConfig tunes the leases.
type LeasesConfig struct {
	// TTL is how long a process's liveness lease lasts unless renewed:
	// whole seconds, at least 1s. 0 means DefaultLeaseTTL. Holders renew
	// well within it (a third of it, say), since the clock that counts is
	// the server's.
	TTL time.Duration
}

// DefaultLeaseTTL is the lease TTL unless LeasesConfig says otherwise.
const DefaultLeaseTTL = 10 * time.Second

// maxOwnerLen bounds a lease owner's name.
const maxOwnerLen = 256

// Leases decide which process follows each running delegation, at a cost
// that grows with what changes rather than with the running work. It
// implements delegation.Leases, and every error from a store that cannot
// be reached wraps delegation.ErrUnavailable.
//
//   - Liveness: each process holds one lease, the key replica.<name> in
//     the bucket <namespace>-leases, whose TTL is the lease TTL. Its value
//     is the process's stamp: a random epoch, new at every Join (but see
//     Join on one that failed), and its name. Join creates the key; Renew
//     rewrites it expecting the revision it last wrote, which restarts its
//     age: one write per process per renewal, however many delegations it
//     follows. A key not renewed within the TTL ages out, and the bucket
//     leaves a marker that watchers see.
//   - Ownership: each running delegation's key in <namespace>-owners
//     (no TTL) holds the stamp of the process following it, written once
//     when it takes the delegation and purged when it gives it up. It is
//     never renewed: it is held while its stamp's liveness key holds it
//     and was written within the TTL (plus leaseSkew).
//
// A process whose liveness key is gone, or holds another epoch, or is
// older than that, or that is no longer connected to the store while the
// others renew (presence.go), is gone: whoever first sees so deletes the key,
// expecting the revision it read, so its holder's next renewal fails and
// it stops following its delegations, and every process may then take
// them, each with a write expecting the owner record's revision.
type Leases struct {
	s      *Store
	live   jetstream.KeyValue
	owners jetstream.KeyValue
	ttl    time.Duration

	// mu guards unsure and gone.
	mu sync.Mutex
	// unsure holds, by owner, the stamp of the last Join that failed for
	// the store: its create may have been kept and its acknowledgement
	// lost (nats.go sends what it buffered once it reconnects, after the
	// request timed out). The next Join as that owner uses that stamp, so
	// it finds such a key its own, not another live process's.
	unsure map[string]string
	// gone holds, by stamp, the revision of the liveness key at which a
	// member was found no longer connected (presence.go).
	gone map[string]uint64
}

// Leases sets up the buckets, creating them or setting their TTL to
// cfg's, and returns the leases on them. All processes sharing a
// namespace must use one TTL: the last to start sets it.
func (s *Store) Leases(ctx context.Context, cfg LeasesConfig) (*Leases, error) {
	if cfg.TTL == 0 {
		cfg.TTL = DefaultLeaseTTL
	}
	if cfg.TTL < time.Second || cfg.TTL%time.Second != 0 {
		return nil, fmt.Errorf("leases: ttl %s is not a whole number of seconds of at least 1s", cfg.TTL)
	}
	live, err := s.ensureKV(ctx, jetstream.KeyValueConfig{
		Bucket: s.cfg.Namespace + "-leases", Description: "orchd liveness leases", History: 1,
		TTL: cfg.TTL, Storage: jetstream.FileStorage, Replicas: s.cfg.Replicas,
		// A key that ages out leaves a marker, so watchers learn of it.
		LimitMarkerTTL: leaseMarkerTTL,
	})
	if err != nil {
		return nil, err
	}
	owners, err := s.ensureKV(ctx, jetstream.KeyValueConfig{
		Bucket: s.cfg.Namespace + "-owners", Description: "orchd owners of running delegations", History: 1,
		Storage: jetstream.FileStorage, Replicas: s.cfg.Replicas,
		// Per-message TTLs, for purges that go (ownerPurgeTTL).
		LimitMarkerTTL: leaseMarkerTTL,
	})
	if err != nil {
		return nil, err
	}
	return &Leases{s: s, live: live, owners: owners, ttl: cfg.TTL, unsure: map[string]string{}, gone: map[string]uint64{}}, nil
}

const (
	// leaseSkew is how much longer than the TTL a liveness key not
	// renewed is still its holder's: room for clocks that differ between
	// orchd and the NATS server.
	leaseSkew = time.Second
	// leaseMarkerTTL is how long the buckets keep a marker: of a key
	// that aged out, or of a purge.
	leaseMarkerTTL = time.Second
	// livePrefix is what liveness keys start with.
	livePrefix = "replica."
)

// TTL implements delegation.Leases.
func (l *Leases) TTL() time.Duration { return l.ttl }

// stamp is a process's liveness value and the value of its owner
// records: "<epoch> <name>".
func stamp(epoch, owner string) string { return epoch + " " + owner }

// ownerOf returns the name in a stamp.
func ownerOf(v []byte) string {
	_, owner, _ := strings.Cut(string(v), " ")
	return owner
}

// liveKey is the liveness key of the process named owner.
func liveKey(owner string) (string, error) {
	if owner == "" || len(owner) > maxOwnerLen {
		return "", fmt.Errorf("%w: owner must be 1 to %d bytes", delegation.ErrBadRequest, maxOwnerLen)
	}
	if plainToken(owner) {
		return livePrefix + owner, nil
	}
	return livePrefix + "=" + base64.RawURLEncoding.EncodeToString([]byte(owner)), nil
}

// Join implements delegation.Leases: it creates owner's liveness key with
// a new epoch. A key of that name nobody renewed within the TTL is taken
// over; one renewed since is another live process's, and Join fails with
// an error wrapping delegation.ErrLeaseHeld. A key holding the stamp of
// this join, or of the last join as owner that failed for the store, is
// this process's own, written by a try whose acknowledgement was lost.
func (l *Leases) Join(ctx context.Context, owner string) (delegation.Member, error) {
	key, err := liveKey(owner)
	if err != nil {
		return nil, fmt.Errorf("join as %q: %w", owner, err)
	}
	m := &member{l: l, owner: owner, key: key, stamp: l.joinStamp(owner),
		departed: make(chan struct{}, 1), stop: make(chan struct{}), orphans: map[string]uint64{}}
	octx, cancel := l.s.opContext(ctx)
	defer cancel()
	sub, err := m.listen(octx)
	if err != nil {
		l.setUnsure(owner, m.stamp) // for the next join: it may be a failed join's
		return nil, fmt.Errorf("join as %s: %w", owner, l.s.unavailable(ctx, err))
	}
	conn := l.s.connection()
	err = attempt(octx, func() (err error) {
		m.rev, err = l.live.Create(octx, key, []byte(m.stamp))
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
		e, err := l.live.Get(octx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			m.rev, err = l.live.Create(octx, key, []byte(m.stamp))
			return err
		}
		if err != nil {
			return err
		}
		if !l.stale(e) {
			if string(e.Value()) == m.stamp {
				m.rev = e.Revision() // kept before, its acknowledgement lost
				return nil
			}
			return fmt.Errorf("%w: a live process is named %s", delegation.ErrLeaseHeld, owner)
		}
		m.rev, err = l.live.Update(octx, key, []byte(m.stamp), e.Revision())
		if isWrongLastSequence(err) {
			return fmt.Errorf("%w: a live process is named %s", delegation.ErrLeaseHeld, owner)
		}
		return err
	})
	if err != nil {
		_ = sub.Unsubscribe()
	}
	if errors.Is(err, delegation.ErrLeaseHeld) {
		return nil, fmt.Errorf("join as %s: %w", owner, err)
	}
	if err != nil {
		l.setUnsure(owner, m.stamp)
		return nil, fmt.Errorf("join as %s: %w", owner, l.s.unavailable(ctx, err))
	}
	l.s.renewed(conn)
	m.sub = sub
	w, err := l.live.Watch(l.s.bg, livePrefix+">")
	if err != nil {
		if lerr := m.Leave(ctx); lerr != nil {
			l.setUnsure(owner, m.stamp) // the key may outlive this join
		}
		return nil, fmt.Errorf("join as %s: watch the others: %w", owner, l.s.unavailable(ctx, err))
	}
	m.done = make(chan struct{})
	l.s.wg.Go(func() { m.watch(w) })
	return m, nil
}

// joinStamp is the stamp of a join as owner: the last failed join's, if
// any (see unsure), which it takes so that no concurrent join shares it,
// or a new epoch's.
func (l *Leases) joinStamp(owner string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st, ok := l.unsure[owner]; ok {
		delete(l.unsure, owner)
		return st
	}
	var b [8]byte
	_, _ = crand.Read(b[:]) // never fails
	return stamp(hex.EncodeToString(b[:]), owner)
}

// setUnsure remembers st as the stamp of a failed join as owner, whose
// key may be stored, for the next join to use.
func (l *Leases) setUnsure(owner, st string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unsure[owner] = st
}

// stale reports whether a liveness key was last written longer than the
// TTL ago (plus leaseSkew): its holder is gone, whether or not the
// bucket has removed the key yet (JetStream removes aged keys when it
// gets to it, later under load).
func (l *Leases) stale(e jetstream.KeyValueEntry) bool {
	return time.Since(e.Created()) > l.ttl+leaseSkew
}

// alive reports whether the process whose stamp is st is live: its
// liveness key holds st, is not stale, and was not found disconnected at
// its revision (presence.go). Such a key is deleted, expecting the
// revision read, so its holder finds out at its next renewal; a key
// renewed meanwhile is live after all.
func (l *Leases) alive(ctx context.Context, st string) (bool, error) {
	owner := ownerOf([]byte(st))
	if owner == "" || len(owner) > maxOwnerLen {
		return false, nil // no process has such a name
	}
	key, _ := liveKey(owner)
	e, err := l.live.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if string(e.Value()) != st {
		return false, nil // its process joined again since: this one is gone
	}
	if !l.stale(e) && !l.judgedGone(st, e.Revision()) {
		return true, nil
	}
	err = l.live.Delete(ctx, key, jetstream.LastRevision(e.Revision()))
	if isWrongLastSequence(err) {
		return true, nil
	}
	return false, err
}

// Holder implements delegation.Leases: the name in the delegation's owner
// record, while that process is live.
func (l *Leases) Holder(ctx context.Context, id string) (string, error) {
	key, err := delegationKey(id)
	if err != nil {
		return "", nil // nobody can hold a lease on this id
	}
	octx, cancel := l.s.opContext(ctx)
	defer cancel()
	var holder string
	err = attempt(octx, func() error {
		e, err := l.owners.Get(octx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			holder = ""
			return nil
		}
		if err != nil {
			return err
		}
		ok, err := l.alive(octx, string(e.Value()))
		if ok {
			holder = ownerOf(e.Value())
		} else {
			holder = ""
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("lease holder of %s: %w", id, l.s.unavailable(ctx, err))
	}
	return holder, nil
}

// member is a process's liveness lease, and what it watches of the
// others'.
type member struct {
	l          *Leases
	owner, key string
	stamp      string
	departed   chan struct{}
	stop, done chan struct{}
	// sub is the subscription to the member's presence subject.
	sub *nats.Subscription

	mu       sync.Mutex
	rev      uint64 // of the liveness key, as this process last wrote it
	lost     bool
	left     bool
	stopOnce sync.Once
	// orphans are the owner records the last Orphans found, with their
	// revisions: Take expects that revision, one write.
	orphans map[string]uint64
}

// Renew implements delegation.Member.
func (m *member) Renew(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lost || m.left {
		return fmt.Errorf("renew the lease of %s: %w", m.owner, delegation.ErrLeaseLost)
	}
	octx, cancel := m.l.s.opContext(ctx)
	defer cancel()
	conn := m.l.s.connection()
	var rev uint64
	err := attempt(octx, func() (err error) {
		rev, err = m.l.live.Update(octx, m.key, []byte(m.stamp), m.rev)
		if isWrongLastSequence(err) {
			// A renewal that timed out may have been written all the
			// same: a key holding this stamp is this process's, as
			// nobody else writes it.
			cur, ok := m.current(octx)
			if ok {
				rev, err = m.l.live.Update(octx, m.key, []byte(m.stamp), cur)
			}
		}
		return err
	})
	if isWrongLastSequence(err) || errors.Is(err, jetstream.ErrKeyNotFound) {
		m.lost = true
		m.l.s.leaseLost()
		return fmt.Errorf("renew the lease of %s: %w", m.owner, delegation.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("renew the lease of %s: %w", m.owner, m.l.s.unavailable(ctx, err))
	}
	m.rev = rev
	m.l.s.renewed(conn)
	return nil
}

// Leave implements delegation.Member: it deletes the liveness key if it
// is still this one's, and stops watching the others.
func (m *member) Leave(ctx context.Context) error {
	m.stopOnce.Do(func() { close(m.stop) })
	if m.done != nil {
		<-m.done
	}
	if m.sub != nil {
		_ = m.sub.Unsubscribe()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.lost || m.left {
		return nil
	}
	octx, cancel := m.l.s.opContext(ctx)
	defer cancel()
	err := attempt(octx, func() error {
		err := m.l.live.Delete(octx, m.key, jetstream.LastRevision(m.rev))
		if cur, ok := m.current(octx); ok && isWrongLastSequence(err) {
			err = m.l.live.Delete(octx, m.key, jetstream.LastRevision(cur)) // see Renew
		}
		return err
	})
	if err != nil && !isWrongLastSequence(err) && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("leave as %s: %w", m.owner, m.l.s.unavailable(ctx, err))
	}
	m.left = true
	return nil
}

// current returns the revision of the liveness key when it holds this
// process's stamp.
func (m *member) current(ctx context.Context) (uint64, bool) {
	e, err := m.l.live.Get(ctx, m.key)
	if err != nil || string(e.Value()) != m.stamp {
		return 0, false
	}
	return e.Revision(), true
}

// Departed implements delegation.Member.
func (m *member) Departed() <-chan struct{} { return m.departed }

// signal tells the engine another process may be gone.
func (m *member) signal() {
	select {
	case m.departed <- struct{}{}:
	default:
	}
}

// watched is another process as the watch last saw it.
type watched struct {
	stamp string
	rev   uint64    // of its liveness key, as last seen
	seen  time.Time // when it last renewed, by this clock
	told  time.Time // when the engine was last told it may be gone
	// since counts this process's own renewals the watch delivered after
	// the other's last (presence.go); probing says a probe is out, asked
	// when it was sent.
	since   int
	probing bool
	asked   time.Time
}

// probed is what a probe of a watched process found.
type probed struct {
	key, stamp string
	rev        uint64
	connected  bool
}

// watch follows the liveness keys until Leave or the store closes: a key
// deleted or aged out, or holding a new epoch, means its process (as it
// was) is gone; one not renewed within the TTL plus leaseSkew, by this
// process's clock, probably is; so is one no longer connected to the
// store once this process's own renewals went on without it
// (presence.go). Each is signalled on Departed, one not renewed at most
// every third of the TTL while it stays.
func (m *member) watch(w jetstream.KeyWatcher) {
	defer close(m.done)
	var probes sync.WaitGroup
	defer probes.Wait()
	quit := make(chan struct{})
	defer close(quit) // before probes.Wait: a probe's answer is not awaited
	defer func() { _ = w.Stop() }()
	others := map[string]*watched{}
	every := max(m.l.ttl/10, 100*time.Millisecond)
	check := time.NewTicker(every)
	defer check.Stop()
	answers := make(chan probed)
	for {
		select {
		case <-m.stop:
			return
		case <-m.l.s.done:
			return
		case <-m.l.s.reconnectedSignal():
			// The fence refuses this process's writes until a renewal
			// goes through on the new connection (presence.go).
			ctx, cancel := m.l.s.opContext(m.l.s.bg)
			_ = m.Renew(ctx) // a lease lost is the engine's to act on, at its next renewal
			cancel()
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue // the initial values are all in
			}
			if e.Key() == m.key {
				if e.Operation() == jetstream.KeyValuePut {
					for _, o := range others {
						o.since++
					}
				}
				continue
			}
			o, known := others[e.Key()]
			if e.Operation() != jetstream.KeyValuePut {
				if known {
					delete(others, e.Key())
					m.l.forget(o.stamp)
					m.signal()
				}
				continue
			}
			if known && o.stamp != string(e.Value()) {
				m.l.forget(o.stamp)
				m.signal()
			}
			others[e.Key()] = &watched{stamp: string(e.Value()), rev: e.Revision(), seen: time.Now()}
		case a := <-answers:
			o, ok := others[a.key]
			if !ok || o.stamp != a.stamp {
				continue
			}
			o.probing = false
			if !a.connected && o.rev == a.rev {
				m.l.s.log.Info("a replica is not connected to the state store and stopped renewing its lease; taking its delegations over",
					"replica", ownerOf([]byte(o.stamp)), "own_renewals_since_its_last", o.since)
				m.l.judge(o.stamp, o.rev)
				o.told = time.Now()
				m.signal()
			}
		case now := <-check.C:
			for key, o := range others {
				if now.Sub(o.seen) > m.l.ttl+leaseSkew && now.Sub(o.told) > m.l.ttl/3 {
					o.told = now
					m.signal()
				}
				if o.since >= suspectAfter && !o.probing && now.Sub(o.asked) >= every {
					o.probing, o.asked = true, now
					q := probed{key: key, stamp: o.stamp, rev: o.rev}
					probes.Go(func() {
						q.connected = m.l.probe(m.l.s.bg, q.stamp, every)
						select {
						case answers <- q:
						case <-quit:
						}
					})
				}
			}
		}
	}
}

// Take implements delegation.Member. Taking a delegation this process
// holds already gives it anew, with a new token.
func (m *member) Take(ctx context.Context, id string) (delegation.Lease, error) {
	key, err := delegationKey(id)
	if err != nil {
		return nil, fmt.Errorf("take lease: %w: %w", delegation.ErrBadRequest, err)
	}
	m.mu.Lock()
	rev, orphan := m.orphans[key]
	delete(m.orphans, key)
	m.mu.Unlock()
	octx, cancel := m.l.s.opContext(ctx)
	defer cancel()
	var le delegation.Lease
	err = attempt(octx, func() (err error) {
		if orphan {
			le, err = m.takeOrphan(octx, id, key, rev)
		} else {
			le, err = m.take(octx, id, key)
		}
		return err
	})
	if errors.Is(err, delegation.ErrLeaseHeld) {
		return nil, fmt.Errorf("take lease on %s: %w", id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("take lease on %s: %w", id, m.l.s.unavailable(ctx, err))
	}
	return le, nil
}

// takeOrphan takes an owner record Orphans found, expecting the revision
// it read then: anything written since means another process took it.
func (m *member) takeOrphan(ctx context.Context, id, key string, rev uint64) (delegation.Lease, error) {
	if err := m.l.s.fenced(); err != nil {
		return nil, err
	}
	got, err := m.l.owners.Update(ctx, key, []byte(m.stamp), rev)
	if isWrongLastSequence(err) {
		return nil, fmt.Errorf("%w: taken meanwhile", delegation.ErrLeaseHeld)
	}
	if err != nil {
		return nil, err
	}
	return &lease{m: m, id: id, key: key, rev: got}, nil
}

func (m *member) take(ctx context.Context, id, key string) (delegation.Lease, error) {
	if err := m.l.s.fenced(); err != nil {
		return nil, err
	}
	// A record released between the failed create and the read is free
	// again: one more try takes it.
	for range 2 {
		rev, err := m.l.owners.Create(ctx, key, []byte(m.stamp))
		if err == nil {
			return &lease{m: m, id: id, key: key, rev: rev}, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, err
		}
		e, err := m.l.owners.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if holder := string(e.Value()); holder != m.stamp {
			live, err := m.l.alive(ctx, holder)
			if err != nil {
				return nil, err
			}
			if live {
				return nil, fmt.Errorf("%w: %s holds it", delegation.ErrLeaseHeld, ownerOf(e.Value()))
			}
		}
		// Ours, or its holder is gone: the update takes it only if
		// nobody took it meanwhile.
		return m.takeOrphan(ctx, id, key, e.Revision())
	}
	return nil, fmt.Errorf("%w: it kept changing hands", delegation.ErrLeaseHeld)
}

// Orphans implements delegation.Member: it reads the liveness keys,
// deleting the stale ones as alive does, then every owner record, and
// returns the delegations whose record names no live process, and those
// of running that have none. Its cost is the few liveness keys and one
// pass over the owner records (streamed, not a read each).
func (m *member) Orphans(ctx context.Context, running []string) ([]string, error) {
	octx, cancel := m.l.s.opContext(ctx)
	defer cancel()
	var ids []string
	err := attempt(octx, func() (err error) {
		ids, err = m.orphansOnce(octx, running)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("look for delegations nobody follows: %w", m.l.s.unavailable(ctx, err))
	}
	return ids, nil
}

func (m *member) orphansOnce(ctx context.Context, running []string) ([]string, error) {
	live := map[string]bool{}
	names, err := listKeys(ctx, m.l.s.js, m.l.live, livePrefix+">")
	if err != nil {
		return nil, err
	}
	for _, k := range names {
		e, err := m.l.live.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ok, err := m.l.alive(ctx, string(e.Value()))
		if err != nil {
			return nil, err
		}
		if ok {
			live[string(e.Value())] = true
		}
	}
	w, err := m.l.owners.WatchAll(ctx, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, err
	}
	defer stopWatch(w, listDrainWait)
	owned := map[string]bool{}
	orphans := map[string]uint64{}
	var ids []string
	err = readInitial(ctx, w, func(e jetstream.KeyValueEntry) error {
		owned[e.Key()] = true
		if live[string(e.Value())] {
			return nil
		}
		if id, err := delegationID(e.Key()); err == nil {
			orphans[e.Key()] = e.Revision()
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range running {
		if key, err := delegationKey(id); err == nil && !owned[key] {
			ids = append(ids, id)
		}
	}
	m.mu.Lock()
	m.orphans = orphans
	m.mu.Unlock()
	ids, _ = shareOut(ids, m.stamp, slices.Collect(maps.Keys(live)))
	return ids, nil
}

// shareOut orders ids for the process whose stamp is self to take them,
// the live processes being those of stamps: first its share, the ids for
// which self ranks highest among them (rendezvous hashing: every process
// computes the same shares, with no word between them, and a departure
// moves only the departed's share), then the others' shares, should their
// processes not take them. Each part is shuffled, so processes that do
// race for an id are unlikely to meet on many. n is the share's length.
func shareOut(ids []string, self string, stamps []string) (ordered []string, n int) {
	score := func(st, id string) uint64 {
		sum := sha256.Sum256([]byte(st + "\x00" + id))
		return binary.BigEndian.Uint64(sum[:8])
	}
	var mine, theirs []string
	for _, id := range ids {
		own := score(self, id)
		top := true
		for _, st := range stamps {
			if st != self && score(st, id) > own {
				top = false
				break
			}
		}
		if top {
			mine = append(mine, id)
		} else {
			theirs = append(theirs, id)
		}
	}
	rand.Shuffle(len(mine), func(i, j int) { mine[i], mine[j] = mine[j], mine[i] })
	rand.Shuffle(len(theirs), func(i, j int) { theirs[i], theirs[j] = theirs[j], theirs[i] })
	return append(mine, theirs...), len(mine)
}

// lease is a held owner record: the revision this process wrote, which
// its release expects.
type lease struct {
	m        *member
	id, key  string
	mu       sync.Mutex
	rev      uint64
	released bool
}

// Release implements delegation.Lease: it purges the owner record if it
// is still this one, so another process can take the delegation at once.
// Releasing a lease taken since by another, or released, does nothing.
func (le *lease) Release(ctx context.Context) error {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.released {
		return nil
	}
	octx, cancel := le.m.l.s.opContext(ctx)
	defer cancel()
	err := attempt(octx, func() error {
		return le.m.l.owners.Purge(octx, le.key, jetstream.LastRevision(le.rev), jetstream.PurgeTTL(leaseMarkerTTL))
	})
	if err != nil && !isWrongLastSequence(err) && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("release lease on %s: %w", le.id, le.m.l.s.unavailable(ctx, err))
	}
	le.released = true
	return nil
}

// Token implements delegation.Lease: the revision of the owner record as
// this process wrote it. Every take writes the record anew at a higher
// revision, so tokens grow with every change of holder.
func (le *lease) Token() uint64 { return le.rev }

// delegationID is delegationKey's inverse.
func delegationID(key string) (string, error) {
	enc, ok := strings.CutPrefix(key, "=")
	if !ok {
		return key, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	return string(b), err
}

var (
	_ delegation.Leases = (*Leases)(nil)
	_ delegation.Member = (*member)(nil)
	_ delegation.Lease  = (*lease)(nil)
)
