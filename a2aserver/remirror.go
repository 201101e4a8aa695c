package a2aserver

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/orchd/orchd/delegation"
)

// Mirroring a delegation carried on from the store.
//
// An A2A task of orchd is mirrored from its delegation by an a2a-go
// execution (executor.mirror). When orchd stops, that execution ends with
// the process, while the task stays as it was in the durable task store
// and the delegation's agent works on. The process that carries the
// delegation on has no execution for the task, so it writes the
// delegation's events into the task store itself: a caller polling or
// re-subscribing to the task sees it move on and end, as if orchd had
// never stopped.

// remirrorTail is how many of the latest events a carried-on delegation
// replays into its task to catch up: applying an event twice changes
// nothing, so the replay may overlap what the task already shows.
const remirrorTail = 256

// remirrorWrite bounds one write into the task store.
const remirrorWrite = 10 * time.Second

// remirrorRetryFirst and remirrorRetryMax bound the wait before a write
// into the task store that failed is tried again: it doubles from the
// first to the most, so a long outage costs a few writes per task.
const (
	remirrorRetryFirst = time.Second
	remirrorRetryMax   = 30 * time.Second
)

// resumed takes over the upstream task of a delegation the engine carries
// on from the store. It runs before anything happens to the delegation.
func (x *executor) resumed(d *delegation.Delegation) {
	rec := d.Record()
	if rec.Upstream == nil {
		return
	}
	x.takeTask(rec, rec.LastEvent)
}

// takeTask routes the upstream task of rec's delegation here and mirrors
// the delegation into it from the events after last, less remirrorTail.
func (x *executor) takeTask(rec delegation.Record, last int64) {
	up := *rec.Upstream
	up.User = upstreamUser(rec)
	x.mu.Lock()
	x.byTask[up.TaskID] = taskRoute{delegation: rec.ID, owner: up.User}
	x.mu.Unlock()
	x.wg.Go(func() { x.remirror(rec, up, last) })
}

// orphan is told by failGuard that a2a-go ends the execution of task, as
// it could not store one of its events, when known for cause. The task is
// taken over: by mirror as it returns, should it still run, or now.
func (x *executor) orphan(task a2a.TaskID, id string, cause error) {
	x.mu.Lock()
	if x.mirroring[task] {
		x.orphaned[task] = cause
		x.mu.Unlock()
		return
	}
	x.mu.Unlock()
	x.takeOver(task, id, cause)
}

// takeOver hands the task of delegation id to remirror, whose execution
// ended before the task settled, for cause when known. Not while orchd
// stops (the process that carries the delegation on mirrors it), nor
// while a cancel runs (it ends the task). A takeover for the store being
// out of reach is logged as part of that outage (writes).
func (x *executor) takeOver(task a2a.TaskID, id string, cause error) {
	x.mu.Lock()
	canceling := x.canceling[task]
	x.mu.Unlock()
	if canceling || x.stoppingCtx.Err() != nil {
		return
	}
	rec, err := x.engine.LookupHead(x.stoppingCtx, id)
	if err != nil || rec.Upstream == nil || rec.Upstream.TaskID != task {
		x.log.Warn("take over the A2A task of a delegation whose execution ended", "task", task, "delegation", id, "error", err)
		return
	}
	const msg = "the A2A task's execution ended before the task settled; orchd writes the delegation into it"
	if storeDown(cause) {
		x.writes.Failed(msg, cause, "task", task, "delegation", id)
	} else {
		args := []any{"task", task, "delegation", id}
		if cause != nil {
			args = append(args, "cause", cause)
		}
		x.log.Info(msg, args...)
	}
	x.takeTask(rec, rec.LastEvent)
}

// upstreamUser is whom the task store says the upstream task of rec
// belongs to: the user recorded with it, or, for a delegation recorded
// before owners carried their method (and task users were identity
// keys), that user as LegacyTaskUser names it.
func upstreamUser(rec delegation.Record) string {
	if rec.Owner != nil && rec.Owner.Method == "" {
		return LegacyTaskUser(rec.Upstream.User)
	}
	return rec.Upstream.User
}

