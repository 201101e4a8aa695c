// Package steering implements the A2A steering extension
// (https://a2a-protocol.org/extensions/steering/v1) for any a2a-go agent:
// a client may steer a WORKING task (the agent incorporates a message and
// keeps working) or interrupt it (the agent stops and waits for input).
//
// a2a-go rejects a message to a running task and has no way to hand input
// to a running executor. This package adds both: a call interceptor that
// answers steering messages before a2a-go's handler runs, and a per-task
// [Inbox] the executor reads signals from.
//
//	st := steering.New(steering.Config{Modes: steering.Modes{Steerable: true, Interruptible: true}, Tasks: store})
//	handler := a2asrv.NewHandler(exec, a2asrv.WithTaskStore(store), a2asrv.WithCallInterceptors(st.Interceptor()),
//		a2asrv.WithExecutorContextInterceptor(st.ExecutorInterceptor()))
//	mux.Handle("/rpc", steering.Echo(a2asrv.NewJSONRPCHandler(handler)))
//	card.Capabilities.Extensions = append(card.Capabilities.Extensions, st.Extension())
//
// and in the executor:
//
//	inbox := st.Open(ec)
//	defer inbox.Close() // before the final event; see Inbox.Close
//	...
//	case <-inbox.Ready():
//		for _, sig := range inbox.Take() { ... }
//
// Guarantees: a signal the client got an acknowledgement for has been
// queued for the executor, in order (each task numbers its signals 1, 2,
// …); a retried message (same message id) is acknowledged again but
// delivered once; a signal that arrives while the executor is finishing is
// refused, never accepted and dropped; an interrupt is acknowledged once
// a2a-go has released the execution, so the next message resumes the task
// (this needs [Steering.ExecutorInterceptor]), and so is a retry of it.
package steering
