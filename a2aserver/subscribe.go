package a2aserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/orchd/orchd/delegation"
)

// SubscribeToTask as A2A 1.0 defines it (§3.1.6), which a2a-go does not:
//   - the first event is the Task as it is when the call comes;
//   - the stream ends once the task reaches a terminal state (COMPLETED,
//     FAILED, CANCELED, REJECTED), and only then: a task waiting for input
//     (INPUT_REQUIRED, AUTH_REQUIRED) is not terminal, so the stream stays
//     open through the wait and follows the task when input resumes it;
//   - subscribing to a task in a terminal state is refused with
//     UnsupportedOperationError (-32004), and to a task the caller does not
//     own, or that does not exist, with TaskNotFoundError (-32001).
//
// a2a-go (local mode) serves SubscribeToTask only while an execution of the
// task runs: it answers -32001 otherwise, and ends the stream with the
// execution, at INPUT_REQUIRED too. orchd's tasks spend much of their
// lives with no execution: waiting for input, carried on from the store
// after a restart (remirror.go), ended by a watch (waiting.go) or by
// another orchd sharing the store. So orchd's handler follows the task
// itself: while an execution runs it relays a2a-go's own subscription to
// it, event by event; between executions it reads the stored task, woken
// by the executor when an execution or a cancel starts and otherwise
// polling with backoff (through a moment the store is unavailable, too),
// and tells the subscriber what changed as status and artifact updates. The subscriber sees every state the task settles
// in and every artifact as stored; between executions, changes that came
// faster than a poll are folded into one update.

// Polling of a task with no execution: from subscribePollMin, doubling to
// subscribePollMax while nothing changes, back to subscribePollMin after
// any change.
const (
	subscribePollMin = 20 * time.Millisecond
	subscribePollMax = time.Second
)

// subscribeHandler is a2a-go's request handler with orchd's
// SubscribeToTask. It sits inside a2a-go's InterceptedHandler, so callers
// are authenticated, authorized and version-checked before it runs, over
// every binding.
type subscribeHandler struct {
	a2asrv.RequestHandler
	tasks   taskstore.Store
	changes *taskChanges
	// stopping ends every subscription when the daemon stops, so the
	// server can shut down.
	stopping context.Context
}

var _ a2asrv.RequestHandler = (*subscribeHandler)(nil)

// withSubscribe makes h, a handler a2asrv.NewHandler returned, serve
// SubscribeToTask as subscribeHandler does.
func withSubscribe(h a2asrv.RequestHandler, tasks taskstore.Store, changes *taskChanges, stopping context.Context) (a2asrv.RequestHandler, error) {
	ih, ok := h.(*a2asrv.InterceptedHandler)
	if !ok {
		return nil, fmt.Errorf("a2a-go's request handler is a %T, not the *a2asrv.InterceptedHandler orchd wraps to serve SubscribeToTask", h)
	}
	ih.Handler = &subscribeHandler{RequestHandler: ih.Handler, tasks: tasks, changes: changes, stopping: stopping}
	return ih, nil
}

// SubscribeToTask implements a2asrv.RequestHandler.
func (h *subscribeHandler) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if req == nil || req.ID == "" {
			yield(nil, a2a.NewError(a2a.ErrInvalidParams, "SubscribeToTask needs the id of the task"))
			return
		}
		st, err := h.tasks.Get(ctx, req.ID)
		if err != nil {
			yield(nil, fmt.Errorf("subscribe to task %s: %w", req.ID, err))
			return
		}
		if s := st.Task.Status.State; s.Terminal() {
			yield(nil, terminalRefusal(req.ID, s, "subscriptions"))
			return
		}
		if !yield(st.Task, nil) {
			return
		}
		h.follow(ctx, req.ID, cloneTask(st.Task), yield)
	}
}

// follow sends the subscriber the task's updates after shown, what it was
// last shown, until the task ends, the subscriber goes or orchd stops.
func (h *subscribeHandler) follow(ctx context.Context, id a2a.TaskID, shown *a2a.Task, yield func(a2a.Event, error) bool) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(h.stopping, cancel)()
	wait := subscribePollMin
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		// Wait for the change signal before looking, so a change that
		// starts while we look still wakes us.
		changed, release := h.changes.wait(id)
		done, news := h.look(ctx, id, shown, yield)
		if done {
			release()
			return
		}
		if news {
			wait = subscribePollMin
		} else {
			wait = min(2*wait, subscribePollMax)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
		case <-changed:
			wait = subscribePollMin
		case <-timer.C:
		}
		release()
		if ctx.Err() != nil {
			return
		}
	}
}

