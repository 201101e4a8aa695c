// Package a2aserver is orchd as an A2A agent: the front through which
// other agents, and other orchds in a chain, hand orchd work in A2A's own
// terms. It serves orchd's Agent Card and A2A 1.0 and 0.3 over JSON-RPC,
// HTTP+JSON and gRPC, all backed by one a2a-go request handler whose
// executor delegates each message with the delegation engine and mirrors
// the delegation's events into the caller's A2A task. It also sends push
// notifications to callers' webhooks (PushOut) and takes agents' push
// notifications for the delegations orchd follows by push (webhook.go).
//
// # What it needs
//
// New takes its Config (the card, gRPC) and its Deps: the delegation
// engine, the A2A task store, the shared HTTP plumbing of package httpgate
// (gate, authorizer, body limits, access log) and the push sender. It
// imports no other front.
//
// # A message's path
//
// Over HTTP, a request passes httpgate's plumbing (access log, browser
// guard, stream write deadlines), then Routes: the gate admits it even
// when it refuses the caller (httpgate.Gate.Admit), served notes the
// endpoint's A2A version, the body limits and the media type check run
// (bodies.go, a2apaths.go), and a2a-go's JSON-RPC or HTTP+JSON handler
// decodes it. Over gRPC, grpcserver.go authenticates the call before its
// message is read and prepares its context the same way. Either way the
// call reaches the request handler (subscribe.go wraps it to serve
// SubscribeToTask as A2A 1.0 defines it) and its call interceptors, in
// order:
//
//	spanNamer          names the call's span after its A2A method (agent.go)
//	callerInterceptor  refuses an unauthenticated caller; names the task user (callers.go)
//	developmentUser    names the tasks of the development caller (devuser.go)
//	authorizeA2A       asks the authorization policies (authorize.go)
//	versionCheck       refuses an A2A version the endpoint does not serve (agent.go)
//	historyLimit       cuts the history of the tasks it answers with (history.go)
//	messageFit         refuses a message its task could not keep (agent.go)
//	steerRoute         passes steering signals to the delegation (steer.go)
//	terminalSend       refuses a message to a task that has ended (terminal.go)
//	authInput          passes an answer to a task waiting AUTH_REQUIRED on (authinput.go)
//	earlyDelegation    delegates a new message at once (executor.go)
//
// A message reaches delegation.Engine.Delegate by one of two routes:
//
//  1. earlyDelegation.Before delegates a new message before a2a-go's task
//     machinery runs. It answers at once when it can: with the agent's
//     Message when the agent answered with one, or with the finished task,
//     stored once, when the work ends within a short wait (settled.go,
//     which folds the events as a2a-go's machinery would). Otherwise it
//     puts the started delegation (or its refusal) in the request's
//     context for the executor.
//  2. executor.Execute, run by a2a-go's machinery, takes that delegation
//     (delegateNew), or delegates the message itself when the early route
//     did not. A message to a task waiting for input is passed on to its
//     delegation instead (Engine.Send).
//
// The executor then mirrors the delegation's events into the upstream task
// (mirror), each status update carrying the delegation's lineage for an
// upstream orchd (lineage.go), until the delegation ends or waits for
// input; a task waiting for input is watched so that its delegation's end
// still reaches it (waiting.go). At AUTH_REQUIRED the execution goes on
// mirroring, as a2a-go keeps it running, and the caller's answer reaches
// the delegation through authInput. Cancel cancels the delegation. After a restart, the
// delegations the engine carries on are mirrored into their tasks again
// (remirror.go, through Resumed), as is a task whose execution a2a-go
// ended for an event it could not store (failguard.go).
package a2aserver
