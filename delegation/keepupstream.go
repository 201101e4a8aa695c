package delegation

import (
	"context"
	"slices"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Keeping a front's own task alongside a delegation that ended at once.
//
// orchd's A2A server answers its callers with A2A tasks of its own, the
// upstream tasks, which it stores apart from the delegations they mirror.
// When an agent's first answer is a task that ended the work, the
// delegation is stored once, ended (Engine.start), and the server's task
// can be stored in the same round trip to the store, rather than after
// it: the server asks for that with the KeepEndedUpstream option of
// Engine.Delegate. An option, not a field of Request: it is how the
// server stores its own records, not part of the work a caller asks for.

// KeepEndedUpstream asks, for work the agent's first answer ends with a
// task in a terminal state, that the delegation's record name
// task as its Upstream from the start, so that the record, then written
// once, need not be written again; and that keep be called with the
// ended record and its events while the engine stores them, so the two
// writes take one round trip to the store, not two. Delegate waits for
// keep before it returns. keep must use only its arguments (the
// delegation's methods wait for the store); its error fails nothing: the
// delegation is kept either way, and the caller then keeps its task
// another way. A nil keep only names task. Work that goes on, or that
// the agent answers with a message, ignores the option.
func KeepEndedUpstream(task Upstream, keep func(ctx context.Context, rec Record, evs []Event) error) DelegateOption {
	return DelegateOption{endedUpstream: task, hasEndedUpstream: true, keepUpstream: keep}
}

// endedAtOnce gives d, which the agent accepted with first, what o asks
// for work that first ends with a task: the upstream task its record
// names, and the function that keeps that task (keepUpstreamAlongsideLocked).
func (o DelegateOption) endedAtOnce(d *Delegation, first a2a.Event) {
	if _, isMsg := first.(*a2a.Message); !o.hasEndedUpstream || isMsg || !endsAtOnce(first) {
		return
	}
	up := o.endedUpstream
	d.rec.Upstream = &up
	d.keepUpstream = o.keepUpstream
}

// keepUpstreamAlongsideLocked starts keeping the upstream task of a delegation
// that ended at once (KeepEndedUpstream's keep), with copies of its record
// and events, while the caller stores them; the channel is closed once it
// is done (at once when there is nothing to keep). The caller holds mu
// and waits on the channel, so the goroutine is owned by the call.
func (d *Delegation) keepUpstreamAlongsideLocked(ctx context.Context) <-chan struct{} {
	kept := make(chan struct{})
	keep := d.keepUpstream
	if keep == nil || !d.rec.State.Terminal() {
		close(kept)
		return kept
	}
	rec, evs := d.snapshotLocked(), slices.Clone(d.unsaved)
	go func() {
		defer close(kept)
		if err := keep(ctx, rec, evs); err != nil {
			d.engine.log.DebugContext(ctx, "keep the upstream task of a delegation that ended at once", "delegation", rec.ID, "error", err)
		}
	}()
	return kept
}
