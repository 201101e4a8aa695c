package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/natstest"
	"github.com/orchd/orchd/internal/testwait"
)

func leasesOf(t *testing.T, s *Store, ttl time.Duration) *Leases {
	t.Helper()
	l, err := s.Leases(t.Context(), LeasesConfig{TTL: ttl})
	if err != nil {
		t.Fatalf("Leases: %v", err)
	}
	return l
}

// join takes the liveness lease of the process named owner.
func join(t *testing.T, l *Leases, owner string) delegation.Member {
	t.Helper()
	m, err := l.Join(t.Context(), owner)
	if err != nil {
		t.Fatalf("Join(%s): %v", owner, err)
	}
	return m
}

func holder(t *testing.T, l *Leases, id string) string {
	t.Helper()
	h, err := l.Holder(t.Context(), id)
	if err != nil {
		t.Fatalf("Holder(%s): %v", id, err)
	}
	return h
}

func TestLeases_Config(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{})
	for _, ttl := range []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, -time.Second} {
		if _, err := s.Leases(t.Context(), LeasesConfig{TTL: ttl}); err == nil {
			t.Errorf("Leases(TTL %s) accepted", ttl)
		}
	}
	if l := leasesOf(t, s, 0); l.TTL() != DefaultLeaseTTL {
		t.Errorf("default TTL = %s", l.TTL())
	}
}

func TestLeases_TakeHeldRelease(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{})
	l := leasesOf(t, s, 10*time.Second)
	if h := holder(t, l, "d1"); h != "" {
		t.Fatalf("holder before any take = %q", h)
	}
	procA, procB := join(t, l, "proc-a"), join(t, l, "proc-b")
	a, err := procA.Take(t.Context(), "d1")
	if err != nil {
		t.Fatal(err)
	}
	if h := holder(t, l, "d1"); h != "proc-a" {
		t.Fatalf("holder = %q, want proc-a", h)
	}
	for _, tc := range []struct {
		id, owner string
		want      error
	}{
		{"d1", "proc-b", delegation.ErrLeaseHeld},
		{"", "proc-b", delegation.ErrBadRequest},
		{"d2", "", delegation.ErrBadRequest},
	} {
		var err error
		if tc.owner == "" {
			_, err = l.Join(t.Context(), tc.owner)
		} else {
			_, err = procB.Take(t.Context(), tc.id)
		}
		if !errors.Is(err, tc.want) {
			t.Errorf("Take(%q) by %q = %v, want %v", tc.id, tc.owner, err, tc.want)
		}
	}
	if _, err := l.Join(t.Context(), "proc-a"); !errors.Is(err, delegation.ErrLeaseHeld) {
		t.Errorf("Join under a live process's name = %v, want ErrLeaseHeld", err)
	}
	_, err = procB.Take(t.Context(), "d1")
	if err == nil || !errors.Is(err, delegation.ErrLeaseHeld) || errors.Is(err, delegation.ErrLeaseLost) {
		t.Fatalf("Take by another = %v", err)
	}
	// Another delegation's lease is separate.
	if _, err := procB.Take(t.Context(), "d2"); err != nil {
		t.Fatalf("Take(d2): %v", err)
	}
	if err := procA.Renew(t.Context()); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	// Release frees it at once; the new holder's token is higher.
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h := holder(t, l, "d1"); h != "" {
		t.Errorf("holder after release = %q", h)
	}
	b, err := procB.Take(t.Context(), "d1")
	if err != nil {
		t.Fatalf("Take after release: %v", err)
	}
	if b.Token() <= a.Token() {
		t.Errorf("token after a change of holder %d, not above %d", b.Token(), a.Token())
	}
	if err := a.Release(t.Context()); err != nil {
		t.Errorf("second Release = %v, want nil", err)
	}
	if h := holder(t, l, "d1"); h != "proc-b" {
		t.Errorf("a stale release freed the new holder's lease: holder %q", h)
	}
	// The holder taking again gets it anew; the lease it had is stale.
	b2, err := procB.Take(t.Context(), "d1")
	if err != nil || b2.Token() <= b.Token() {
		t.Fatalf("retake by the holder = %v, token %d after %d", err, b2.Token(), b.Token())
	}
	if err := b.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h := holder(t, l, "d1"); h != "proc-b" {
		t.Errorf("a release of the lease taken anew freed it: holder %q", h)
	}
	// A process that leaves holds nothing any more: another takes its
	// delegations at once, and its renewals fail.
	if err := procB.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h := holder(t, l, "d2"); h != "" {
		t.Errorf("holder of d2 after its process left = %q", h)
	}
	if err := procB.Renew(t.Context()); !errors.Is(err, delegation.ErrLeaseLost) {
		t.Errorf("Renew after Leave = %v, want ErrLeaseLost", err)
	}
	if _, err := procA.Take(t.Context(), "d2"); err != nil {
		t.Errorf("Take of a departed process's delegation: %v", err)
	}
}