// look relays the execution of the task running now, if any, then tells
// the subscriber what the stored task shows beyond that. It reports
// whether the subscription is over, and whether anything happened.
func (h *subscribeHandler) look(ctx context.Context, id a2a.TaskID, shown *a2a.Task, yield func(a2a.Event, error) bool) (done, news bool) {
	relayed, done := h.relay(ctx, id, shown, yield)
	if done || ctx.Err() != nil {
		return true, relayed
	}
	st, err := h.tasks.Get(ctx, id)
	switch {
	case errors.Is(err, delegation.ErrUnavailable) && ctx.Err() == nil:
		// The store is out of reach for a moment (a NATS cluster
		// electing a leader): no news, and the next look reads again,
		// the subscription kept open, as the API's event streams are.
		return false, relayed
	case err != nil:
		if ctx.Err() == nil {
			yield(nil, fmt.Errorf("read task %s: %w", id, err))
		}
		return true, relayed
	}
	stored, ok := catchUp(shown, st.Task, yield)
	return !ok || st.Task.Status.State.Terminal(), relayed || stored
}

// relay passes on the events of the execution of the task running now, if
// any, through a2a-go's own subscription to it. It reports whether an
// execution was found, and whether the subscription is over (the task
// ended, or the subscriber went).
//
// a2a-go's subscription can miss its execution's end: one opened while
// the execution lets go is left on a queue nothing writes to. So a watch
// reads the stored task meanwhile, and drops the relay when the store
// shows what the relay has not for relayStale; the caller then catches up
// from the store.
func (h *subscribeHandler) relay(ctx context.Context, id a2a.TaskID, shown *a2a.Task, yield func(a2a.Event, error) bool) (found, done bool) {
	rctx, drop := context.WithCancel(ctx)
	var mu sync.Mutex // guards shown against the watch
	watched := make(chan struct{})
	defer func() { drop(); <-watched }()
	go func() {
		defer close(watched)
		h.watchRelay(rctx, drop, id, shown, &mu)
	}()
	for ev, err := range h.RequestHandler.SubscribeToTask(rctx, &a2a.SubscribeToTaskRequest{ID: id}) {
		if err != nil {
			// No execution runs now (a2a-go says the task is not found),
			// it ended in an error, or the watch dropped it: the stored
			// task says what it left.
			return found, false
		}
		found = true
		switch e := ev.(type) {
		case *a2a.Task:
			// a2a-go's snapshot of the task, or the execution's result.
			mu.Lock()
			_, ok := catchUp(shown, e, yield)
			mu.Unlock()
			if !ok || e.Status.State.Terminal() {
				return true, true
			}
			continue
		case *a2a.TaskStatusUpdateEvent, *a2a.TaskArtifactUpdateEvent:
		default:
			continue // a message answers a send, not a subscription
		}
		if !yield(ev, nil) {
			return true, true
		}
		mu.Lock()
		fold(shown, ev)
		mu.Unlock()
		if st, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && st.Status.State.Terminal() {
			return true, true
		}
	}
	return found, false
}

// How the watch of a relay reads the store, and how long the store may
// show what the relay has not before the relay counts as stuck.
const (
	relayCheck = 250 * time.Millisecond
	relayStale = time.Second
)

// watchRelay calls drop once the stored task has differed from shown for
// relayStale, until ctx ends.
func (h *subscribeHandler) watchRelay(ctx context.Context, drop func(), id a2a.TaskID, shown *a2a.Task, mu *sync.Mutex) {
	t := time.NewTicker(relayCheck)
	defer t.Stop()
	var since time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		st, err := h.tasks.Get(ctx, id)
		if err != nil {
			continue
		}
		mu.Lock()
		behind := differs(shown, st.Task)
		mu.Unlock()
		switch {
		case !behind:
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= relayStale:
			drop()
			return
		}
	}
}

// differs reports whether the subscriber, shown shown, has not seen now.
func differs(shown, now *a2a.Task) bool {
	if !sameStatus(shown.Status, now.Status) || !sameJSON(shown.Metadata, now.Metadata) || len(shown.Artifacts) != len(now.Artifacts) {
		return true
	}
	for _, art := range now.Artifacts {
		i := slices.IndexFunc(shown.Artifacts, func(a *a2a.Artifact) bool { return a.ID == art.ID })
		if i < 0 || !sameJSON(shown.Artifacts[i], art) {
			return true
		}
	}
	return false
}

