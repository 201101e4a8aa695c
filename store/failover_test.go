package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/natstest"
	"github.com/orchd/orchd/internal/syncbuf"
	"github.com/orchd/orchd/internal/testwait"
)

// TestFailover_KilledReplicaCarriedOn kills one of three replicas (its
// connection to NATS closes first, so it gives nothing up) and checks its
// delegations are carried on by the two others within the lease TTL and
// a margin, each followed by exactly one replica, the others' own
// delegations left where they were; and that the survivors found them
// from the departure of the dead one, without listing the running
// delegations again.
func TestFailover_KilledReplicaCarriedOn(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a lease TTL")
	}
	const ttl = 2 * time.Second
	f := newFleet(t, ttl)
	r0, r1, r2 := f.replica(t, "r0", nil), f.replica(t, "r1", nil), f.replica(t, "r2", nil)
	victims := r0.delegate(t, 30)
	kept := append(r1.delegate(t, 5), r2.delegate(t, 5)...)
	lists := r1.running.Load() + r2.running.Load()

	r0.kill()
	killed := time.Now()
	testwait.Succeeds(t, 30*time.Second, "the killed replica's delegations carried on", func() error {
		return followedOnce(victims, r1, r2)
	})
	took := time.Since(killed)
	t.Logf("carried on %s after the kill (TTL %s)", took.Round(time.Millisecond), ttl)
	// Expiry takes up to the TTL after the last renewal (the server's
	// clock), and the survivors find it on a 2-core machine under load.
	if limit := ttl + 5*time.Second; took > limit {
		t.Errorf("carried on %s after the kill, over %s", took, limit)
	}
	if n := r1.running.Load() + r2.running.Load(); n != lists {
		t.Errorf("the survivors listed the running delegations %d times to carry them on, want 0", n-lists)
	}
	// A while later: still one follower each, none back and forth.
	time.Sleep(ttl)
	if err := followedOnce(append(victims, kept...), r1, r2); err != nil {
		t.Fatal(err)
	}
	for id, names := range followers(kept[:5], r1, r2) {
		if names[0] != "r1" {
			t.Errorf("r1's delegation %s moved to %v", id, names)
		}
	}
}

// TestFailover_KilledReplicaFoundBeforeItsTTL kills a replica on the
// default TTL: its connection closes, so the survivor finds it gone
// (presence.go) a few renewals after its last, well before its liveness
// key would age out, and carries its delegations on.
func TestFailover_KilledReplicaFoundBeforeItsTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("waits several renewals")
	}
	t.Parallel() // it mostly waits
	const ttl = DefaultLeaseTTL
	f := newFleet(t, ttl)
	r0, r1 := f.replica(t, "r0", nil), f.replica(t, "r1", nil)
	victims := r0.delegate(t, 20)

	r0.kill()
	killed := time.Now()
	testwait.Succeeds(t, 3*ttl, "the killed replica's delegations carried on", func() error {
		return followedOnce(victims, r1)
	})
	took := time.Since(killed)
	t.Logf("carried on %s after the kill (TTL %s)", took.Round(time.Millisecond), ttl)
	// Its key ages out a TTL after its last renewal, at most RenewEvery
	// before the kill.
	if limit := ttl - 2*delegation.RenewEvery(ttl); took > limit {
		t.Errorf("carried on %s after the kill, not before the key could age out (%s)", took, limit)
	}
}

// failingTakes makes the first takes of its members fail as a store out
// of reach would, as many as left says.
type failingTakes struct {
	delegation.Leases
	left atomic.Int64
}

func (f *failingTakes) Join(ctx context.Context, owner string) (delegation.Member, error) {
	m, err := f.Leases.Join(ctx, owner)
	if err != nil {
		return nil, err
	}
	return failingMember{m, f}, nil
}

type failingMember struct {
	delegation.Member
	f *failingTakes
}

func (m failingMember) Take(ctx context.Context, id string) (delegation.Lease, error) {
	if m.f.left.Add(-1) >= 0 {
		return nil, fmt.Errorf("take lease on %s: %w: the test says so", id, delegation.ErrUnavailable)
	}
	return m.Member.Take(ctx, id)
}

