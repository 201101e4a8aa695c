package a2aserver

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// failGuard is the task store as a2a-go's handler writes it. When a2a-go
// cannot process an event of an execution (it could not store it, say),
// it marks the task FAILED, writing the task with that event, and ends
// the execution. An orchd task mirrors its delegation, which a failed
// write into the task store does not touch: the delegation works on, or
// ended as its agent said. So such a write, for a task whose delegation
// has not failed, is refused. The execution then ends with the error,
// and the task is handed to remirror (executor.orphan), which writes the
// delegation's events into it once the store takes them. A task that
// fails for its executor's own error (no event) fails as before.
type failGuard struct {
	taskstore.Store
	x *executor
}

// Update implements taskstore.Store. It keeps the error of a write that
// failed (executor.failedWrites), as the cause of a takeover that
// follows, until the task's next write: a2a-go marks the task FAILED
// next. A terminal task is written no more, so nothing is kept for it.
func (g failGuard) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	if id, err := g.check(ctx, req); err != nil {
		cause, _ := g.x.failedWrites.LoadAndDelete(req.Task.ID)
		causeErr, _ := cause.(error)
		g.x.orphan(req.Task.ID, id, causeErr)
		return taskstore.TaskVersionMissing, err
	}
	v, err := g.Store.Update(ctx, req)
	if err != nil && !req.Task.Status.State.Terminal() {
		g.x.failedWrites.Store(req.Task.ID, err)
	} else {
		g.x.failedWrites.Delete(req.Task.ID)
	}
	return v, err
}

// check refuses an update that marks a task FAILED for an event that
// does not say so, while the delegation behind the task, whose id it
// returns, has not failed (or cannot be read).
func (g failGuard) check(ctx context.Context, req *taskstore.UpdateRequest) (string, error) {
	t := req.Task
	if t == nil || t.Status.State != a2a.TaskStateFailed || req.Event == nil || saysFailed(req.Event) {
		return "", nil
	}
	id, known := taskDelegation(t)
	if !known {
		return "", nil // a task orchd refused to delegate
	}
	rec, err := g.x.engine.LookupHead(ctx, id)
	if err == nil && rec.State == a2a.TaskStateFailed {
		return id, nil
	}
	state := "cannot be read"
	if err == nil {
		state = "is " + string(rec.State)
	}
	return id, fmt.Errorf("task %s mirrors delegation %s, which %s: it is not marked FAILED for an event that could not be processed; orchd writes the delegation into it once the store takes writes",
		t.ID, id, state)
}

// saysFailed reports whether ev is itself a FAILED status or task.
func saysFailed(ev a2a.Event) bool {
	switch e := ev.(type) {
	case *a2a.TaskStatusUpdateEvent:
		return e.Status.State == a2a.TaskStateFailed
	case *a2a.Task:
		return e.Status.State == a2a.TaskStateFailed
	}
	return false
}
