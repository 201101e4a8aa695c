package a2aserver

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// A task in a terminal state (COMPLETED, FAILED, CANCELED, REJECTED)
// takes nothing more: A2A 1.0 refuses both a message to it (§3.1.1) and a
// subscription to it (§3.1.6) with UnsupportedOperationError (-32004).
// a2a-go v2.4.0 answers the first with InvalidParamsError (-32602) and the
// second with TaskNotFoundError (-32001); orchd answers both as the
// specification says, over every binding and both versions, since its
// interceptors and handler serve them all.

// terminalRefusal is the UnsupportedOperationError for a call that needs
// task id, which ended in state s, to be still going; what names the call.
func terminalRefusal(id a2a.TaskID, s a2a.TaskState, what string) error {
	return a2a.NewError(a2a.ErrUnsupportedOperation,
		fmt.Sprintf("task %s is %s: a task in a terminal state takes no %s; GetTask reads it, and a new message without its taskId starts a new task", id, s, what))
}

// terminalSend refuses a SendMessage or SendStreamingMessage to a task in
// a terminal state with terminalRefusal, before a2a-go loads the task
// (which would answer InvalidParamsError). The task store answers only
// the task's owner, so another caller's task is left to a2a-go, which
// answers TaskNotFoundError, and nothing of it is told.
type terminalSend struct {
	a2asrv.PassthroughCallInterceptor
	tasks taskstore.Store
}

func (s terminalSend) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	if m := cc.Method(); m != "SendMessage" && m != "SendStreamingMessage" {
		return ctx, nil, nil
	}
	smr, ok := req.Payload.(*a2a.SendMessageRequest)
	if !ok || smr == nil || smr.Message == nil || smr.Message.TaskID == "" {
		return ctx, nil, nil
	}
	st, err := s.tasks.Get(ctx, smr.Message.TaskID)
	if err != nil || !st.Task.Status.State.Terminal() {
		return ctx, nil, nil //nolint:nilerr // an unknown task is a2a-go's to answer
	}
	return ctx, nil, terminalRefusal(smr.Message.TaskID, st.Task.Status.State, "more messages")
}