// TestLeases_Expiry checks renewals keep a process's leases past the
// TTL, and that once they stop its liveness lease expires, another
// process takes its delegation, and the old holder's renewal fails with
// ErrLeaseLost.
func TestLeases_Expiry(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 2 s lease several times")
	}
	t.Parallel()
	const ttl = 2 * time.Second
	s := openTest(t, "", Config{})
	l := leasesOf(t, s, ttl)
	procA := join(t, l, "proc-a")
	a, err := procA.Take(t.Context(), "d1")
	if err != nil {
		t.Fatal(err)
	}
	taken := time.Now()
	for time.Since(taken) < 2*ttl {
		time.Sleep(ttl / 4)
		if err := procA.Renew(t.Context()); err != nil {
			t.Fatalf("Renew %s after take: %v", time.Since(taken).Round(time.Millisecond), err)
		}
		if h := holder(t, l, "d1"); h != "proc-a" {
			t.Fatalf("renewed lease held by %q", h)
		}
	}
	stopped := time.Now()
	testwait.Until(t, 10*ttl, "the lease expires once renewals stop", func() bool { return holder(t, l, "d1") == "" })
	if took := time.Since(stopped); took < ttl/2 {
		t.Errorf("lease expired %s after the last renewal, TTL %s", took, ttl)
	}
	b, err := join(t, l, "proc-b").Take(t.Context(), "d1")
	if err != nil {
		t.Fatalf("takeover after expiry: %v", err)
	}
	if err := procA.Renew(t.Context()); !errors.Is(err, delegation.ErrLeaseLost) {
		t.Errorf("stale Renew after takeover = %v, want ErrLeaseLost", err)
	}
	if err := a.Release(t.Context()); err != nil {
		t.Errorf("stale Release = %v", err)
	}
	if h := holder(t, l, "d1"); h != "proc-b" {
		t.Errorf("holder = %q, want proc-b", h)
	}
	if b.Token() <= a.Token() {
		t.Errorf("token %d after takeover, not above %d", b.Token(), a.Token())
	}
	// An expired lease nobody took is lost too.
	procC := join(t, l, "proc-c")
	if _, err := procC.Take(t.Context(), "d3"); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*ttl, "the lease on d3 expires", func() bool { return holder(t, l, "d3") == "" })
	if err := procC.Renew(t.Context()); !errors.Is(err, delegation.ErrLeaseLost) {
		t.Errorf("Renew of an expired lease = %v, want ErrLeaseLost", err)
	}
}

// TestLeases_Cluster holds a lease on a 3-node cluster with 3 replicas,
// stops the node leading the leases' stream, and checks the lease is
// still held and renews once the survivors have a leader.
//
// A stopping node hands its leadership to a current follower, which
// takes a fraction of a second; when no follower is current (a busy
// machine), the survivors wait NATS's election timeout first, 4–9 s. The
// TTL is long enough for the slow case, so the test checks that the lease
// rides out the election, not how fast NATS elects.
func TestLeases_Cluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := natstest.NewCluster(t, 3)
	s, err := Open(t.Context(), "", Config{URL: c.URLs(), Replicas: 3}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	const ttl = 30 * time.Second
	l := leasesOf(t, s, ttl)
	procA := join(t, l, "proc-a")
	a, err := procA.Take(t.Context(), "d1")
	if err != nil {
		t.Fatal(err)
	}
	st, err := s.JetStream().Stream(t.Context(), "KV_orchd-leases")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(t.Context())
	if err != nil || info.Cluster == nil {
		t.Fatalf("stream info: %v", err)
	}
	if n := len(info.Cluster.Replicas) + 1; n != 3 {
		t.Fatalf("leases stream has %d replicas, want 3", n)
	}
	victim := -1
	for i, srv := range c.Servers {
		if srv.Name() == info.Cluster.Leader {
			victim = i
		}
	}
	if victim < 0 {
		t.Fatalf("leader %q is not a node", info.Cluster.Leader)
	}
	c.Stop(victim)
	killed := time.Now()
	// Renew until it goes through, well within the TTL.
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		err := procA.Renew(ctx)
		cancel()
		if err == nil {
			break
		}
		if errors.Is(err, delegation.ErrLeaseLost) {
			t.Fatalf("lease lost after the node went: %v", err)
		}
		if time.Since(killed) > ttl*2/3 {
			t.Fatalf("no renewal within %s of the node going: %v", ttl*2/3, err)
		}
	}
	t.Logf("renewed %s after the stream leader went", time.Since(killed).Round(time.Millisecond))
	if h := holder(t, l, "d1"); h != "proc-a" {
		t.Errorf("holder after the node went = %q", h)
	}
	procB := join(t, l, "proc-b")
	if _, err := procB.Take(t.Context(), "d1"); !errors.Is(err, delegation.ErrLeaseHeld) {
		t.Errorf("Take by another after the node went = %v, want ErrLeaseHeld", err)
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := procB.Take(t.Context(), "d1"); err != nil {
		t.Errorf("Take after release: %v", err)
	}
}

