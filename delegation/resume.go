package delegation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Carrying delegations on across processes.
//
// The store holds every running delegation's record, with its Progress,
// and its event log. When a process stops, whether it was shut down or
// killed, the downstream tasks it followed keep running at their agents.
// The next process to own such a delegation resumes it: it rebuilds the
// delegation from its record (and from any events logged after the record
// was last written), asks the agent for the task, folds what changed into
// the delegation, and follows the task on, subscribing to it when the
// agent streams and polling it otherwise. Events are numbered on from the
// log's last one, so a client following the log sees every event once.
//
// Which process owns a delegation: with no Leases, this one owns every
// delegation in its store (a lone daemon on its own embedded store, which
// the state directory's lock keeps to one process). With Leases, the one
// holding the delegation's lease; Start takes the leases nobody holds.

// Start carries on the running delegations in the store that this engine
// owns: with no Config.Leases every one of them, before it returns; with
// Leases, those whose lease it can take, now and then every third of the
// lease TTL in a goroutine the engine owns, which also renews the leases
// it holds. A delegation that cannot be resumed (its agent is no longer
// registered, or orchd stopped before the agent created a task) ends
// FAILED with the reason.
func (e *Engine) Start(ctx context.Context) error {
	if err := e.serveRelayed(); err != nil {
		return err
	}
	if err := e.adopt(ctx); err != nil {
		return err
	}
	if e.cfg.Leases == nil || !e.track() {
		return nil
	}
	go func() {
		defer e.wg.Done()
		t := time.NewTicker(max(e.cfg.Leases.TTL()/3, 100*time.Millisecond))
		defer t.Stop()
		for {
			select {
			case <-e.ctx.Done():
				e.releaseAll()
				return
			case <-t.C:
			}
			e.renew()
			if err := e.adopt(e.ctx); err != nil && e.ctx.Err() == nil {
				e.log.Warn("look for delegations to carry on", "error", err)
			}
		}
	}()
	return nil
}

// OnResume sets a function run for each delegation this engine carries on
// from the store, once it is live and before anything more happens to it: for the A2A
// side of orchd to mirror the delegation into its task again. Call it
// before Start.
func (e *Engine) OnResume(f func(*Delegation)) { e.onResume = f }

// SetUpstream records orchd's A2A task that mirrors the delegation, so a
// process carrying the delegation on keeps that task up to date.
func (e *Engine) SetUpstream(ctx context.Context, id string, task Upstream) error {
	d, ok := e.Get(id)
	if !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.rec.Upstream = &task
	if err := e.store.Put(ctx, d.storedLocked()); err != nil {
		return fmt.Errorf("%w: keep delegation %s: %v", ErrUnavailable, id, err)
	}
	return nil
}

// adopt resumes the running delegations of the store that are not live
// here and that this engine may own.
func (e *Engine) adopt(ctx context.Context) error {
	ids, err := e.store.Running(ctx)
	if err != nil {
		return fmt.Errorf("list running delegations: %w", err)
	}
	for _, id := range ids {
		if _, live := e.Get(id); live || ctx.Err() != nil {
			continue
		}
		e.adoptOne(ctx, id)
	}
	return nil
}

// adoptOne resumes the running delegation id when this engine may own it
// and does not follow it yet.
func (e *Engine) adoptOne(ctx context.Context, id string) {
	unlock := e.lockTakeOver(id)
	defer unlock()
	if _, live := e.Get(id); live { // route took it over meanwhile
		return
	}
	var lease Lease
	if l := e.cfg.Leases; l != nil {
		var err error
		if lease, err = l.Take(ctx, id, e.cfg.Instance); err != nil {
			if !errors.Is(err, ErrLeaseHeld) {
				e.log.Warn("take the lease of a running delegation", "delegation", id, "error", err)
			}
			return
		}
	}
	rec, err := e.store.Get(ctx, id)
	if err != nil {
		e.log.Warn("read a running delegation", "delegation", id, "error", err)
		release(lease)
		return
	}
	if rec.State.Terminal() {
		release(lease)
		return
	}
	_ = e.resume(ctx, rec, lease) // logged; tried again at the next look
}

// lockTakeOver serializes taking delegation id over within this engine:
// adopt and an operation's route may both find it unfollowed, and a
// process taking a lease it already holds is given it again, so without
// this both would resume it and follow the task twice. It returns the
// unlock function.
func (e *Engine) lockTakeOver(id string) (unlock func()) {
	unlock, _ = e.takingOver.Lock(context.Background(), id) // waits for the holder, never for a context
	return unlock
}