// ownerContext is ctx as the task store sees a call of the task's owner.
func ownerContext(ctx context.Context, up delegation.Upstream) context.Context {
	ctx, cc := a2asrv.NewCallContext(ctx, nil)
	cc.User = &a2asrv.User{Name: up.User, Authenticated: up.User != ""}
	return ctx
}

// storeDown reports whether a task's write failed as the store was out of
// reach: unavailable, or not answering within the write's time.
func storeDown(err error) bool {
	return errors.Is(err, delegation.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// remirror writes the events of rec's delegation into the upstream task
// until the delegation ends, waits for input (the caller's next message
// starts an execution again) or orchd stops. It reads through the engine,
// so the delegation may be followed here or by another process. A write
// the task store refuses is tried again, with the events since, after a
// wait that doubles from remirrorRetryFirst to remirrorRetryMax: the
// delegation may say nothing more, and its end must reach the task.
func (x *executor) remirror(rec delegation.Record, up delegation.Upstream, last int64) {
	task := up.TaskInfo()
	id := rec.ID
	ctx, cancel := context.WithCancel(ownerContext(context.Background(), up))
	defer cancel()
	stop := context.AfterFunc(x.stoppingCtx, cancel)
	defer stop()
	after := max(last-remirrorTail, 0)
	rep := newReporter(x.engine, rec, after)
	var pending []delegation.Event
	wait := time.Duration(0)
	for {
		evs, _, err := x.engine.FollowEvents(ctx, id, after, 0)
		if err != nil {
			if ctx.Err() == nil {
				x.log.Warn("read the events of a delegation to mirror into its A2A task", "delegation", id, "task", task.TaskID, "error", err)
			}
			return
		}
		if len(evs) > 0 {
			after = evs[len(evs)-1].Seq
			// Replaying the latest is enough (see remirrorTail).
			pending = append(pending, evs...)
			pending = pending[max(len(pending)-remirrorTail, 0):]
		}
		if len(pending) > 0 {
			var arts []*a2a.Artifact
			if slices.ContainsFunc(pending, func(ev delegation.Event) bool { return ev.Artifact != nil }) {
				arts = x.artifacts(ctx, id)
			}
			done, err := x.writeTask(ctx, task, rep, pending, arts)
			switch {
			case err != nil && wait == 0:
				wait = remirrorRetryFirst
				x.writes.Failed("mirror a delegation into its A2A task; tried again until it goes through", err, "delegation", id, "task", task.TaskID)
			case err != nil:
				wait = min(2*wait, remirrorRetryMax)
			case wait > 0:
				wait = 0
				x.log.Debug("mirror a delegation into its A2A task: went through", "delegation", id, "task", task.TaskID)
			}
			if err == nil {
				x.writes.Succeeded()
				pending = nil
				if done {
					break
				}
			}
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return
			}
			continue
		}
		if err := x.engine.WaitEvents(ctx, id, after); err != nil {
			return // orchd stops
		}
	}
	rec, err := x.engine.LookupHead(ctx, id)
	if err != nil {
		return
	}
	if rec.State.Terminal() {
		x.mu.Lock()
		delete(x.byTask, task.TaskID)
		x.mu.Unlock()
		return
	}
	// Waiting for input: end the task with the delegation if it ends
	// before the caller answers, as a parked execution would. One that
	// another process follows is not watched here.
	d, ok := x.engine.Get(id)
	if !ok {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	w := &watch{}
	w.stop = d.AfterEnd(func() { x.endWaiting(ownerContext(context.Background(), up), task, d, w) })
	x.unwatchLocked(task.TaskID)
	x.watches[task.TaskID] = w
}

// artifacts are the artifacts of delegation id as they are now, for
// writeTask; none when the delegation cannot be read. For one not live
// here they are rebuilt from its log, so remirror asks only when the
// events it writes hold an artifact.
func (x *executor) artifacts(ctx context.Context, id string) []*a2a.Artifact {
	if d, ok := x.engine.Get(id); ok {
		return d.Record().Artifacts
	}
	rec, err := x.engine.Lookup(ctx, id)
	if err != nil {
		return nil
	}
	return rec.Artifacts
}

// writeTask applies events, as rep words them, to the stored task in one
// write, and reports whether the task has settled (ended, or waits for
// input) or was taken out of orchd's hands (it ended or an execution runs
// it). An artifact event puts the artifact as it is now among arts, the
// delegation's, in the task: the events replayed may overlap what the
// task shows, and a chunk applied twice would be appended twice.
func (x *executor) writeTask(ctx context.Context, info a2a.TaskInfo, rep *reporter, evs []delegation.Event, arts []*a2a.Artifact) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, remirrorWrite)
	defer cancel()
	for range 5 { // retried only when the task changed under the write
		x.mu.Lock()
		busy := x.mirroring[info.TaskID] || x.canceling[info.TaskID]
		x.mu.Unlock()
		if busy {
			return true, nil
		}
		st, err := x.tasks.Get(ctx, info.TaskID)
		if err != nil {
			return false, err
		}
		if st.Task.Status.State.Terminal() {
			return true, nil
		}
		task := *st.Task
		task.Artifacts = slices.Clone(task.Artifacts)
		task.History = slices.Clone(task.History)
		task.Metadata = maps.Clone(task.Metadata)
		var last a2a.Event
		settled := false
		for _, ev := range evs {
			up := rep.event(info, ev)
			if up == nil {
				continue
			}
			if au, ok := up.(*a2a.TaskArtifactUpdateEvent); ok {
				if i := slices.IndexFunc(arts, func(a *a2a.Artifact) bool { return a.ID == au.Artifact.ID }); i >= 0 {
					whole := *au
					whole.Artifact, whole.Append = arts[i], false
					up = &whole
				}
			}
			applyTo(&task, up)
			last = up
			if settling(ev) {
				// AUTH_REQUIRED is followed on, as the engine does.
				settled = ev.State.Terminal() || ev.State == a2a.TaskStateInputRequired
			}
		}
		if last == nil {
			return settled, nil
		}
		_, err = x.tasks.Update(ctx, &taskstore.UpdateRequest{Task: &task, Event: last, PrevTask: st.Task, PrevVersion: st.Version})
		if !errors.Is(err, taskstore.ErrConcurrentModification) {
			return settled, err
		}
	}
	return false, errors.New("the task kept changing under the write")
}

