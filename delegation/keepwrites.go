package delegation

import (
	"sync"
	"time"
)

// The writes a store outage failed (a delegation's events and its
// record) are tried again with the delegation's next event. Its agent may
// stay quiet for minutes after the outage, and meanwhile the store holds
// the delegation behind what happened: another replica's followers wait
// for events this process has, its listings show an older state, and a
// crash of this process leaves the log without them. So the engine also
// tries them again itself, a moment after they failed, until the store
// keeps them. An end the store did not keep is keepEnd's (keepend.go).

// Backoff between the engine's tries of the writes it holds: from the
// first, doubling to the most while none goes through, and back to the
// first once one does.
const (
	rewriteFirst = 250 * time.Millisecond
	rewriteMax   = 10 * time.Second
)

// rewrites holds the running delegations whose writes failed, for the
// engine's goroutine writing them again (Engine.rewrite).
type rewrites struct {
	mu      sync.Mutex
	pending map[*Delegation]struct{}
	// running is set while the goroutine runs; it ends once nothing is
	// pending.
	running bool
}

// keepWritesLocked has the engine write d's events and record again
// until the store keeps them. Callers hold d.mu, after a write of d
// failed.
func (d *Delegation) keepWritesLocked() {
	if d.rec.State.Terminal() {
		return // keepEnd's, once the delegation settles
	}
	e := d.engine
	e.rewrites.mu.Lock()
	defer e.rewrites.mu.Unlock()
	if e.rewrites.pending == nil {
		e.rewrites.pending = map[*Delegation]struct{}{}
	}
	e.rewrites.pending[d] = struct{}{}
	if !e.rewrites.running && e.track() {
		e.rewrites.running = true
		go e.rewrite()
	}
}

// rewrite writes the pending delegations again until none is left or the
// engine closes. A delegation leaves once the store holds all of it, it
// ended (keepEnd writes it then), or this process no longer follows it.
func (e *Engine) rewrite() {
	defer e.wg.Done()
	wait := rewriteFirst
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
		}
		e.rewrites.mu.Lock()
		if len(e.rewrites.pending) == 0 {
			e.rewrites.running = false
			e.rewrites.mu.Unlock()
			return
		}
		ds := make([]*Delegation, 0, len(e.rewrites.pending))
		for d := range e.rewrites.pending {
			ds = append(ds, d)
		}
		e.rewrites.mu.Unlock()
		// One write that fails ends the round: the store is still out of
		// reach, and each of the others would wait for it in turn, up to
		// store.timeout, holding its delegation.
		failed := false
		for _, d := range ds {
			if e.ctx.Err() != nil {
				return
			}
			done, err := d.writeAgain()
			if done {
				e.rewrites.mu.Lock()
				delete(e.rewrites.pending, d)
				e.rewrites.mu.Unlock()
			}
			if failed = err != nil; failed {
				break
			}
		}
		if failed {
			wait = min(2*wait, rewriteMax)
		} else {
			wait = rewriteFirst
		}
		t.Reset(wait)
	}
}

// writeAgain writes d's events and record again when the store does not
// hold them yet, and reports whether the engine is done with it, and why
// the write failed.
func (d *Delegation) writeAgain() (done bool, err error) {
	e := d.engine
	if live, ok := e.Get(d.rec.ID); !ok || live != d {
		return true, nil // forgotten here: another process holds it
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	switch {
	case d.rec.State.Terminal():
		return true, nil // keepEnd's
	case e.cfg.Leases != nil && d.lease == nil:
		return true, nil // given up (dropTaken): its next holder writes
	case d.persistErr == nil && len(d.unsaved) == 0:
		return true, nil // a later event's write kept it all
	case d.deferred:
		return false, nil
	}
	d.persistLocked() // logs a failure
	return d.persistErr == nil, d.persistErr
}
