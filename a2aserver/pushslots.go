package a2aserver

import (
	"context"
	"slices"
	"sync"
)

// pushSlots hands out the right to make one push delivery attempt, fairly
// between tenants and between hosts: at most total attempts are in flight,
// at most perTenant for one tenant's webhooks and at most perHost to one
// webhook host. A slot that frees goes to the tenants waiting in turn, and
// within a tenant to its oldest waiter whose host has room. So webhooks
// that hang hold at most perTenant slots of their tenant and perHost of
// their host while they time out, and every other tenant's (and host's)
// notifications go out meanwhile.
//
// After every change, no waiter could take a slot: a waiter is held back
// by total, or by its own tenant's or host's bound.
type pushSlots struct {
	total, perTenant, perHost int

	// mu guards the fields below.
	mu      sync.Mutex
	inUse   int
	tenants map[string]*slotTenant
	hosts   map[string]int
	// turn lists the tenants with waiters in the order they are served;
	// next is the index of the next one to be.
	turn []*slotTenant
	next int
}

// slotTenant is one tenant's attempts in flight and waiting.
type slotTenant struct {
	name     string
	inFlight int
	waiting  []*slotWaiter // oldest first
}

// slotWaiter is one attempt waiting for a slot.
type slotWaiter struct {
	host    string
	granted chan struct{} // closed once the slot is the waiter's
	done    bool          // granted; guarded by pushSlots.mu
}

func newPushSlots(total, perTenant, perHost int) *pushSlots {
	return &pushSlots{total: total, perTenant: perTenant, perHost: perHost,
		tenants: map[string]*slotTenant{}, hosts: map[string]int{}}
}

// acquire waits for a slot for an attempt to tenant's webhook on host, or
// for ctx's end; the slot is held until release(tenant, host).
func (s *pushSlots) acquire(ctx context.Context, tenant, host string) error {
	s.mu.Lock()
	t := s.tenants[tenant]
	if t == nil {
		t = &slotTenant{name: tenant}
		s.tenants[tenant] = t
	}
	if s.inUse < s.total && t.inFlight < s.perTenant && s.hosts[host] < s.perHost {
		s.take(t, host)
		s.mu.Unlock()
		return nil
	}
	w := &slotWaiter{host: host, granted: make(chan struct{})}
	if len(t.waiting) == 0 {
		s.turn = append(s.turn, t)
	}
	t.waiting = append(t.waiting, w)
	s.mu.Unlock()

	select {
	case <-w.granted:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	if w.done { // granted as ctx ended: give it back
		s.mu.Unlock()
		s.release(tenant, host)
		return ctx.Err()
	}
	t.waiting = slices.DeleteFunc(t.waiting, func(o *slotWaiter) bool { return o == w })
	if len(t.waiting) == 0 {
		s.leaveTurn(t)
	}
	s.forget(t)
	s.mu.Unlock()
	return ctx.Err()
}

// release gives back a slot acquire gave, to the waiter next in turn.
func (s *pushSlots) release(tenant, host string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.tenants[tenant]
	s.inUse--
	t.inFlight--
	if s.hosts[host]--; s.hosts[host] <= 0 {
		delete(s.hosts, host)
	}
	s.dispatch()
	s.forget(t)
}

// take counts a slot given to t for host. The caller holds mu.
func (s *pushSlots) take(t *slotTenant, host string) {
	s.inUse++
	t.inFlight++
	s.hosts[host]++
}

// dispatch gives free slots to waiters, the tenants in turn, until no
// waiter can take one. The caller holds mu.
func (s *pushSlots) dispatch() {
	for s.inUse < s.total && len(s.turn) > 0 {
		granted := false
		for i := range s.turn {
			idx := (s.next + i) % len(s.turn)
			t := s.turn[idx]
			if t.inFlight >= s.perTenant {
				continue
			}
			j := slices.IndexFunc(t.waiting, func(w *slotWaiter) bool { return s.hosts[w.host] < s.perHost })
			if j < 0 {
				continue
			}
			w := t.waiting[j]
			t.waiting = slices.Delete(t.waiting, j, j+1)
			s.take(t, w.host)
			w.done = true
			close(w.granted)
			s.next = idx + 1
			if len(t.waiting) == 0 {
				s.leaveTurn(t)
			}
			granted = true
			break
		}
		if !granted {
			return
		}
	}
}

// leaveTurn takes t, which has no waiters left, out of the turn, keeping
// next on the tenant that was to come next. The caller holds mu.
func (s *pushSlots) leaveTurn(t *slotTenant) {
	idx := slices.Index(s.turn, t)
	if idx < 0 {
		return
	}
	s.turn = slices.Delete(s.turn, idx, idx+1)
	if idx < s.next {
		s.next--
	}
	if s.next >= len(s.turn) {
		s.next = 0
	}
}

// forget drops t once it has nothing in flight or waiting, so tenants seen
// once cost nothing. The caller holds mu.
func (s *pushSlots) forget(t *slotTenant) {
	if t.inFlight == 0 && len(t.waiting) == 0 {
		delete(s.tenants, t.name)
	}
}