// catchUp tells the subscriber, who was shown shown, how now differs: an
// artifact update for each artifact now has that shown lacks or has
// otherwise, then a status update when the status or the metadata
// changed. shown becomes now. It reports whether there was news, and
// false for ok when the subscriber went.
func catchUp(shown, now *a2a.Task, yield func(a2a.Event, error) bool) (news, ok bool) {
	info := a2a.TaskInfo{TaskID: now.ID, ContextID: now.ContextID}
	for _, art := range now.Artifacts {
		i := slices.IndexFunc(shown.Artifacts, func(a *a2a.Artifact) bool { return a.ID == art.ID })
		if i >= 0 && sameJSON(shown.Artifacts[i], art) {
			continue
		}
		news = true
		if !yield(&a2a.TaskArtifactUpdateEvent{TaskID: info.TaskID, ContextID: info.ContextID, Artifact: art}, nil) {
			return news, false
		}
	}
	statusChanged := !sameStatus(shown.Status, now.Status)
	metaChanged := !sameJSON(shown.Metadata, now.Metadata)
	if statusChanged || metaChanged {
		news = true
		ev := &a2a.TaskStatusUpdateEvent{TaskID: info.TaskID, ContextID: info.ContextID, Status: now.Status}
		if metaChanged {
			ev.Metadata = now.Metadata
		}
		if !yield(ev, nil) {
			return news, false
		}
	}
	*shown = *cloneTask(now)
	return news, true
}

// fold applies an event the subscriber was sent to what it was shown, as
// a2a-go's task manager applies it to the stored task.
func fold(shown *a2a.Task, ev a2a.Event) {
	switch e := ev.(type) {
	case *a2a.TaskStatusUpdateEvent:
		shown.Status = e.Status
		if len(e.Metadata) > 0 {
			if shown.Metadata == nil {
				shown.Metadata = map[string]any{}
			}
			maps.Copy(shown.Metadata, e.Metadata)
		}
	case *a2a.TaskArtifactUpdateEvent:
		if e.Artifact == nil {
			return
		}
		shown.Artifacts, _ = delegation.FoldArtifact(shown.Artifacts, e.Artifact, e.Append)
	}
}

// cloneTask copies what fold and catchUp change: the task, its artifact
// list and its metadata map.
func cloneTask(t *a2a.Task) *a2a.Task {
	c := *t
	c.Artifacts = slices.Clone(t.Artifacts)
	c.Metadata = maps.Clone(t.Metadata)
	return &c
}

// sameStatus compares statuses by state, message id and time: a status
// read back from the store is equal to the event that wrote it, though
// its message may decode differently.
func sameStatus(a, b a2a.TaskStatus) bool {
	if a.State != b.State || (a.Message == nil) != (b.Message == nil) || (a.Timestamp == nil) != (b.Timestamp == nil) {
		return false
	}
	if a.Message != nil && a.Message.ID != b.Message.ID {
		return false
	}
	return a.Timestamp == nil || a.Timestamp.Equal(*b.Timestamp)
}

// sameJSON compares values as A2A clients see them, in JSON, so a value
// read back from the store equals the one written.
func sameJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// taskChanges wakes subscribers of a task when the executor starts
// something that will change it: an execution or a cancel. Subscribers
// not woken (the change came from another orchd sharing the store) find it
// on their next poll. It holds an entry only while a subscriber waits.
type taskChanges struct {
	mu sync.Mutex
	m  map[a2a.TaskID]*changeWaiters
}

// changeWaiters is the channel closed at a task's next change, and how
// many subscribers wait on it.
type changeWaiters struct {
	ch chan struct{}
	n  int
}

func newTaskChanges() *taskChanges { return &taskChanges{m: map[a2a.TaskID]*changeWaiters{}} }

// wait returns a channel closed at the task's next change, and the
// function to call once no longer waiting on it.
func (c *taskChanges) wait(id a2a.TaskID) (<-chan struct{}, func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.m[id]
	if !ok {
		w = &changeWaiters{ch: make(chan struct{})}
		c.m[id] = w
	}
	w.n++
	return w.ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.m[id] == w {
			if w.n--; w.n == 0 {
				delete(c.m, id)
			}
		}
	}
}

// notify wakes the task's waiting subscribers.
func (c *taskChanges) notify(id a2a.TaskID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.m[id]; ok {
		close(w.ch)
		delete(c.m, id)
	}
}
