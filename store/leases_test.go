package store

import (
	"context"
	"errors"
	"testing"
	"time"

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
	a, err := l.Take(t.Context(), "d1", "proc-a")
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
		if _, err := l.Take(t.Context(), tc.id, tc.owner); !errors.Is(err, tc.want) {
			t.Errorf("Take(%q, %q) = %v, want %v", tc.id, tc.owner, err, tc.want)
		}
	}
	_, err = l.Take(t.Context(), "d1", "proc-b")
	if err == nil || !errors.Is(err, delegation.ErrLeaseHeld) || errors.Is(err, delegation.ErrLeaseLost) {
		t.Fatalf("Take by another = %v", err)
	}
	// Another delegation's lease is separate.
	if _, err := l.Take(t.Context(), "d2", "proc-b"); err != nil {
		t.Fatalf("Take(d2): %v", err)
	}
	if err := a.Renew(t.Context()); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	// Release frees it at once; the new holder's token is higher.
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h := holder(t, l, "d1"); h != "" {
		t.Errorf("holder after release = %q", h)
	}
	b, err := l.Take(t.Context(), "d1", "proc-b")
	if err != nil {
		t.Fatalf("Take after release: %v", err)
	}
	if b.Token() <= a.Token() {
		t.Errorf("token after a change of holder %d, not above %d", b.Token(), a.Token())
	}
	if err := a.Renew(t.Context()); !errors.Is(err, delegation.ErrLeaseLost) {
		t.Errorf("Renew of a released lease = %v, want ErrLeaseLost", err)
	}
	if err := a.Release(t.Context()); err != nil {
		t.Errorf("second Release = %v, want nil", err)
	}
	if h := holder(t, l, "d1"); h != "proc-b" {
		t.Errorf("a stale release freed the new holder's lease: holder %q", h)
	}
	// The holder taking again gets it anew.
	b2, err := l.Take(t.Context(), "d1", "proc-b")
	if err != nil || b2.Token() <= b.Token() {
		t.Fatalf("retake by the holder = %v, token %d after %d", err, b2.Token(), b.Token())
	}
	if err := b.Renew(t.Context()); !errors.Is(err, delegation.ErrLeaseLost) {
		t.Errorf("Renew of the lease taken anew = %v, want ErrLeaseLost", err)
	}
}

// TestLeases_Expiry checks renewals keep a lease past its TTL, and that
// once they stop it expires, another owner takes it, and the old holder's
// renewal fails with ErrLeaseLost.
func TestLeases_Expiry(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 2 s lease several times")
	}
	t.Parallel()
	const ttl = 2 * time.Second
	s := openTest(t, "", Config{})
	l := leasesOf(t, s, ttl)
	a, err := l.Take(t.Context(), "d1", "proc-a")
	if err != nil {
		t.Fatal(err)
	}
	taken := time.Now()
	for time.Since(taken) < 2*ttl {
		time.Sleep(ttl / 4)
		if err := a.Renew(t.Context()); err != nil {
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
	b, err := l.Take(t.Context(), "d1", "proc-b")
	if err != nil {
		t.Fatalf("takeover after expiry: %v", err)
	}
	if err := a.Renew(t.Context()); !errors.Is(err, delegation.ErrLeaseLost) {
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
	c, err := l.Take(t.Context(), "d3", "proc-c")
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*ttl, "the lease on d3 expires", func() bool { return holder(t, l, "d3") == "" })
	if err := c.Renew(t.Context()); !errors.Is(err, delegation.ErrLeaseLost) {
		t.Errorf("Renew of an expired lease = %v, want ErrLeaseLost", err)
	}
}

// TestLeases_Cluster holds a lease on a 3-node cluster with 3 replicas,
// kills the node leading the leases' stream, and checks the lease is
// still held and renews.
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
	l := leasesOf(t, s, 10*time.Second)
	a, err := l.Take(t.Context(), "d1", "proc-a")
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
	// Renew until it goes through: the survivors elect a leader within
	// the TTL.
	for {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		err := a.Renew(ctx)
		cancel()
		if err == nil {
			break
		}
		if errors.Is(err, delegation.ErrLeaseLost) {
			t.Fatalf("lease lost after the node went: %v", err)
		}
		if time.Since(killed) > 8*time.Second {
			t.Fatalf("no renewal within 8s of the node going: %v", err)
		}
	}
	t.Logf("renewed %s after the stream leader went", time.Since(killed).Round(time.Millisecond))
	if h := holder(t, l, "d1"); h != "proc-a" {
		t.Errorf("holder after the node went = %q", h)
	}
	if _, err := l.Take(t.Context(), "d1", "proc-b"); !errors.Is(err, delegation.ErrLeaseHeld) {
		t.Errorf("Take by another after the node went = %v, want ErrLeaseHeld", err)
	}
	if err := a.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Take(t.Context(), "d1", "proc-b"); err != nil {
		t.Errorf("Take after release: %v", err)
	}
}
