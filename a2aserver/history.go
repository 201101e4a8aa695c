package a2aserver

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// historyLimit honours historyLength where a2a-go does not. A2A 1.0
// (§3.2.4) gives it one meaning wherever it appears: unset means no limit
// imposed by the caller (orchd then returns the whole history), 0 means no
// history (the field is omitted), and N > 0 means at most the N most recent
// messages. a2a-go applies it to GetTask and, in its task stores, to
// ListTasks, but returns SendMessage's Task with its whole history whatever
// SendMessageConfiguration.historyLength says. historyLimit cuts every Task
// a SendMessage or SendStreamingMessage answers with, an early answer such
// as a steering acknowledgement included, and GetTask's too, so the rule
// holds whichever layer produced the Task. A negative value counts as
// unset, as a2a-go counts it.
//
// It must come before the interceptors that answer early (steerRoute,
// earlyDelegation): a2a-go runs After only for the interceptors up to the
// one that answered.
type historyLimit struct {
	a2asrv.PassthroughCallInterceptor
}

var _ a2asrv.CallInterceptor = historyLimit{}

// historyLengthKey carries a call's historyLength from Before to After.
type historyLengthKey struct{}

func (historyLimit) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	var n *int
	switch p := req.Payload.(type) {
	case *a2a.SendMessageRequest:
		if p != nil && p.Config != nil {
			n = p.Config.HistoryLength
		}
	case *a2a.GetTaskRequest:
		if p != nil {
			n = p.HistoryLength
		}
	}
	if n == nil || *n < 0 {
		return ctx, nil, nil
	}
	return context.WithValue(ctx, historyLengthKey{}, *n), nil, nil
}

func (historyLimit) After(ctx context.Context, _ *a2asrv.CallContext, resp *a2asrv.Response) error {
	n, ok := ctx.Value(historyLengthKey{}).(int)
	if !ok {
		return nil
	}
	if t, ok := resp.Payload.(*a2a.Task); ok && t != nil {
		resp.Payload = limitHistory(t, n)
	}
	return nil
}

// limitHistory returns t with at most the n most recent messages of its
// history, and none when n is 0. t itself is never changed: the Task may
// be shared with a2a-go's other readers of the same event.
func limitHistory(t *a2a.Task, n int) *a2a.Task {
	if n > 0 && len(t.History) <= n || n == 0 && t.History == nil {
		return t
	}
	c := *t
	if n == 0 {
		c.History = nil
	} else {
		c.History = t.History[len(t.History)-n:]
	}
	return &c
}
