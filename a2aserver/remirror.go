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

// resumed takes over the upstream task of a delegation the engine carries
// on from the store. It runs before anything happens to the delegation.
func (x *executor) resumed(d *delegation.Delegation) {
	rec := d.Record()
	if rec.Upstream == nil {
		return
	}
	up := *rec.Upstream
	up.User = upstreamUser(rec)
	x.mu.Lock()
	x.byTask[up.TaskID] = taskRoute{delegation: rec.ID, owner: up.User}
	x.mu.Unlock()
	x.wg.Go(func() { x.remirror(d, up, rec.LastEvent) })
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

// remirror writes the delegation's events into the upstream task until the
// delegation ends, waits for input (the caller's next message starts an
// execution again) or orchd stops.
func (x *executor) remirror(d *delegation.Delegation, up delegation.Upstream, last int64) {
	task := up.TaskInfo()
	ctx, cancel := context.WithCancel(ownerContext(context.Background(), up))
	defer cancel()
	stop := context.AfterFunc(x.stoppingCtx, cancel)
	defer stop()
	from := max(last-remirrorTail, 0)
	rep := newReporter(x.engine, d.Record(), from)
	evs, _, err := x.engine.Events(ctx, d.ID(), from, 0)
	if err != nil {
		x.log.Warn("read the events of a carried-on delegation", "delegation", d.ID(), "error", err)
	}
	after := last
	for {
		if len(evs) > 0 {
			after = max(after, evs[len(evs)-1].Seq)
			done, err := x.writeTask(ctx, task, rep, evs, d.Record().Artifacts)
			if err != nil {
				x.log.Warn("mirror a carried-on delegation into its A2A task", "delegation", d.ID(), "task", task.TaskID, "error", err)
			}
			if done {
				break
			}
		}
		// The wake-up first, then the read, so that an event in between
		// is not missed. The read goes through the engine, not the
		// delegation's memory, which keeps only its latest events: a slow
		// write may have let more go by.
		changed := d.Changed()
		if evs, _, err = x.engine.Events(ctx, d.ID(), after, 0); err != nil {
			x.log.Warn("read the events of a carried-on delegation; tried again at its next event", "delegation", d.ID(), "error", err)
		}
		if len(evs) > 0 {
			continue
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
	rec := d.Record()
	if rec.State.Terminal() {
		x.mu.Lock()
		delete(x.byTask, task.TaskID)
		x.mu.Unlock()
		return
	}
	// Waiting for input: end the task with the delegation if it ends
	// before the caller answers, as a parked execution would.
	x.mu.Lock()
	defer x.mu.Unlock()
	w := &watch{}
	w.stop = d.AfterEnd(func() { x.endWaiting(ownerContext(context.Background(), up), task, d, w) })
	x.unwatchLocked(task.TaskID)
	x.watches[task.TaskID] = w
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
