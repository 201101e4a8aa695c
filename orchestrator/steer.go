package orchestrator

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
type steerRoute struct {
	a2asrv.PassthroughCallInterceptor
	x     *executor
	tasks taskstore.Store
}

func (s steerRoute) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	msg, control, ok := steering.FromCall(cc, req)
	if !ok {
		return ctx, nil, nil
	}
	if err := steering.Check(cc, msg, control, orchdSteering); err != nil {
		return ctx, nil, err
	}
	s.x.mu.Lock()
	id, known := s.x.byTask[msg.TaskID]
	s.x.mu.Unlock()
	if !known {
		return ctx, nil, s.noDelegation(ctx, msg.TaskID)
	}
	down := *msg
	down.TaskID, down.ContextID = "", ""
	down.Metadata = maps.Clone(msg.Metadata)
	receipt, err := s.x.engine.Steer(ctx, id, control, &down)
	switch {
	case errors.Is(err, delegation.ErrNotSteerable), errors.Is(err, delegation.ErrEnded):
		return ctx, nil, a2a.NewError(a2a.ErrUnsupportedOperation, err.Error())
	case errors.Is(err, delegation.ErrNotFound):
		return ctx, nil, a2a.NewError(a2a.ErrTaskNotFound, err.Error())
	case err != nil:
		return ctx, nil, err
	}
	if control == steering.Interrupt {
		s.waitSettled(ctx, msg.TaskID)
	}
	st, err := s.tasks.Get(ctx, msg.TaskID)
	if err != nil {
		return ctx, nil, fmt.Errorf("read task %s: %w", msg.TaskID, err)
	}
	ext := orchdSteering.Extension()
	cc.Extensions().Activate(&ext)
	return ctx, steering.Acknowledgement(st.Task, msg, receipt), nil
}

// noDelegation explains a steering message to a task orchd is not
// delegating.
func (s steerRoute) noDelegation(ctx context.Context, id a2a.TaskID) error {
	st, err := s.tasks.Get(ctx, id)
	if err != nil {
		return a2a.NewError(a2a.ErrTaskNotFound, fmt.Sprintf("task %s not found", id))
	}
	return a2a.NewError(a2a.ErrUnsupportedOperation,
		fmt.Sprintf("task %s is %s and has no delegation in progress to steer or interrupt", id, st.Task.Status.State))
}

// waitSettled waits for the upstream task to leave WORKING after an
// interrupt (the executor mirrors the hop's INPUT_REQUIRED), so the
// acknowledgement shows the settled state.
func (s steerRoute) waitSettled(ctx context.Context, id a2a.TaskID) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		st, err := s.tasks.Get(ctx, id)
		if err != nil || st.Task.Status.State != a2a.TaskStateWorking {
			return
		}
		time.Sleep(200 * time.Microsecond)
	}
}
