package a2aserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/eventqueue"
)

// A cancel that meets an ending execution.
//
// a2a-go v2.4.0 sends a CancelTask for a task with a running execution
// down that execution's event queue (internal/taskexec/local_manager.go,
// handleCancelWithConcurrentRun, with a TODO saying so). When the
// execution ends meanwhile (it parked the task waiting for input, as an
// interrupt does), the cancel fails although nothing is wrong: with an
// internal error when the queue was closed already, or as not cancelable
// when the execution's last event (input required) came first. Asked
// again a moment later, with the execution gone, a2a-go cancels the task
// through the executor. A caller who interrupts and then cancels on a
// busy machine met exactly that. cancelRetry asks again, a few times,
// while the error is one of those two and the task has not ended.

// Retries of a cancel that met an ending execution: cancelRetries more
// tries, cancelRetryWait apart at first, doubling.
const (
	cancelRetries   = 5
	cancelRetryWait = 10 * time.Millisecond
)

// cancelRetry is a2a-go's request handler with CancelTask asked again
// when it met an execution that was ending.
type cancelRetry struct {
	a2asrv.RequestHandler
}

var _ a2asrv.RequestHandler = (*cancelRetry)(nil)

// withCancelRetry makes h, a handler a2asrv.NewHandler returned (perhaps
// wrapped by withSubscribe), retry CancelTask as cancelRetry does.
func withCancelRetry(h a2asrv.RequestHandler) (a2asrv.RequestHandler, error) {
	ih, ok := h.(*a2asrv.InterceptedHandler)
	if !ok {
		return nil, fmt.Errorf("a2a-go's request handler is a %T, not the *a2asrv.InterceptedHandler orchd wraps to retry CancelTask", h)
	}
	ih.Handler = &cancelRetry{RequestHandler: ih.Handler}
	return ih, nil
}

// CancelTask implements a2asrv.RequestHandler.
func (h *cancelRetry) CancelTask(ctx context.Context, req *a2a.CancelTaskRequest) (*a2a.Task, error) {
	wait := cancelRetryWait
	for try := 0; ; try++ {
		task, err := h.RequestHandler.CancelTask(ctx, req)
		if err == nil || try == cancelRetries || !h.metEndingExecution(ctx, req.ID, err) {
			return task, err
		}
		select {
		case <-ctx.Done():
			return task, err
		case <-time.After(wait):
		}
		wait *= 2
	}
}

// metEndingExecution reports whether a cancel's error is one a2a-go
// gives when the task's execution ended as the cancel was sent down its
// queue: the queue closed, or the task not cancelable although it has
// not ended (it waits for input).
func (h *cancelRetry) metEndingExecution(ctx context.Context, id a2a.TaskID, err error) bool {
	switch {
	case errors.Is(err, eventqueue.ErrQueueClosed):
		return true
	case errors.Is(err, a2a.ErrTaskNotCancelable):
		task, gerr := h.RequestHandler.GetTask(ctx, &a2a.GetTaskRequest{ID: id})
		return gerr == nil && !task.Status.State.Terminal()
	}
	return false
}
