package a2aserver

import (
	"context"
	"maps"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/delegation"
)

// settleWait bounds how long a blocking SendMessage waits, before a2a-go's
// task machinery runs, for its delegation to end (settledTask).
//
// Work that ends within it is answered with the finished task, stored
// once. Longer work goes to the machinery, which replays the delegation's
// events from the first, so the caller sees the same answer either way.
// Until the work ends or the wait is over, no upstream task is stored. The
// caller of a blocking send learns the task's id only from the answer, so
// it cannot name the task sooner anyway; only its ListTasks would miss it,
// for at most this long.
const settleWait = 100 * time.Millisecond

// settledTask answers a blocking SendMessage whose delegation ends within
// settleWait with the upstream task as a2a-go's machinery would have
// made it from the same events, stored with a single write; a
// SendStreamingMessage whose agent ended the work with its first answer
// with that task as the stream's one event, as the agent's own stream
// was; and a SendMessage asking for an immediate answer, whose agent
// ended the work so, with that task, finished. It returns nil, leaving
// the message to the machinery, when:
//   - the call carries a push config: it needs the task while it runs;
//   - the call streams, or asks for an immediate answer, and the agent's
//     first answer did not end the work: the stream shows each event as
//     it comes, and the immediate answer is the task as it starts;
//   - the delegation waits for input, or is not over within settleWait;
//   - ctx ends, or the task cannot be stored.
//
// Why: a2a-go's machinery stores the upstream task at every event, each
// store write after a deep copy of the task (internal/taskupdate
// manager.go:86, :119, :158, :231), which made a Task answer through orchd
// cost several milliseconds more than the agent's own.
//
// up is the task settles named before the work was delegated; a record
// stored at once already names it (delegation.KeepEndedUpstream), and
// is not written again. along, when not nil, stored that task as the
// record was stored, for work the agent ended at once.
func (x *executor) settledTask(ctx context.Context, cc *a2asrv.CallContext, smr *a2a.SendMessageRequest, d *delegation.Delegation, up *delegation.Upstream, along *alongside) *a2a.Task {
	if up == nil {
		return nil
	}
	if task, tried := along.kept(); tried {
		return task // stored as the delegation was, or nil when it could not be
	}
	wait := settleWait
	if cc.Method() == "SendStreamingMessage" || (smr.Config != nil && smr.Config.ReturnImmediately) {
		// A stream shows the work as it goes, and an immediate answer
		// cannot wait for it: only work the agent ended with its first
		// answer has nothing more to show than the finished task.
		if !d.SettledAtOnce() {
			return nil
		}
		wait = 0
	}
	evs, ok := x.settledEvents(ctx, d.ID(), wait)
	if !ok {
		return nil
	}
	rec := d.Record()
	task, err := x.keepSettled(ctx, smr.Message, *up, rec, evs)
	if err != nil {
		x.log.DebugContext(ctx, "store the settled A2A task; the task machinery takes the message", "delegation", d.ID(), "error", err)
		return nil
	}
	if rec.Upstream == nil || *rec.Upstream != *up {
		if err := x.engine.SetUpstream(ctx, d.ID(), *up); err != nil {
			x.log.WarnContext(ctx, "keep the A2A task of a delegation", "task", up.TaskID, "delegation", d.ID(), "error", err)
		}
	}
	return task
}

// keepSettled stores the upstream task up of a settled delegation, rec
// with its events evs, as a2a-go's machinery would have made it from the
// same events, asked for with msg, and returns it.
func (x *executor) keepSettled(ctx context.Context, msg *a2a.Message, up delegation.Upstream, rec delegation.Record, evs []delegation.Event) (*a2a.Task, error) {
	info := up.TaskInfo()
	rep := newReporter(x.engine, rec, 0)
	task := rep.task(info, msg)
	for _, ev := range evs {
		if uev := rep.event(info, ev); uev != nil {
			foldEvent(task, uev)
		}
	}
	if _, err := x.tasks.Create(ctx, task); err != nil {
		return nil, err
	}
	return task, nil
}