// TestFailover_FailedTakesLogAnOutage kills a replica while the
// survivor's takes of its delegations fail for the store, in the look
// the survivor's presence question starts and in the one the deleted
// liveness key starts: the survivor logs one line for all of them, not
// one each, and looks again soon by itself, as no departure is left to
// start a look, rather than at its sweep a minute later.
func TestFailover_FailedTakesLogAnOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("waits several renewals")
	}
	t.Parallel()
	const ttl = 2 * time.Second
	f := newFleet(t, ttl)
	r0 := f.replica(t, "r0", nil)
	var logs syncbuf.Buffer
	f.log = slog.New(slog.NewTextHandler(&logs, nil))
	var fail *failingTakes
	r1 := f.replica(t, "r1", func(l delegation.Leases) delegation.Leases {
		fail = &failingTakes{Leases: l}
		return fail
	})
	victims := r0.delegate(t, 20)
	fail.left.Store(int64(2 * len(victims)))

	r0.kill()
	killed := time.Now()
	testwait.Succeeds(t, 30*time.Second, "the killed replica's delegations carried on", func() error {
		return followedOnce(victims, r1)
	})
	// The sweep would come a minute after r1 started.
	if took := time.Since(killed); took > 20*time.Second {
		t.Errorf("carried on %s after the kill: not by a look made again soon", took)
	}
	if n := fail.left.Load(); n >= 0 {
		t.Fatalf("%d takes were to fail and did not: the test did not test", n+1)
	}
	if n := strings.Count(logs.String(), "take the lease of a running delegation"); n != 1 {
		t.Errorf("%d lines for the failed takes, want 1:\n%s", n, logs.String())
	}
}

// TestFailover_OutageLongerThanTheTTL stops the NATS server under two
// replicas for over two TTLs: each loses its lease and stops following
// its delegations, as the other may take them. Once the server is back they
// join again and carry every delegation on, each followed by one of them.
func TestFailover_OutageLongerThanTheTTL(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out lease TTLs")
	}
	t.Parallel() // it mostly waits
	const ttl = 2 * time.Second
	node := natstest.NewNode(t)
	f := newFleetOn(t, ttl, node.URL())
	r0, r1 := f.replica(t, "r0", nil), f.replica(t, "r1", nil)
	ids := append(r0.delegate(t, 20), r1.delegate(t, 20)...)

	node.Stop()
	testwait.Succeeds(t, 30*time.Second, "every delegation given up in the outage", func() error {
		n := 0
		for _, names := range followers(ids, r0, r1) {
			n += len(names)
		}
		if n > 0 {
			return fmt.Errorf("%d of %d still followed", n, len(ids))
		}
		return nil
	})
	time.Sleep(ttl) // the outage outlasts the TTL, whoever counts it
	node.Start()
	back := time.Now()
	testwait.Succeeds(t, 30*time.Second, "every delegation followed once after the outage", func() error {
		return followedOnce(ids, r0, r1)
	})
	t.Logf("every delegation followed again %s after the server came back", time.Since(back).Round(time.Millisecond))
	time.Sleep(ttl) // and it stays so
	if err := followedOnce(ids, r0, r1); err != nil {
		t.Fatal(err)
	}
}

// pausedLeases are a replica's real leases whose renewals (and joins)
// wait while paused, as a process stopped, or cut off from NATS, would
// not renew: its other work, following its delegations, goes on.
type pausedLeases struct {
	delegation.Leases
	paused atomic.Bool
	// renewed is when a renewal last went through, in Unix nanoseconds.
	renewed atomic.Int64
}

func (p *pausedLeases) wait(ctx context.Context) error {
	for p.paused.Load() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: paused", delegation.ErrUnavailable)
		case <-time.After(10 * time.Millisecond):
		}
	}
	return nil
}

func (p *pausedLeases) Join(ctx context.Context, owner string) (delegation.Member, error) {
	if err := p.wait(ctx); err != nil {
		return nil, err
	}
	m, err := p.Leases.Join(ctx, owner)
	if err != nil {
		return nil, err
	}
	return pausedMember{m, p}, nil
}

type pausedMember struct {
	delegation.Member
	p *pausedLeases
}

func (m pausedMember) Renew(ctx context.Context) error {
	if err := m.p.wait(ctx); err != nil {
		return err
	}
	err := m.Member.Renew(ctx)
	if err == nil {
		m.p.renewed.Store(time.Now().UnixNano())
	}
	return err
}

// pausable starts two replicas sharing leases of the given TTL, the first
// with its renewals paused at will (p), and 20 delegations on the first.
func pausable(t *testing.T, ttl time.Duration) (p *pausedLeases, r0, r1 *replica, ids []string) {
	t.Helper()
	f := newFleet(t, ttl)
	r0 = f.replica(t, "r0", func(l delegation.Leases) delegation.Leases {
		p = &pausedLeases{Leases: l}
		return p
	})
	r1 = f.replica(t, "r1", nil)
	return p, r0, r1, r0.delegate(t, 20)
}

