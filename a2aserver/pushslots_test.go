package a2aserver

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/orchd/orchd/internal/testwait"
)

// waiters is how many attempts wait for a slot.
func (s *pushSlots) waiters() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.tenants {
		n += len(t.waiting)
	}
	return n
}

// TestPushSlots_Turns: slots that free go to the tenants waiting in turn,
// not to the tenant that queued most first; a tenant at its bound, or a
// host at its, waits while others go; an attempt whose context ends stops
// waiting; and nothing is left once every slot is back.
func TestPushSlots_Turns(t *testing.T) {
	t.Parallel()
	s := newPushSlots(2, 2, 2)
	for _, h := range []string{"a1", "a2"} {
		if err := s.acquire(t.Context(), "A", h); err != nil {
			t.Fatal(err)
		}
	}
	type grant struct{ tenant, host string }
	granted := make(chan grant, 8)
	wait := func(tenant, host string) {
		n := s.waiters()
		go func() {
			if err := s.acquire(context.Background(), tenant, host); err == nil {
				granted <- grant{tenant, host}
			}
		}()
		testwait.Until(t, 10*time.Second, tenant+"'s acquire of "+host+" waiting", func() bool { return s.waiters() != n })
	}
	wait("A", "a3")
	wait("A", "a4")
	wait("A", "a5")
	wait("B", "b1")
	wait("C", "c1")
	// A gone waiter keeps no place.
	ctx, cancel := context.WithCancel(t.Context())
	gone := make(chan error, 1)
	n := s.waiters()
	go func() { gone <- s.acquire(ctx, "D", "d1") }()
	testwait.Until(t, 10*time.Second, "D's acquire waiting", func() bool { return s.waiters() != n })
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("acquire with an ended context took a slot")
	}

	// Each of the two slots given back goes to the next waiter in turn,
	// five times; then the last two come back to nobody.
	held := []grant{{"A", "a1"}, {"A", "a2"}}
	var order []string
	for range 5 {
		s.release(held[0].tenant, held[0].host)
		held = held[1:]
		select {
		case g := <-granted:
			order = append(order, g.tenant+" "+g.host)
			held = append(held, g)
		case <-time.After(10 * time.Second):
			t.Fatalf("no slot given after %q", order)
		}
	}
	for _, g := range held {
		s.release(g.tenant, g.host)
	}
	if want := []string{"A a3", "B b1", "C c1", "A a4", "A a5"}; !slices.Equal(order, want) {
		t.Errorf("slots went to %q, want %q", order, want)
	}
	type left struct{ Tenants, Hosts, Turn, InUse int }
	if diff := cmp.Diff(left{}, left{len(s.tenants), len(s.hosts), len(s.turn), s.inUse}); diff != "" {
		t.Errorf("left with every slot back (-want +got):\n%s", diff)
	}

	// Bounds: a tenant at its share waits while another goes, and so does
	// a host at its.
	s = newPushSlots(10, 2, 1)
	for _, h := range []string{"x", "y"} {
		if err := s.acquire(t.Context(), "A", h); err != nil {
			t.Fatal(err)
		}
	}
	short, stop := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer stop()
	if err := s.acquire(short, "A", "z"); err == nil {
		t.Error("A took a third slot over its share of 2")
	}
	short, stop = context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer stop()
	if err := s.acquire(short, "B", "x"); err == nil {
		t.Error("B took a second slot on host x, over its share of 1")
	}
	if err := s.acquire(t.Context(), "B", "w"); err != nil {
		t.Errorf("B on a free host: %v", err)
	}
}