// resume rebuilds a delegation from its stored record and follows its
// downstream task from where the log stopped. A delegation whose
// artifacts cannot be read back from its log is not carried on (its lease
// is released, so a later look, or start, tries again): carried on
// without them, its next chunk would replace what the agent had made.
func (e *Engine) resume(ctx context.Context, rec Record, lease Lease) error {
	arts, size, err := e.rebuildArtifacts(ctx, rec)
	if err != nil {
		release(lease)
		e.log.Error("cannot carry on a delegation: its artifacts cannot be read back from its log; it is tried again later",
			"delegation", rec.ID, "error", err)
		return err
	}
	d := &Delegation{engine: e, chain: rec.Chain, lease: lease}
	if rec.Progress != nil {
		d.prog = *rec.Progress
	}
	rec.Progress = nil
	d.rec = rec
	d.rec.Artifacts, d.artifactBytes = arts, size
	// Events logged after the record was last written (the process
	// stopped between the two) are the delegation's too.
	if tail, err := e.store.Events(ctx, rec.ID, rec.LastEvent, 0); err == nil && len(tail) > 0 {
		last := tail[len(tail)-1]
		d.rec.LastEvent, d.rec.State = last.Seq, last.State
		d.rec.UpdatedAt = last.At
		if d.prog.ArtifactsFrom == 0 { // else the rebuild above read the tail's
			for _, ev := range tail {
				if ev.Kind != "artifact" || ev.Artifact == nil {
					continue
				}
				if d.prog.ArtifactsFrom == 0 {
					d.prog.ArtifactsFrom = ev.Seq
				}
				d.rec.Artifacts, _ = FoldArtifact(d.rec.Artifacts, ev.Artifact, ev.Append)
			}
			for _, a := range d.rec.Artifacts {
				d.artifactBytes += artifactSize(a)
			}
		}
	}
	d.first = d.rec.LastEvent + 1
	// The client is made before the delegation is live, so an operation
	// routed to it (control.go) never finds it without one.
	a, known := e.reg.Get(rec.Downstream.Agent)
	var clientErr error
	if known && rec.Downstream.TaskID != "" {
		d.client, _, clientErr = e.client(ctx, a)
		d.chained = readsChain(a)
	}
	d.arm()
	e.register(d)
	if e.onResume != nil {
		e.onResume(d)
	}
	e.log.Info("carrying on a delegation", "delegation", rec.ID, "agent", rec.Downstream.Agent, "task", rec.Downstream.TaskID, "state", d.rec.State)
	switch {
	case rec.Downstream.TaskID == "":
		d.fail("orchd stopped before the agent answered, so the work cannot be followed")
		d.settled()
		return nil
	case !known:
		d.fail(fmt.Sprintf("the agent is no longer registered, so its task %s cannot be followed", rec.Downstream.TaskID))
		d.settled()
		return nil
	case clientErr != nil:
		d.fail(fmt.Sprintf("cannot talk to the agent again: %v", clientErr))
		d.settled()
		return nil
	}
	if a.Digest != rec.Downstream.CardDigest {
		e.log.Warn("the agent's card changed since the delegation started; following its task with the new card",
			"delegation", rec.ID, "agent", a.ID, "pinned", rec.Downstream.CardDigest, "now", a.Digest)
	}
	if waiting(d.rec.State) {
		d.settled() // the task waits for the caller's input: nothing to follow
		return nil
	}
	// Reading the task again waits on the agent: in its own goroutine, so
	// a slow or absent agent does not hold up the start.
	if !e.track() {
		return nil // closed meanwhile: nothing follows the task, as after Close
	}
	go func() {
		defer e.wg.Done()
		s, err := d.reopen(e.ctx)
		if err != nil {
			if e.ctx.Err() != nil {
				return
			}
			// The agent may be down for now: polling retries, and gives
			// the task up only after lostAfter failures in a row.
			e.log.Warn("the task of a carried-on delegation could not be read; polling it", "delegation", rec.ID, "error", err)
			s = &session{}
		}
		d.follow(s)
	}()
	return nil
}

// reopen reads the downstream task again and, when the agent streams and
// the task still runs, subscribes to it (the task comes first). Each call
// is bounded by CallTimeout.
func (d *Delegation) reopen(ctx context.Context) (*session, error) {
	e := d.engine
	taskID := d.rec.Downstream.TaskID
	// The task is read first: one that has ended, or waits, needs no
	// subscription (and a2a-go v2.4.0 agents keep an event broker for
	// every subscription to a task with no execution).
	task, err := d.getTask(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if st := task.Status.State; !d.prog.Streaming || st.Terminal() || waiting(st) {
		return &session{first: task}, nil
	}
	openCtx, opened := context.WithTimeout(ctx, e.cfg.CallTimeout)
	defer opened()
	streamCtx, cancel := context.WithCancel(d.traced(e.ctx))
	stopAfter := context.AfterFunc(openCtx, cancel)
	start := time.Now()
	st, first, ok, err := e.openStream(streamCtx, cancel, d.client.SubscribeToTask(streamCtx, &a2a.SubscribeToTaskRequest{ID: taskID}))
	e.instruments.called(ctx, d.rec.Downstream.Agent, "SubscribeToTask", start, callErr(openCtx, err))
	stopAfter()
	if !ok || err != nil || openCtx.Err() != nil {
		cancel()
		// A task that ended meanwhile, or an agent that cannot
		// subscribe, is followed from the task read above (and polled).
		return &session{first: task}, nil
	}
	return &session{first: first, stream: st}, nil
}
