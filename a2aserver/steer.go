package a2aserver

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/steering"
)

// steerRoute answers steering messages to orchd's tasks by passing them to
// the delegation of the task, which passes them to its hop only when the
// hop's pinned card advertises the mode. The acknowledgement is the
// upstream task with the message in its history and the receipt of every
// hop in its metadata.
//
// An interrupt is acknowledged once a2a-go has let go of orchd's execution
// of the task (the one mirroring the delegation), so the caller's next
// message resumes the task rather than meeting "task execution is already
// in progress".
type steerRoute struct {
	a2asrv.PassthroughCallInterceptor
	x     *executor
	tasks taskstore.Store
	// execs follows a2a-go's executions of orchd's tasks; settle bounds
	// how long an interrupt waits for a2a-go to let go of one.
	execs  *steering.Executions
	settle time.Duration
}

// settleTimeout is how long an interrupt's acknowledgement waits for
// a2a-go to let go of orchd's execution of the task.
const settleTimeout = 10 * time.Second

func (s steerRoute) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	msg, control, ok := steering.FromCall(cc, req)
	if !ok {
		return ctx, nil, nil
	}
	if err := steering.Check(cc, msg, control, orchdSteering); err != nil {
		return ctx, nil, err
	}
	// Only the task's owner reaches its delegation: nothing is delivered,
	// and nothing of the delegation named, before that is known.
	s.x.mu.Lock()
	r, known := s.x.byTask[msg.TaskID]
	s.x.mu.Unlock()
	if known && r.owner != steering.UserName(cc.User) {
		return ctx, nil, steering.TaskNotFound(msg.TaskID)
	}
	id := r.delegation
	if !known {
		// Delegated by another process sharing the store, perhaps; the
		// store answers only the task's owner.
		if st, err := s.tasks.Get(ctx, msg.TaskID); err == nil && !st.Task.Status.State.Terminal() {
			id, known = taskDelegation(st.Task)
		}
	}
	if !known {
		return ctx, nil, s.noDelegation(ctx, msg.TaskID)
	}
	// The execution running now is the one the interrupt ends (a retry of
	// an interrupt still in flight waits for the same one, as the
	// delegation answers it once the first settled).
	var released <-chan struct{}
	if control == steering.Interrupt {
		released = s.execs.Released(msg.TaskID)
	}
	// A steer leaves the task as it is, so the acknowledgement's task is
	// read while the hops take the steer, not after; an interrupt's is
	// read once the task settled.
	var early chan storedTask
	if control == steering.Steer {
		early = make(chan storedTask, 1)
		go func() {
			st, err := s.tasks.Get(ctx, msg.TaskID)
			early <- storedTask{st, err}
		}()
	}
	down := *msg
	down.TaskID, down.ContextID = "", ""
	down.Metadata = maps.Clone(msg.Metadata)
	receipt, err := s.x.engine.Steer(ctx, id, control, &down)
	var read storedTask
	if early != nil {
		read = <-early
	}
	switch {
	case errors.Is(err, delegation.ErrNotSteerable), errors.Is(err, delegation.ErrEnded):
		return ctx, nil, a2a.NewError(a2a.ErrUnsupportedOperation, err.Error())
	case errors.Is(err, delegation.ErrNotFound):
		return ctx, nil, a2a.NewError(a2a.ErrTaskNotFound, err.Error())
	case err != nil:
		return ctx, nil, err
	}
	if control == steering.Interrupt && s.settled(id) {
		s.waitReleased(ctx, msg.TaskID, released)
	}
	if early == nil {
		read.st, read.err = s.tasks.Get(ctx, msg.TaskID)
	}
	if read.err != nil {
		return ctx, nil, fmt.Errorf("read task %s: %w", msg.TaskID, read.err)
	}
	ext := orchdSteering.Extension()
	cc.Extensions().Activate(&ext)
	return ctx, steering.Acknowledgement(read.st.Task, msg, receipt), nil
}

// storedTask is a read of the task store: the task or why not.
type storedTask struct {
	st  *taskstore.StoredTask
	err error
}

// noDelegation explains a steering message to a task orchd is not
// delegating.
func (s steerRoute) noDelegation(ctx context.Context, id a2a.TaskID) error {
	st, err := s.tasks.Get(ctx, id)
	if err != nil {
		return steering.TaskNotFound(id)
	}
	return a2a.NewError(a2a.ErrUnsupportedOperation,
		fmt.Sprintf("task %s is %s and has no delegation in progress to steer or interrupt", id, st.Task.Status.State))
}

// settled reports whether the delegation stopped WORKING, as it does when
// an interrupt took effect; then the execution mirroring it ends too. A
// delegation still WORKING took no interrupt now: its hop did not stop,
// or this is a retry of an interrupt from before the task resumed.
func (s steerRoute) settled(id string) bool {
	d, ok := s.x.engine.Get(id)
	return !ok || d.Record().State != a2a.TaskStateWorking
}

// waitReleased waits, after an interrupt, until a2a-go has let go of the
// task's execution that was running when the interrupt came (released;
// nil when none was): the executor mirrors the hop's INPUT_REQUIRED,
// a2a-go stores it and then lets go, so the acknowledgement shows the
// settled state and the next message resumes the task. Past s.settle it
// gives up and says so in the log; the interrupt is acknowledged anyway,
// since every hop took it.
func (s steerRoute) waitReleased(ctx context.Context, id a2a.TaskID, released <-chan struct{}) {
	if released == nil {
		return
	}
	t := time.NewTimer(s.settle)
	defer t.Stop()
	select {
	case <-released:
	case <-ctx.Done():
	case <-t.C:
		s.x.log.WarnContext(ctx, "interrupt acknowledged while orchd's execution of the task still runs; a message sent now may be refused as already in progress",
			"task", id, "waited", s.settle)
	}
}
