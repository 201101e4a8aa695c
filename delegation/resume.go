package delegation

import (
	"context"
	"errors"
	"fmt"
	"slices"
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
// that took it, while its liveness lease lasts (lease.go); Start takes
// those nobody holds, and those of processes that depart later.

// Start reads the agents' containments (contain.go) and watches them from
// then on, and carries on the running delegations in the store that this engine
// owns: with no Config.Leases every one of them, before it returns. With
// Leases, it joins (takes this process's liveness lease) and carries on
// those nobody follows; then a goroutine the engine owns renews the
// liveness lease every RenewEvery, carries on the delegations of each
// process that departs (Member.Departed) when it departs, looking again
// soon when the store kept it from finishing (lookAgain), and looks for
// running delegations nobody took at all every sweepEvery. A
// delegation that cannot be resumed (its agent is no longer registered,
// or orchd stopped before the agent created a task) ends FAILED with the
// reason.
func (e *Engine) Start(ctx context.Context) error {
	if err := e.watchContainments(ctx); err != nil {
		return err
	}
	if err := e.serveRelayed(); err != nil {
		return err
	}
	if e.cfg.Leases != nil {
		if _, err := e.member(ctx); err != nil {
			return fmt.Errorf("join the processes sharing the store: %w", err)
		}
	}
	if err := e.adopt(ctx, true); err != nil {
		return err
	}
	if e.cfg.Leases == nil || !e.track() {
		return nil
	}
	go func() {
		defer e.wg.Done()
		ttl := e.cfg.Leases.TTL()
		renew := time.NewTicker(RenewEvery(ttl))
		defer renew.Stop()
		sweep := time.NewTicker(sweepEvery(ttl))
		defer sweep.Stop()
		var again <-chan time.Time // a look the store kept from finishing
		for {
			var departed <-chan struct{}
			e.memberMu.Lock()
			if e.joined != nil {
				departed = e.joined.Departed()
			}
			e.memberMu.Unlock()
			select {
			case <-e.ctx.Done():
				return
			case <-renew.C:
				e.keepAlive()
			case <-departed:
				again = e.lookAgain(e.adoptOrphans())
			case <-again:
				again = e.lookAgain(e.adoptOrphans())
			case <-sweep.C:
				if err := e.adopt(e.ctx, false); err != nil && e.ctx.Err() == nil {
					e.log.Warn("look for delegations to carry on", "error", err)
				}
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
// here and that this engine may own: with Leases, those whose holder is
// gone and those nobody took (Member.Orphans), without a read of each
// one another process holds. gather is adoptAll's: set at a start.
func (e *Engine) adopt(ctx context.Context, gather bool) error {
	list := e.store.Running
	if l, ok := e.store.(RunningLister); ok {
		list = l.MayRun // adoptOne reads each record, and skips those ended
	}
	ids, err := list(ctx)
	if err != nil {
		return fmt.Errorf("list running delegations: %w", err)
	}
	ids = slices.DeleteFunc(ids, func(id string) bool { _, live := e.Get(id); return live })
	if e.cfg.Leases != nil {
		m, err := e.member(ctx)
		if err != nil {
			return err
		}
		if ids, err = m.Orphans(ctx, ids); err != nil {
			return err
		}
	}
	e.adoptAll(ctx, ids, gather)
	return nil
}

// adoptOne resumes the running delegation id when this engine may own it
// and does not follow it yet, and reports whether it did, with how to
// start following its task again (resume), and whether the store kept
// its lease from being taken. read, when not nil, is what a ManyReader
// read of it, so its record is not read again.
func (e *Engine) adoptOne(ctx context.Context, id string, read *Read) (follow func(), ok, takeUnavailable bool) {
	unlock := e.lockTakeOver(id)
	defer unlock()
	if _, live := e.Get(id); live { // route took it over meanwhile
		return nil, false, false
	}
	var lease Lease
	if e.cfg.Leases != nil {
		var err error
		if lease, err = e.takeOverLease(ctx, id); err != nil {
			if !errors.Is(err, ErrLeaseHeld) {
				e.takes.Failed("take the lease of a running delegation", err, "delegation", id)
			}
			return nil, false, errors.Is(err, ErrUnavailable)
		}
		e.takes.Succeeded()
	}
	var rec Record
	var last *Event
	if read != nil {
		rec, last = read.Record, read.Last
	} else {
		var err error
		if rec, err = e.store.Get(ctx, id); err != nil {
			e.log.Warn("read a running delegation", "delegation", id, "error", err)
			release(lease)
			return nil, false, false
		}
	}
	if rec.State.Terminal() {
		if l, ok := e.store.(RunningLister); ok {
			if err := l.Ended(ctx, id); err != nil {
				e.log.Debug("tell the store a delegation ended", "delegation", id, "error", err)
			}
		}
		release(lease)
		return nil, false, false
	}
	follow, err := e.resume(ctx, rec, last, lease) // logged; tried again at the next look
	return follow, err == nil, false
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
// It returns how to start following the downstream task again, nil when
// there is nothing to follow: a start carrying thousands of delegations
// on reads the store for them all before asking their agents anything.
// last, when not nil, is the last event of its log, read with rec
// (ManyReader).
func (e *Engine) resume(ctx context.Context, rec Record, last *Event, lease Lease) (follow func(), err error) {
	arts, size, err := e.rebuildArtifacts(ctx, rec)
	if err != nil {
		release(lease)
		e.log.Error("cannot carry on a delegation: its artifacts cannot be read back from its log; it is tried again later",
			"delegation", rec.ID, "error", err)
		return nil, err
	}
	d := &Delegation{engine: e, chain: rec.Chain, lease: lease}
	if rec.Progress != nil {
		d.prog = *rec.Progress
	}
	rec.Progress = nil
	d.rec = rec
	d.rec.Artifacts, d.artifactBytes = arts, size
	tail, err := e.logTail(ctx, &d.rec, &d.prog, last)
	if err != nil {
		release(lease)
		e.log.Error("cannot carry on a delegation: its log cannot be read; it is tried again later",
			"delegation", rec.ID, "error", err)
		return nil, err
	}
	if len(tail) > 0 && d.prog.ArtifactsFrom == 0 { // else the rebuild above read the tail's
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
	d.first = d.rec.LastEvent + 1
	if !d.rec.State.Terminal() {
		// Acknowledged already: it counts, whatever the limits say.
		d.slot, _ = e.running.take(rec.Owner.limitKey(), true)
	}
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
	e.log.Debug("carrying on a delegation", "delegation", rec.ID, "agent", rec.Downstream.Agent, "task", rec.Downstream.TaskID, "state", d.rec.State)
	switch {
	case rec.Downstream.TaskID == "":
		d.fail("orchd stopped before the agent answered, so the work cannot be followed")
		d.settled()
		return nil, nil
	case !known:
		d.fail(fmt.Sprintf("the agent is no longer registered, so its task %s cannot be followed", rec.Downstream.TaskID))
		d.settled()
		return nil, nil
	case clientErr != nil:
		d.fail(fmt.Sprintf("cannot talk to the agent again: %v", clientErr))
		d.settled()
		return nil, nil
	}
	if a.Digest != rec.Downstream.CardDigest {
		e.log.Warn("the agent's card changed since the delegation started; following its task with the new card",
			"delegation", rec.ID, "agent", a.ID, "pinned", rec.Downstream.CardDigest, "now", a.Digest)
	}
	e.checkContained(d)
	if settles(d.rec.State) {
		d.settled() // the task waits for the caller's input: nothing to follow
		return nil, nil
	}
	return func() { e.reopenAndFollow(d) }, nil
}

// reopenLimit bounds the carried-on delegations reading their downstream
// task again at once. Each reads the task and subscribes to it: 3,000 at
// once kept an a2a-go agent busy beyond callTimeout for a third of them.
const reopenLimit = 64

// refollow follows the downstream task again, as reopenAndFollow does,
// after an answer to AUTH_REQUIRED stopped following it (sendLocal) and
// did not go through, or found the task gone on.
func (d *Delegation) refollow() { d.engine.reopenAndFollow(d) }

// reopenAndFollow reads the downstream task of a carried-on delegation
// again and follows it, in a goroutine the engine owns, so a slow or
// absent agent holds up nothing else; at most reopenLimit delegations
// read their task at once.
func (e *Engine) reopenAndFollow(d *Delegation) {
	if !e.track() {
		return // closed meanwhile: nothing follows the task, as after Close
	}
	go func() {
		defer e.wg.Done()
		select {
		case e.reopening <- struct{}{}:
		case <-e.ctx.Done():
			return
		}
		s, err := d.reopen(e.ctx)
		<-e.reopening
		if err != nil {
			if e.ctx.Err() != nil {
				return
			}
			// The agent may be down for now: polling retries, and gives
			// the task up only after lostAfter failures in a row.
			e.log.Warn("the task of a carried-on delegation could not be read; polling it", "delegation", d.rec.ID, "error", err)
			s = &session{}
		}
		d.follow(s)
	}()
}

// logTail squares rec, and the last status prog says was applied, with
// its log, which a process that stopped between writing the two may have
// left apart, and returns the events logged after rec's last (the record
// is written after its events, so those are the delegation's too). The
// last status is the log's, so the task read again does not log a status
// the log holds already, nor skip one it lost. An event and its record
// may also be sent together (StepStore), and a process killed then may
// leave the record kept and not its event: the log is then one short of
// rec.LastEvent, and rec goes back to the log's last event, so the events
// that follow are numbered on from it with no gap. Nobody saw the event
// that was not kept: the delegation shows an event only once it is
// stored. last, when not nil, is the log's last event, read already: when
// it is rec's last, as it is unless the process stopped between the two
// writes, the log is not read again.
func (e *Engine) logTail(ctx context.Context, rec *Record, prog *Progress, last *Event) ([]Event, error) {
	var evs []Event
	if last != nil && rec.LastEvent > 0 && last.Seq == rec.LastEvent {
		evs = []Event{*last} // what the read below returns then
	} else {
		var err error
		if evs, err = e.store.Events(ctx, rec.ID, max(rec.LastEvent-1, 0), 0); err != nil {
			return nil, fmt.Errorf("read the log of delegation %s: %w", rec.ID, err)
		}
	}
	switch {
	case rec.LastEvent == 0:
	case len(evs) > 0 && evs[0].Seq == rec.LastEvent:
		evs = evs[1:]
	case len(evs) > 0 && evs[0].Seq > rec.LastEvent:
		// Past the log's retention; what it holds still follows rec.
	default:
		// Nothing follows rec.LastEvent-1 in the log: its last event is
		// most likely that one, and otherwise the whole log says.
		before, err := e.store.Events(ctx, rec.ID, max(rec.LastEvent-2, 0), 1)
		if err == nil && (len(before) == 0 || before[0].Seq != rec.LastEvent-1) {
			before, err = e.store.Events(ctx, rec.ID, 0, 0)
		}
		if err != nil {
			return nil, fmt.Errorf("read the log of delegation %s: %w", rec.ID, err)
		}
		var last Event
		if len(before) > 0 {
			last = before[len(before)-1]
		}
		e.log.Warn("a delegation's record was kept ahead of its log: the process stopped between the two writes; its events go on from the log's last",
			"delegation", rec.ID, "recordLastEvent", rec.LastEvent, "logLastEvent", last.Seq)
		rec.LastEvent = last.Seq
		if last.Seq > 0 {
			rec.State, rec.UpdatedAt = last.State, last.At
		}
		// The record's last status may be the event that was lost: the
		// log's last one is found in what was read, or else in the whole
		// log (when only its last event was read).
		if !lastStatus(prog, before) && len(before) == 1 && last.Seq > 1 {
			all, err := e.store.Events(ctx, rec.ID, 0, 0)
			if err != nil {
				return nil, fmt.Errorf("read the log of delegation %s: %w", rec.ID, err)
			}
			before = all
		}
		prog.LastStatus = ""
		lastStatus(prog, before)
		return nil, nil
	}
	if len(evs) > 0 {
		last := evs[len(evs)-1]
		rec.LastEvent, rec.State, rec.UpdatedAt = last.Seq, last.State, last.At
	}
	lastStatus(prog, evs)
	return evs, nil
}

// lastStatus notes in prog the last agent's status message that evs
// logged, as setStatusLocked does when it logs one, and reports whether
// there was one.
func lastStatus(prog *Progress, evs []Event) bool {
	for i := len(evs) - 1; i >= 0; i-- {
		if ev := evs[i]; ev.Kind == "state" && ev.Message != nil {
			prog.LastStatus = ev.Message.ID
			return true
		}
	}
	return false
}

// reopen follows the downstream task again: when the agent streams, by
// subscribing to it (its stream starts with the task), and otherwise, or
// when the agent will not subscribe (the task ended, or waits with no
// work running), by reading the task. One call to the agent in the usual
// case: a replica taking thousands of delegations over asks an agent that
// is busy with them all the while. Each call is bounded by CallTimeout.
func (d *Delegation) reopen(ctx context.Context) (*session, error) {
	if d.prog.Streaming {
		if s, err := d.resubscribe(ctx); s != nil || err != nil {
			return s, err
		}
	}
	task, err := d.getTask(ctx, d.rec.Downstream.TaskID)
	if err != nil {
		return nil, err
	}
	return &session{first: task}, nil
}

// resubscribe subscribes to the downstream task. It returns no session
// when the agent did not open a stream that starts with an event, and an
// error when it did not answer within CallTimeout: an agent that does not
// answer is polled rather than asked again.
func (d *Delegation) resubscribe(ctx context.Context) (*session, error) {
	e := d.engine
	openCtx, opened := context.WithTimeout(ctx, e.cfg.CallTimeout)
	defer opened()
	streamCtx, cancel := context.WithCancel(d.traced(e.ctx))
	stopAfter := context.AfterFunc(openCtx, cancel)
	start := time.Now()
	st, first, ok, err := e.openStream(streamCtx, cancel, d.client.SubscribeToTask(streamCtx, &a2a.SubscribeToTaskRequest{ID: d.rec.Downstream.TaskID}))
	e.instruments.called(ctx, d.rec.Downstream.Agent, "SubscribeToTask", start, callErr(openCtx, err))
	stopAfter()
	if ok && err == nil && openCtx.Err() == nil {
		return &session{first: first, stream: st}, nil
	}
	cancel()
	if ctx.Err() == nil && openCtx.Err() != nil {
		return nil, fmt.Errorf("subscribe to task %s: %w", d.rec.Downstream.TaskID, openCtx.Err())
	}
	return nil, nil
}