// TestShareOut checks that each live process puts a share of the
// orphans first, that the shares split the orphans between the processes
// about evenly, that each still lists every orphan (after its share,
// should the others not take theirs), and that a process departing moves
// only its own share.
func TestShareOut(t *testing.T) {
	var ids []string
	for i := range 3000 {
		ids = append(ids, fmt.Sprintf("d%04d", i))
	}
	shares := func(stamps []string) map[string][]string {
		out := map[string][]string{}
		for _, self := range stamps {
			got, n := shareOut(slices.Clone(ids), self, stamps)
			if !slices.Equal(slices.Sorted(slices.Values(got)), ids) {
				t.Fatalf("%v: %s does not list each id once", stamps, self)
			}
			out[self] = slices.Sorted(slices.Values(got[:n]))
		}
		return out
	}
	for _, stamps := range [][]string{{"e1 a"}, {"e1 a", "e2 b"}, {"e1 a", "e2 b", "e3 c"}} {
		var all []string
		for self, share := range shares(stamps) {
			if want := len(ids) / len(stamps); len(share) < want*9/10 || len(share) > want*11/10 {
				t.Errorf("%v: %s's share holds %d of %d, want about %d", stamps, self, len(share), len(ids), want)
			}
			all = append(all, share...)
		}
		if slices.Sort(all); !slices.Equal(all, ids) {
			t.Errorf("%v: the shares hold %d ids, want each of the %d once", stamps, len(all), len(ids))
		}
	}
	three, two := shares([]string{"e1 a", "e2 b", "e3 c"}), shares([]string{"e1 a", "e2 b"})
	for _, self := range []string{"e1 a", "e2 b"} {
		for _, id := range three[self] {
			if _, ok := slices.BinarySearch(two[self], id); !ok {
				t.Fatalf("%s lost %s from its share when another process departed", self, id)
			}
		}
	}
}

// A join that fails for the store may be kept all the same: its create
// stored, its acknowledgement lost (a timeout as the server was slow to
// answer). The next join as that name finds the key its own, where it was
// refused as another live process's until the key aged out; a join as
// that name by anyone else is still refused. A join while the server is
// away writes nothing: it first asks its presence subject (presence.go),
// which fails, and the next join takes the name at once.
func TestLeases_JoinKeptWhileItFailed(t *testing.T) {
	t.Parallel()
	node := natstest.NewNode(t)
	s, err := Open(t.Context(), "", Config{URL: node.URL(), Timeout: 500 * time.Millisecond}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	l := leasesOf(t, s, 10*time.Second)

	node.Stop()
	testwait.Until(t, 10*time.Second, "the client to reconnect", func() bool {
		return s.JetStream().Conn().Status() == nats.RECONNECTING
	})
	if _, err := l.Join(t.Context(), "proc-a"); !errors.Is(err, delegation.ErrUnavailable) {
		t.Fatalf("Join with the server away: %v; want ErrUnavailable", err)
	}
	node.Start()
	testwait.Until(t, 10*time.Second, "the client to reconnect", func() bool {
		return s.JetStream().Conn().Status() == nats.CONNECTED
	})
	if _, err := l.live.Get(t.Context(), "replica.proc-a"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("the key of a join while the server was away: %v; want none", err)
	}
	m := join(t, l, "proc-a")
	if err := m.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}

	// A create kept, its acknowledgement lost: the failed join left its
	// stamp for the next.
	st := l.joinStamp("proc-a")
	l.setUnsure("proc-a", st)
	if _, err := l.live.Create(t.Context(), "replica.proc-a", []byte(st)); err != nil {
		t.Fatal(err)
	}
	m = join(t, l, "proc-a")
	if err := m.Renew(t.Context()); err != nil {
		t.Fatalf("Renew after joining over the kept create: %v", err)
	}
	if _, err := l.Join(t.Context(), "proc-a"); !errors.Is(err, delegation.ErrLeaseHeld) {
		t.Errorf("a second Join as proc-a: %v; want ErrLeaseHeld", err)
	}
	if err := m.Leave(t.Context()); err != nil {
		t.Fatal(err)
	}
}
