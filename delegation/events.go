package delegation

import (
	"context"
	"fmt"
)

// Reading a delegation's event log, wherever the delegation is followed.
//
// A live delegation keeps its latest events in memory (up to MaxEvents);
// the store keeps the whole log (up to its retention) for every process
// and every restart. Readers go through the engine, which answers from
// memory when it can and from the store otherwise, so a client resuming
// after event N sees every later event once, whichever process follows the
// delegation now.

// Events returns up to limit events of the delegation with a Seq above
// after (limit <= 0: all that are kept), and whether the log is complete:
// the delegation has ended and no event follows the ones returned. It
// fails with ErrNotFound for an unknown id.
func (e *Engine) Events(ctx context.Context, id string, after int64, limit int) ([]Event, bool, error) {
	if d, ok := e.Get(id); ok {
		evs, _, ended, first := d.window(after)
		if after+1 < first {
			// Older than the memory window: from the store, up to it.
			older, err := e.store.Events(ctx, id, after, limit)
			if err != nil {
				return nil, false, fmt.Errorf("read events of delegation %s: %w", id, err)
			}
			for len(older) > 0 && older[len(older)-1].Seq >= first {
				older = older[:len(older)-1]
			}
			evs = append(older, evs...)
		}
		if limit > 0 && len(evs) > limit {
			return evs[:limit], false, nil
		}
		return evs, ended, nil
	}
	rec, err := e.store.Get(ctx, id)
	if err != nil {
		return nil, false, fmt.Errorf("%w: %q", err, id)
	}
	evs, err := e.store.Events(ctx, id, after, limit)
	if err != nil {
		return nil, false, fmt.Errorf("read events of delegation %s: %w", id, err)
	}
	last := after
	if len(evs) > 0 {
		last = evs[len(evs)-1].Seq
	}
	if rec.State.Terminal() && last >= rec.LastEvent {
		return evs, true, nil
	}
	// The record is written after the log, and a replica of the store may
	// answer with an older one: the log's own terminal event, always its
	// last, says the delegation ended too.
	if len(evs) > 0 {
		return evs, evs[len(evs)-1].State.Terminal(), nil
	}
	if len(evs) == 0 && after > 0 {
		prev, err := e.store.Events(ctx, id, after-1, 1)
		if err == nil && len(prev) == 1 && prev[0].Seq == after && prev[0].State.Terminal() {
			return evs, true, nil
		}
	}
	return evs, false, nil
}

// WaitEvents returns once the delegation's log holds an event with a Seq
// above after, or when ctx ends, with its cause. It waits through a
// moment the store is out of reach, as FollowEvents reads.
func (e *Engine) WaitEvents(ctx context.Context, id string, after int64) error {
	d, ok := e.Get(id)
	if !ok {
		return e.waitStore(ctx, id, after)
	}
	for {
		d.mu.Lock()
		ready := d.rec.LastEvent > after || d.rec.State.Terminal()
		changed := d.changedLocked()
		d.mu.Unlock()
		if ready {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
		if cur, live := e.Get(id); !live || cur != d {
			// Forgotten here (another process took it over): its log
			// goes on in the store.
			return e.waitStore(ctx, id, after)
		}
	}
}

// waitStore waits for the store's log of delegation id to hold an event
// above after, through a moment the store is out of reach.
func (e *Engine) waitStore(ctx context.Context, id string, after int64) error {
	return e.rideOut(ctx, id, func() error { return e.store.Wait(ctx, id, after) })
}
