package delegation

import "time"

// The end of a delegation is written like any of its events: once, as it
// happens (persistLocked). A failure there is tried again with the next
// write, and an end has no next write. Left so, the store would show the
// delegation running after its agent ended it, its result in this
// process's memory only: other replicas would read it as running, and a
// process carrying it on later would find the agent's task gone, or ask
// the agent again. So the first to see the end unkept (settled) keeps
// the delegation, and its lease, until the store has the end.

// Backoff between tries of an end the store did not keep.
const (
	endRetryFirst = 100 * time.Millisecond
	endRetryMax   = 10 * time.Second
)

// keepEnd writes d's end to the store until it is kept, in a goroutine
// the engine owns, then lists the delegation ended (settled). It stops
// when the engine closes, or when this process no longer holds the
// delegation (its liveness lease was lost): its record still says
// running, and the next holder carries it on and finds its end at the
// agent. Called once, by settled, which set d.keeping.
func (d *Delegation) keepEnd() {
	e := d.engine
	if !e.track() {
		return
	}
	go func() {
		defer e.wg.Done()
		wait := endRetryFirst
		t := time.NewTimer(wait)
		defer t.Stop()
		for {
			select {
			case <-e.ctx.Done():
				return
			case <-t.C:
			}
			if live, ok := e.Get(d.rec.ID); !ok || live != d {
				return // another process holds it now
			}
			d.mu.Lock()
			if e.cfg.Leases != nil && d.lease == nil {
				d.mu.Unlock()
				return // given up (dropTaken): its next holder writes
			}
			d.persistLocked() // logs a failure
			kept := d.persistErr == nil
			if kept {
				d.keeping = false
			}
			d.mu.Unlock()
			if kept {
				e.log.Info("the end of a delegation is kept after its store write failed", "delegation", d.rec.ID)
				d.settled()
				return
			}
			wait = min(2*wait, endRetryMax)
			t.Reset(wait)
		}
	}()
}
