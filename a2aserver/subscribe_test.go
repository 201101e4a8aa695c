package a2aserver

import (
	"context"
	"fmt"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testwait"
)

// stuckSubscriptions is a2a-go's handler with SubscribeToTask doing what
// a2a-go's does when opened while an execution lets go: it sends the
// stored task and then nothing, until the caller goes.
type stuckSubscriptions struct {
	a2asrv.RequestHandler
	tasks taskstore.Store
}

func (s stuckSubscriptions) SubscribeToTask(ctx context.Context, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		st, err := s.tasks.Get(ctx, req.ID)
		if err != nil || !yield(st.Task, nil) {
			return
		}
		<-ctx.Done()
		yield(nil, ctx.Err())
	}
}

// subscribed subscribes to task id through h and checks the first event
// is the task. The events that follow come on events (16 held); ended
// gets nil when the stream ends, or its error.
func subscribed(t *testing.T, ctx context.Context, h *subscribeHandler, id a2a.TaskID) (events <-chan a2a.Event, ended <-chan error) {
	t.Helper()
	evs := make(chan a2a.Event, 16)
	end := make(chan error, 1)
	go func() {
		for ev, err := range h.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}) {
			if err != nil {
				end <- err
				return
			}
			evs <- ev
		}
		end <- nil
	}()
	if ev := <-evs; ev.(*a2a.Task).ID != id {
		t.Fatalf("first event %#v", ev)
	}
	return evs, end
}

// TestSubscribeToTask_StuckRelayDropped: when a2a-go's subscription to an
// execution never reports the task's end, the stored task's end still
// reaches the subscriber, and the stream ends.
func TestSubscribeToTask_StuckRelayDropped(t *testing.T) {
	t.Parallel()
	ctx, _ := a2asrv.NewCallContext(t.Context(), nil)
	store := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})
	task := &a2a.Task{ID: a2a.NewTaskID(), ContextID: a2a.NewContextID(), Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	v, err := store.Create(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	h := &subscribeHandler{RequestHandler: stuckSubscriptions{tasks: store}, tasks: store, changes: newTaskChanges(), stopping: t.Context()}
	events, ended := subscribed(t, ctx, h, task.ID)
	done := *task
	done.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, task, a2a.NewTextPart("done"))}
	ev := a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, done.Status.Message)
	began := time.Now()
	if _, err := store.Update(ctx, &taskstore.UpdateRequest{Task: &done, Event: ev, PrevTask: task, PrevVersion: v}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-ended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end with the stored task")
	}
	var last a2a.Event
	for len(events) > 0 {
		last = <-events
	}
	if st, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || st.Status.State != a2a.TaskStateCompleted {
		t.Errorf("last event %#v, want COMPLETED", last)
	}
	// The end comes once the stuck relay is dropped, about relayStale
	// after the store showed it, or sooner when the store is read first.
	if took := time.Since(began); took > relayStale+5*relayCheck+time.Second {
		t.Errorf("the end came %v after it was stored, want at most about %v", took, relayStale+relayCheck)
	}
}

// downTasks fails every read of the task store while down is set, as the
// store does while a NATS cluster elects a leader, and counts them.
type downTasks struct {
	taskstore.Store
	down    atomic.Bool
	refused atomic.Int32
}

func (s *downTasks) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	if s.down.Load() {
		s.refused.Add(1)
		return nil, fmt.Errorf("get task %q: %w: no leader", id, delegation.ErrUnavailable)
	}
	return s.Store.Get(ctx, id)
}

// noExecutions is a2a-go's handler when no execution of the task runs:
// its SubscribeToTask answers that the task is not found.
type noExecutions struct{ a2asrv.RequestHandler }

func (noExecutions) SubscribeToTask(context.Context, *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, a2a.ErrTaskNotFound) }
}

// TestSubscribeToTask_RidesOutTheStore: a subscription to a task with no
// execution reads the stored task; while the store is unavailable the
// subscription stays open and reads again, and the task's end, stored
// meanwhile, reaches the subscriber once the store answers.
func TestSubscribeToTask_RidesOutTheStore(t *testing.T) {
	t.Parallel()
	ctx, _ := a2asrv.NewCallContext(t.Context(), nil)
	store := &downTasks{Store: taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})}
	task := &a2a.Task{ID: a2a.NewTaskID(), ContextID: a2a.NewContextID(), Status: a2a.TaskStatus{State: a2a.TaskStateInputRequired}}
	v, err := store.Create(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	h := &subscribeHandler{RequestHandler: noExecutions{}, tasks: store, changes: newTaskChanges(), stopping: t.Context()}
	events, ended := subscribed(t, ctx, h, task.ID)
	store.down.Store(true)
	testwait.Until(t, 10*time.Second, "the subscription reading the store again", func() bool { return store.refused.Load() >= 3 })
	select {
	case err := <-ended:
		t.Fatalf("the subscription ended while the store was unavailable: %v", err)
	default:
	}
	done := *task
	done.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, task, a2a.NewTextPart("done"))}
	ev := a2a.NewStatusUpdateEvent(task, a2a.TaskStateCompleted, done.Status.Message)
	if _, err := store.Update(ctx, &taskstore.UpdateRequest{Task: &done, Event: ev, PrevTask: task, PrevVersion: v}); err != nil {
		t.Fatal(err)
	}
	store.down.Store(false)
	select {
	case err := <-ended:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not end with the stored task once the store answered")
	}
	var last a2a.Event
	for len(events) > 0 {
		last = <-events
	}
	if st, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || st.Status.State != a2a.TaskStateCompleted {
		t.Errorf("last event %#v, want COMPLETED", last)
	}
}