// TestFailover_StallRiddenOut pauses a replica's renewals for most of the
// TTL, starting well into a renewal interval as the earlier schedule
// (a third of the TTL) had it, as a crashed NATS node's election stalls
// writes: the replica keeps its lease and every delegation it follows,
// nobody takes one over, and its renewals go on.
func TestFailover_StallRiddenOut(t *testing.T) {
	if testing.Short() {
		t.Skip("waits most of a lease TTL")
	}
	t.Parallel() // it mostly waits
	// The default TTL, for margins of a second either way.
	const ttl = 10 * time.Second
	p, r0, r1, ids := pausable(t, ttl)

	// A renewal a third of the TTL apart would come next 0.33 TTL after
	// the one seen, so pausing at 0.3 TTL for 0.8 TTL leaves the lease
	// 1.1 TTL without one; a tenth apart, at most 0.9 TTL.
	seen := p.renewed.Load()
	testwait.Until(t, ttl, "a renewal", func() bool { return p.renewed.Load() != seen })
	last := time.Unix(0, p.renewed.Load())
	time.Sleep(time.Until(last.Add(ttl * 3 / 10)))
	p.paused.Store(true)
	time.Sleep(ttl * 8 / 10)
	p.paused.Store(false)
	resumed := time.Now()
	testwait.Until(t, ttl, "a renewal after the stall", func() bool {
		return time.Unix(0, p.renewed.Load()).After(resumed)
	})
	time.Sleep(ttl / 5) // a departure r1 might have seen is acted on
	for id, names := range followers(ids, r0, r1) {
		if len(names) != 1 || names[0] != "r0" {
			t.Errorf("after the stall, delegation %s followed by %v, want r0 alone", id, names)
		}
	}
	if h, err := r0.leases.Holder(t.Context(), ids[0]); err != nil || h != "r0" {
		t.Errorf("Holder(%s) = %q, %v; want r0", ids[0], h, err)
	}
}

// TestFailover_PausedReplicaStops pauses a replica's renewals past the
// TTL: another replica takes its delegations over, and the paused one
// stops following them (by its own clock, before it hears the store say
// so), so each ends up followed once. Resumed, it joins again and takes
// nothing back.
func TestFailover_PausedReplicaStops(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a lease TTL")
	}
	const ttl = 2 * time.Second
	p, r0, r1, ids := pausable(t, ttl)

	p.paused.Store(true)
	testwait.Succeeds(t, 30*time.Second, "the paused replica's delegations followed by the other alone", func() error {
		for id, names := range followers(ids, r0, r1) {
			if len(names) != 1 || names[0] != "r1" {
				return fmt.Errorf("delegation %s followed by %v", id, names)
			}
		}
		return nil
	})
	p.paused.Store(false)
	time.Sleep(2 * ttl) // it renews, finds its lease lost, and joins again
	for id, names := range followers(ids, r0, r1) {
		if len(names) != 1 || names[0] != "r1" {
			t.Errorf("after the pause, delegation %s followed by %v", id, names)
		}
	}
	if h, err := r0.leases.Holder(t.Context(), ids[0]); err != nil || h != "r1" {
		t.Errorf("Holder(%s) = %q, %v; want r1", ids[0], h, err)
	}
}

// TestAdopt_SteadyStateCostsNoList runs two replicas with delegations
// running on each and checks that, while no replica comes or goes, they
// neither list the running delegations nor send NATS more than a few
// messages per lease renewal: their upkeep does not grow with the work.
func TestAdopt_SteadyStateCostsNoList(t *testing.T) {
	if testing.Short() {
		t.Skip("watches several lease ticks")
	}
	const ttl, n = 2 * time.Second, 40
	f := newFleet(t, ttl)
	rs := []*replica{f.replica(t, "r0", nil), f.replica(t, "r1", nil)}
	for _, r := range rs {
		r.delegate(t, n)
	}
	time.Sleep(2 * ttl) // the first polls of the new tasks
	const ticks = 40
	tick := delegation.RenewEvery(ttl)
	lists := make([]int64, len(rs))
	sent := make([]uint64, len(rs))
	for i, r := range rs {
		lists[i], sent[i] = r.running.Load(), r.st.JetStream().Conn().Stats().OutMsgs
	}
	time.Sleep(ticks * tick)
	for i, r := range rs {
		if got := r.running.Load() - lists[i]; got != 0 {
			t.Errorf("%s listed the running delegations %d times in %d renewals, want 0", r.name, got, ticks)
		}
		per := float64(r.st.JetStream().Conn().Stats().OutMsgs-sent[i]) / ticks
		t.Logf("%s: %.1f NATS messages sent per renewal with %d delegations", r.name, per, n)
		if per >= n/4 {
			t.Errorf("%s sent %.1f NATS messages per renewal with %d delegations running, want a few", r.name, per, n)
		}
	}
}
