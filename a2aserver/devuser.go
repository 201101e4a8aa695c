package a2aserver

import (
	"context"

	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/httpgate"
)

// developmentTaskUser owns the A2A tasks of callers when no authentication
// is configured, where every caller is the development caller. The task
// store keeps each user's tasks apart and lists only a named user's
// (orchd's durable store does not index the tasks of the unnamed one), so
// without a name ListTasks would refuse the very caller who made the
// tasks. No caller's identity key (taskUser) is this name, which has no
// ":", so tasks made before authentication was configured are not
// handed to a principal after.
const developmentTaskUser = "(no authentication)"

// developmentUser names the development caller's tasks: with no
// authentication configured, it makes developmentTaskUser the CallContext
// user, so ListTasks lists what that caller made. It runs after
// callerInterceptor and changes nothing when authentication is configured
// (an anonymous caller let in then stays unnamed, and ListTasks refuses
// it, as docs/security.md says).
type developmentUser struct {
	a2asrv.PassthroughCallInterceptor
	gate *httpgate.Gate
}

var _ a2asrv.CallInterceptor = developmentUser{}

func (d developmentUser) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	if d.gate.Enabled() || cc.User != nil && cc.User.Name != "" {
		return ctx, nil, nil
	}
	cc.User = &a2asrv.User{Name: developmentTaskUser}
	return ctx, nil, nil
}