// applyTo folds an upstream event into the task as a2a-go's task manager
// does, except that applying one twice changes nothing: an artifact
// replaces the one with its id (writeTask gives whole artifacts), and a
// status message goes to the history only once.
func applyTo(task *a2a.Task, ev a2a.Event) {
	switch e := ev.(type) {
	case *a2a.TaskArtifactUpdateEvent:
		if i := slices.IndexFunc(task.Artifacts, func(a *a2a.Artifact) bool { return a.ID == e.Artifact.ID }); i >= 0 {
			task.Artifacts[i] = e.Artifact
		} else {
			task.Artifacts = append(task.Artifacts, e.Artifact)
		}
	case *a2a.TaskStatusUpdateEvent:
		if m := task.Status.Message; m != nil && (e.Status.Message == nil || m.ID != e.Status.Message.ID) &&
			!slices.ContainsFunc(task.History, func(h *a2a.Message) bool { return h.ID == m.ID }) {
			task.History = append(task.History, m)
		}
		if e.Metadata != nil {
			if task.Metadata == nil {
				task.Metadata = map[string]any{}
			}
			maps.Copy(task.Metadata, e.Metadata)
		}
		if m := task.Status.Message; e.Status.State == task.Status.State && e.Status.Message == nil && m != nil {
			return // the same state again, with no news
		}
		task.Status = e.Status
	}
}