// settles returns the upstream task a call's delegation is answered with
// when it settles (settledTask), named before the work is delegated; nil
// for a call that is never answered so: one that carries a push config
// (it needs the task while it runs), or one that neither sends nor
// streams a message.
func settles(cc *a2asrv.CallContext, smr *a2a.SendMessageRequest) *delegation.Upstream {
	switch {
	case smr.Config != nil && smr.Config.PushConfig != nil:
		return nil
	case cc.Method() != "SendMessage" && cc.Method() != "SendStreamingMessage":
		return nil
	}
	up := &delegation.Upstream{TaskID: a2a.NewTaskID(), ContextID: smr.Message.ContextID}
	if up.ContextID == "" {
		up.ContextID = a2a.NewContextID()
	}
	if cc.User != nil {
		up.User = cc.User.Name
	}
	return up
}

// settledEvents returns the delegation's events up to the one that ends
// it, waiting up to wait; false when it does not end meanwhile or waits
// for input first.
func (x *executor) settledEvents(ctx context.Context, id string, wait time.Duration) ([]delegation.Event, bool) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	var all []delegation.Event
	var after int64
	for {
		evs, ended, err := x.engine.Events(ctx, id, after, 0)
		if err != nil {
			return nil, false
		}
		for i, ev := range evs {
			if !settling(ev) {
				continue
			}
			if ev.State.Terminal() {
				return append(all, evs[:i+1]...), true
			}
			if ev.State == a2a.TaskStateInputRequired || ev.State == a2a.TaskStateAuthRequired {
				return nil, false
			}
		}
		if ended {
			// Ended without a final event of its own (the log was cut):
			// the machinery words the end from the record.
			return nil, false
		}
		all = append(all, evs...)
		if len(evs) > 0 {
			after = evs[len(evs)-1].Seq
		}
		if wait == 0 || x.engine.WaitEvents(ctx, id, after) != nil {
			return nil, false
		}
	}
}

// foldEvent applies an upstream event to the task as a2a-go's task
// machinery does when it stores it (internal/taskupdate/manager.go): an
// artifact update adds the artifact, replaces the one with its id, or
// appends its parts; a status update moves the previous status message to
// the history, merges its metadata and becomes the status. Nothing the
// event holds is changed: parts and maps are copied before they grow.
func foldEvent(task *a2a.Task, ev a2a.Event) {
	switch ev := ev.(type) {
	case *a2a.TaskArtifactUpdateEvent:
		task.Artifacts, _ = delegation.FoldArtifact(task.Artifacts, ev.Artifact, ev.Append)
	case *a2a.TaskStatusUpdateEvent:
		if task.Status.Message != nil {
			task.History = append(task.History, task.Status.Message)
		}
		if ev.Metadata != nil {
			if task.Metadata == nil {
				task.Metadata = map[string]any{}
			}
			maps.Copy(task.Metadata, ev.Metadata)
		}
		task.Status = ev.Status
	}
}

// alongside keeps the upstream task up of a call answered once settled
// (settledTask) as delegation.KeepEndedUpstream asks: for work the agent
// ended with its first answer, the task is stored while the delegation's
// record is, one round trip to the store instead of one after the other. Its fields are
// read once the delegation returns.
type alongside struct {
	x     *executor
	msg   *a2a.Message
	up    delegation.Upstream
	tried bool      // keep ran: the work ended at once
	task  *a2a.Task // what keep stored; nil when it could not
}

// keep is the keep of delegation.KeepEndedUpstream.
func (a *alongside) keep(ctx context.Context, rec delegation.Record, evs []delegation.Event) error {
	a.tried = true
	t, err := a.x.keepSettled(ctx, a.msg, a.up, rec, evs)
	a.task = t
	return err // logged by the engine; the task machinery takes the message
}

// kept is the task keep stored, and whether keep ran; nothing for a nil
// alongside.
func (a *alongside) kept() (task *a2a.Task, tried bool) {
	if a == nil {
		return nil, false
	}
	return a.task, a.tried
}
