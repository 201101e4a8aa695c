package delegation

import (
	"sync"
	"time"
)

// Keeping the writes a store outage refused. A delegation's events and
// record that the store did not take are tried again with its next
// event. But its agent may stay quiet for minutes after the outage, and
// meanwhile the store holds the delegation behind what happened: another
// replica's followers wait for events this process has, its listings
// show an older state, and a crash of this process leaves the log
// without them. An end has no next event at all: left so, the store
// would show the delegation running after its agent ended it, its result
// in this process's memory only, and a process carrying it on later
// would find the agent's task gone, or ask the agent again. So the
// engine tries the refused writes again itself, from a moment after they
// failed, until the store keeps them; an ended delegation keeps its lease
// until then, and is listed ended (settled) once its end is kept.

// Backoff between the engine's rounds of writing again: from the first,
// doubling to the most while a write fails, and back to the first once
// a round goes through.
const (
	rewriteFirst = 100 * time.Millisecond
	rewriteMax   = 10 * time.Second
)

// rewrites holds the delegations whose writes the store refused, for the
// engine's goroutine writing them again (Engine.rewrite).
type rewrites struct {
	mu      sync.Mutex
	pending map[*Delegation]struct{}
	// running is set while the goroutine runs; it ends once nothing is
	// pending.
	running bool
}

// keepWriting has the engine write d's events and record again until
// the store keeps them: after a write of d failed (callers may hold
// d.mu), and for an end the store did not keep (settled, which set
// d.keeping).
func (d *Delegation) keepWriting() {
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

// rewrite writes the pending delegations again, one at a time, until none
// is left or the engine closes. A round ends at its first failure: the
// store is still out of reach, and each of the others would wait for it
// in turn, up to store.timeout, holding its delegation. A delegation
// leaves once the store holds all of it, or this process no longer
// follows it (its record then says running, and its next holder carries
// it on and finds its end at the agent).
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
// the write failed. An end it keeps is listed (settled).
func (d *Delegation) writeAgain() (done bool, err error) {
	e := d.engine
	if live, ok := e.Get(d.rec.ID); !ok || live != d {
		return true, nil // forgotten here: another process holds it
	}
	d.mu.Lock()
	switch {
	case e.cfg.Leases != nil && d.lease == nil:
		d.mu.Unlock()
		return true, nil // given up (dropTaken): its next holder writes
	case d.deferred:
		d.mu.Unlock()
		return false, nil
	case d.persistErr != nil || len(d.unsaved) > 0:
		d.persistLocked() // logs a failure
	}
	err = d.persistErr
	ended := err == nil && d.keeping
	if ended {
		d.keeping = false
	}
	d.mu.Unlock()
	if ended {
		e.log.Info("the end of a delegation is kept after its store write failed", "delegation", d.rec.ID)
		d.settled()
	}
	return err == nil, err
}
