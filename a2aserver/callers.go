package a2aserver

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/policies"
)

// taskUser is the user a caller's A2A tasks belong to in orchd's task
// store, which keeps each user's tasks apart: the caller's identity key
// (auth.Identity.Key, of its method, issuer, principal and tenant), so
// that no other caller has the same name, or "" for a caller without a
// principal. It is the one place that names task users.
func taskUser(c policies.Caller) string {
	if c.Principal == "" {
		return ""
	}
	return auth.Identity{Method: c.Method, Issuer: c.Issuer, ID: c.Principal, Tenant: c.Tenant}.Key()
}

// LegacyTaskUser is whom a task belongs to that an earlier orchd stored
// for user, when task users were a caller's tenant and principal joined
// with "/" (store.TasksConfig.LegacyUser): such a name could be another
// caller's today, so it becomes "legacy:" and the name, which no
// caller's identity key can be (a key's method is never "legacy"). Those
// tasks are no caller's; orchd still mirrors their delegations into them
// (upstreamUser). The anonymous "" and the development user are as they
// were: each was one caller then and is now.
func LegacyTaskUser(user string) string {
	if user == "" || user == developmentTaskUser {
		return user
	}
	return "legacy:" + user
}

// callerInterceptor makes the gate's caller a2a-go's CallContext user, so
// the task store keeps each caller's tasks apart and ListTasks answers,
// and refuses an unauthenticated call with A2A's unauthenticated error.
type callerInterceptor struct {
	a2asrv.PassthroughCallInterceptor
	gate *httpgate.Gate
}

func (i callerInterceptor) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	if !i.gate.Enabled() {
		return ctx, nil, nil
	}
	if refused := httpgate.Refused(ctx); refused != "" {
		return ctx, nil, a2a.NewError(a2a.ErrUnauthenticated, refused)
	}
	pc := i.gate.CallerOf(ctx)
	if pc.Principal == "" {
		return ctx, nil, nil // an anonymous caller the config lets in
	}
	cc.User = a2asrv.NewAuthenticatedUser(taskUser(pc), map[string]any{"principal": pc.Principal, "tenant": pc.Tenant, "roles": pc.Roles,
		"method": pc.Method, "issuer": pc.Issuer})
	return ctx, nil, nil
}
