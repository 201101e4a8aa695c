package steering

import (
	"context"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// Executions follows the executions a2a-go runs, task by task, so that an
// answer to a message can wait until a2a-go has let go of the task's
// execution: from then on a message to the task starts a new execution
// instead of being refused with "task execution is already in progress".
//
// a2a-go lets go in steps: it stores the executor's final event, sends
// push notifications, marks the execution as ending (a new message then
// waits for it to end and starts a new one), and only then ends the
// context the executor runs in. Executions is the
// a2asrv.ExecutorContextInterceptor that notes that context for each task;
// register it with a2asrv.WithExecutorContextInterceptor. A [Steering]
// has one (see [Steering.ExecutorInterceptor]); a router that answers
// interrupts itself, as orchd does, registers its own.
type Executions struct {
	mu sync.Mutex
	// running holds, by task, the Done channel of the context a2a-go runs
	// the task's current execution in, until that context ends.
	running map[a2a.TaskID]<-chan struct{}
}

var _ a2asrv.ExecutorContextInterceptor = (*Executions)(nil)

// NewExecutions returns an Executions that knows of no execution yet.
func NewExecutions() *Executions {
	return &Executions{running: map[a2a.TaskID]<-chan struct{}{}}
}

// Intercept notes the context of an execution under its task; the note
// goes when the context ends.
func (e *Executions) Intercept(ctx context.Context, ec *a2asrv.ExecutorContext) (context.Context, error) {
	done := ctx.Done()
	// A cancelation (no message) is not the task's execution, and its
	// context may never end.
	if ec == nil || ec.Message == nil || done == nil {
		return ctx, nil
	}
	id := ec.TaskID
	e.mu.Lock()
	e.running[id] = done
	e.mu.Unlock()
	context.AfterFunc(ctx, func() {
		e.mu.Lock()
		// The task's next execution may have been noted already.
		if e.running[id] == done {
			delete(e.running, id)
		}
		e.mu.Unlock()
	})
	return ctx, nil
}

// Released returns a channel closed once a2a-go has let go of the task's
// current execution, or nil when it runs none for the task (none was
// intercepted, or it was already let go).
func (e *Executions) Released(id a2a.TaskID) <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running[id]
}
