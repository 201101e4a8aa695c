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
// The package's Example is a whole agent and a client of it, compiled and
// run by go test (steering/example_test.go); the snippets below are copied
// from it, and a test keeps them so. The agent makes a [Steering] over the
// task store its handler writes, and registers its interceptors:
//
//	store := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})
//	st := steering.New(steering.Config{Modes: steering.Modes{Steerable: true, Interruptible: true}, Name: "researcher", Tasks: store})
//	handler := a2asrv.NewHandler(&researcher{st: st}, a2asrv.WithTaskStore(store), a2asrv.WithCallInterceptors(st.Interceptor()),
//		a2asrv.WithExecutorContextInterceptor(st.ExecutorInterceptor()))
//
// Its card declares [Steering.Extension], and its A2A endpoint is wrapped
// in [Echo]:
//
//	mux.Handle("/a2a", steering.Echo(a2asrv.NewJSONRPCHandler(handler)))
//
// Its executor opens the task's inbox with [Steering.Open] before it
// reports WORKING, takes the signals as they come, and closes the inbox
// before its final event:
//
//	for _, sig := range inbox.Take() {
//		if sig.Control == steering.Interrupt {
//			// Close before the final event: signals acknowledged
//			// meanwhile come back, and must be handled too.
//			for _, late := range inbox.Close() {
//				brief = append(brief, late.Message.Parts[0].Text())
//			}
//			yield(inbox.Interrupted(ec, "stopped having taken: "+strings.Join(brief, "; ")), nil)
//			return
//		}
//		brief = append(brief, sig.Message.Parts[0].Text())
//		if !yield(steering.Acknowledged(ec, sig), nil) { // the steer becomes the status message
//			return
//		}
//	}
//
// Guarantees: a signal the client got an acknowledgement for has been
// queued for the executor, in order (each task numbers its signals 1, 2,
// …); a retried message (same message id) is acknowledged again but
// delivered once; a signal that arrives while the executor is finishing is
// refused, never accepted and dropped; an interrupt is acknowledged once
// a2a-go has released the execution, so the next message resumes the task
// (this needs [Steering.ExecutorInterceptor]), and so is a retry of it.
package steering
