package a2aserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/steering"
)

// authInput passes the caller's answer to a task waiting for
// authentication on to its delegation, and so down the chain to the hop
// that asked.
//
// a2a-go v2.4.0 ends an execution at INPUT_REQUIRED, so the caller's
// answer to such a task starts a new one (executor.Execute), but not at
// AUTH_REQUIRED: orchd's execution of the task goes on mirroring the
// delegation, and a2a-go would refuse the answer as "task execution is
// already in progress". So a message to a task that execution mirrors,
// whose delegation waits AUTH_REQUIRED, is taken here, before a2a-go's
// handler: its owner's message is sent to the delegation's hop as input
// (delegation.Engine.Send), and the answer is the task as it goes on
// (WORKING); the running execution mirrors what follows.
type authInput struct {
	a2asrv.PassthroughCallInterceptor
	x     *executor
	tasks taskstore.Store
}

func (a authInput) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	if m := cc.Method(); m != "SendMessage" && m != "SendStreamingMessage" {
		return ctx, nil, nil
	}
	smr, ok := req.Payload.(*a2a.SendMessageRequest)
	if !ok || smr.Message == nil || smr.Message.TaskID == "" {
		return ctx, nil, nil
	}
	msg := smr.Message
	a.x.mu.Lock()
	r, known := a.x.byTask[msg.TaskID]
	mirrored := a.x.mirroring[msg.TaskID]
	a.x.mu.Unlock()
	// Only while this process's execution mirrors the task, and only for
	// its owner: anything else goes to a2a-go, which answers as it does.
	if !known || !mirrored || r.owner != steering.UserName(cc.User) {
		return ctx, nil, nil
	}
	rec, err := a.x.engine.LookupHead(ctx, r.delegation)
	if err != nil {
		return ctx, nil, inputError(err)
	}
	if rec.State != a2a.TaskStateAuthRequired {
		return ctx, nil, nil // a2a-go answers as it does
	}
	rec, err = a.x.engine.Send(ctx, r.delegation, inputFrom(msg))
	if err != nil {
		return ctx, nil, inputError(err)
	}
	st, err := a.tasks.Get(ctx, msg.TaskID)
	if err != nil {
		return ctx, nil, fmt.Errorf("read task %s: %w", msg.TaskID, err)
	}
	task := *st.Task
	task.History = slices.Clone(task.History)
	if task.Status.Message != nil {
		task.History = append(task.History, task.Status.Message)
	}
	task.History = append(task.History, msg)
	now := time.Now()
	task.Status = a2a.TaskStatus{State: rec.State, Timestamp: &now}
	return ctx, &task, nil
}

// inputError is the A2A error a caller's answer refused downstream is
// answered with: the hop's own A2A error when it gave one of those orchd
// passes on, naming the hop; a delegation that ended or stopped waiting
// meanwhile as an unsupported operation, one no longer kept as not found;
// else an internal error.
func inputError(err error) error {
	for _, sentinel := range passedOn {
		if errors.Is(err, sentinel) {
			return a2a.NewError(sentinel, err.Error())
		}
	}
	if errors.Is(err, delegation.ErrEnded) || errors.Is(err, delegation.ErrNotWaiting) {
		return a2a.NewError(a2a.ErrUnsupportedOperation, err.Error())
	}
	if errors.Is(err, delegation.ErrNotFound) {
		return a2a.NewError(a2a.ErrTaskNotFound, err.Error())
	}
	return a2a.NewError(a2a.ErrInternalError, err.Error())
}
