package a2aserver

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/policies"
)

// authorizeA2A refuses an A2A call its caller may not make, with A2A's
// unauthorized error (-31403). Calls on one task are further kept to the
// task's owner by the task store, which answers others "task not found".
type authorizeA2A struct {
	a2asrv.PassthroughCallInterceptor
	authz httpgate.Authorizer
}

func (i authorizeA2A) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	newTask := true
	if smr, ok := req.Payload.(*a2a.SendMessageRequest); ok && smr.Message != nil && smr.Message.TaskID != "" {
		newTask = false
	}
	action, ok := policies.A2AAction(cc.Method(), newTask)
	if !ok {
		return ctx, nil, a2a.NewError(a2a.ErrUnauthorized, fmt.Sprintf("%s is not an A2A method orchd authorizes", cc.Method()))
	}
	// The task store keeps tasks to their owners; the resource is the
	// caller's own.
	kind := policies.ResourceDelegation
	if action == policies.ActionAgentsRead {
		kind = policies.ResourceAgent
	}
	if dec := i.authz.Decide(ctx, action, i.authz.Own(ctx, kind)); !dec.Allowed {
		return ctx, nil, a2a.NewError(a2a.ErrUnauthorized, fmt.Sprintf("not allowed to %s: %s", action, dec.Reason))
	}
	return ctx, nil, nil
}
