package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aext"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// subscription is a SubscribeToTask stream read in the background.
type subscription struct {
	events chan a2a.Event
	// err is the stream's error, or nil when it ended cleanly; it is
	// set before ended closes.
	err   error
	ended chan struct{}
}

// subscribe opens SubscribeToTask for id through c and reads it until it
// ends, or for at most a minute.
func subscribe(t *testing.T, c *a2aclient.Client, id a2a.TaskID) *subscription {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	s := &subscription{events: make(chan a2a.Event, 64), ended: make(chan struct{})}
	go func() {
		defer cancel()
		defer close(s.ended)
		for ev, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}) {
			if err != nil {
				s.err = err
				return
			}
			s.events <- ev
		}
	}()
	return s
}

// next returns the stream's next event, failing the test when none comes
// within 10 seconds or the stream ends first.
func (s *subscription) next(t *testing.T) a2a.Event {
	t.Helper()
	select {
	case ev := <-s.events:
		return ev
	case <-s.ended:
		select {
		case ev := <-s.events:
			return ev
		default:
		}
		t.Fatalf("the stream ended (%v) where an event was due", s.err)
	case <-time.After(10 * time.Second):
		t.Fatal("no event in 10s")
	}
	return nil
}

// untilEnd reads the stream's events until it ends cleanly, failing the
// test on an error, a stream that goes on past a terminal state, or one
// that does not end within 10 seconds.
func (s *subscription) untilEnd(t *testing.T) []a2a.Event {
	t.Helper()
	var evs []a2a.Event
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev := <-s.events:
			evs = append(evs, ev)
			continue
		case <-timeout:
			t.Fatalf("the stream did not end in 10s; events %s", eventsString(evs))
		case <-s.ended:
		}
		for len(s.events) > 0 {
			evs = append(evs, <-s.events)
		}
		if s.err != nil {
			t.Fatalf("the stream failed: %v (events %s)", s.err, eventsString(evs))
		}
		for i, ev := range evs {
			if st, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && st.Status.State.Terminal() && i != len(evs)-1 {
				t.Errorf("events after the terminal state: %s", eventsString(evs))
			}
		}
		return evs
	}
}

// eventsString describes events briefly, for failure messages.
func eventsString(evs []a2a.Event) string {
	var out []string
	for _, ev := range evs {
		switch e := ev.(type) {
		case *a2a.Task:
			out = append(out, "task "+string(e.Status.State))
		case *a2a.TaskStatusUpdateEvent:
			out = append(out, "status "+string(e.Status.State))
		case *a2a.TaskArtifactUpdateEvent:
			out = append(out, fmt.Sprintf("artifact %s append=%v", e.Artifact.ID, e.Append))
		default:
			out = append(out, fmt.Sprintf("%T", ev))
		}
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// lastState is the state the last event of evs sets.
func lastState(evs []a2a.Event) a2a.TaskState {
	for i := len(evs) - 1; i >= 0; i-- {
		switch e := evs[i].(type) {
		case *a2a.TaskStatusUpdateEvent:
			return e.Status.State
		case *a2a.Task:
			return e.Status.State
		}
	}
	return a2a.TaskStateUnspecified
}

// firstTask fails the test unless the stream's first event is task id.
func firstTask(t *testing.T, s *subscription, id a2a.TaskID) *a2a.Task {
	t.Helper()
	ev := s.next(t)
	task, ok := ev.(*a2a.Task)
	if !ok || task.ID != id {
		t.Fatalf("first event = %#v, want the Task %s", ev, id)
	}
	return task
}

// TestSubscribeToTask_WorkingTaskToItsEnd subscribes, twice at once, to a
// task orchd's agent is working on, over every binding: each stream starts
// with the Task, carries the rest of the work and ends right after
// COMPLETED.
func TestSubscribeToTask_WorkingTaskToItsEnd(t *testing.T) {
	t.Parallel()
	for _, b := range orchdBindings {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, gatedWork(release))
			base := orchdNode(t, "solo", "research", registry.Spec{ID: "worker", URL: agent.URL})
			c := bindingClient(t, base, b, nil)
			res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: userMessage(a2a.NewMessageID(), "survey"),
				Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
			if err != nil {
				t.Fatal(err)
			}
			task, ok := res.(*a2a.Task)
			if !ok {
				t.Fatalf("SendMessage = %T", res)
			}
			subs := []*subscription{subscribe(t, c, task.ID), subscribe(t, c, task.ID)}
			for _, s := range subs {
				if first := firstTask(t, s, task.ID); first.Status.State.Terminal() {
					t.Fatalf("the first Task is already %s", first.Status.State)
				}
			}
			close(release)
			for i, s := range subs {
				evs := s.untilEnd(t)
				if lastState(evs) != a2a.TaskStateCompleted {
					t.Errorf("subscriber %d: events %s, want them to end COMPLETED", i, eventsString(evs))
				}
			}
			final, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatalf("GetTask after the stream: %v", err)
			}
			got := whole{State: final.Status.State, Parts: partsOf(final.Artifacts)}
			if diff := cmp.Diff(whole{a2a.TaskStateCompleted, []int{2}}, got); diff != "" {
				t.Errorf("GetTask after the stream (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSubscribeToTask_ThroughInputRequired subscribes to a task waiting
// for input, which has no execution: the stream starts with the Task and
// stays open, then follows it when input resumes it, or when it is
// canceled, to its end. a2a-go itself refuses such a subscription.
func TestSubscribeToTask_ThroughInputRequired(t *testing.T) {
	t.Parallel()
	for _, b := range orchdBindings {
		for _, end := range []string{"input", "cancel"} {
			t.Run(b.name+"/"+end, func(t *testing.T) {
				t.Parallel()
				agent := testagent.Start(t, testagent.Options{Name: "Asker", Skill: "ask", Streaming: true}, testagent.Ask())
				base := orchdNode(t, "solo", "ask", registry.Spec{ID: "asker", URL: agent.URL})
				c := bindingClient(t, base, b, nil)
				res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: userMessage(a2a.NewMessageID(), "ask me")})
				if err != nil {
					t.Fatal(err)
				}
				task, ok := res.(*a2a.Task)
				if !ok || task.Status.State != a2a.TaskStateInputRequired {
					t.Fatalf("SendMessage = %#v, want a task waiting for input", res)
				}
				s := subscribe(t, c, task.ID)
				if first := firstTask(t, s, task.ID); first.Status.State != a2a.TaskStateInputRequired {
					t.Fatalf("first Task is %s", first.Status.State)
				}

				want := a2a.TaskStateCompleted
				if end == "input" {
					m := userMessage(a2a.NewMessageID(), "1999")
					m.TaskID = task.ID
					if _, err := bindingClient(t, base, b, nil).SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m}); err != nil {
						t.Fatal(err)
					}
				} else {
					want = a2a.TaskStateCanceled
					cancelWaiting(t, c, task.ID)
				}
				evs := s.untilEnd(t)
				if lastState(evs) != want {
					t.Fatalf("events %s, want them to end %s", eventsString(evs), want)
				}
				if end == "input" {
					last := evs[len(evs)-1].(*a2a.TaskStatusUpdateEvent)
					if got := testagent.Text(last.Status.Message); got != "answered: 1999" {
						t.Errorf("final status message %q", got)
					}
				}
			})
		}
	}

	t.Run("a2a-go directly", func(t *testing.T) {
		t.Parallel()
		agent := testagent.Start(t, testagent.Options{Name: "Asker", Skill: "ask", Streaming: true}, testagent.Ask())
		c := testagent.Client(t, agent.URL)
		res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: userMessage(a2a.NewMessageID(), "ask me")})
		if err != nil {
			t.Fatal(err)
		}
		id := res.(*a2a.Task).ID
		// Once a2a-go has let go of the execution that asked, it refuses
		// the subscription. (Just before, it may end the stream at once or
		// leave it open on a queue nothing writes to.)
		testwait.Succeeds(t, 10*time.Second, "a2a-go refusing SubscribeToTask to a task waiting for input (else orchd's own may no longer be needed)", func() error {
			ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
			defer cancel()
			var err error
			for _, err = range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: id}) {
				break
			}
			if errors.Is(err, a2a.ErrTaskNotFound) {
				return nil
			}
			return fmt.Errorf("SubscribeToTask = %v", err)
		})
		if task, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id}); err != nil || task.Status.State != a2a.TaskStateInputRequired {
			t.Errorf("the task = %v, %v; want it still waiting for input", task, err)
		}
	})
}

// cancelWaiting cancels a task waiting for input. Right after the task
// began to wait, a2a-go may still be letting go of its execution and fail
// the cancel ("queue is closed"); it is then sent again, for 10 seconds.
func cancelWaiting(t *testing.T, c *a2aclient.Client, id a2a.TaskID) {
	t.Helper()
	testwait.Succeeds(t, 10*time.Second, "cancel task "+string(id), func() error {
		_, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: id})
		if err != nil && !strings.Contains(err.Error(), "queue is closed") {
			t.Fatalf("cancel task %s: %v", id, err)
		}
		return err
	})
}

// TestSubscribeToTask_Refused: a task in a terminal state is refused with
// UnsupportedOperationError, an unknown task, or another caller's, with
// TaskNotFoundError, over every binding. a2a-go answers the terminal task
// with TaskNotFoundError.
func TestSubscribeToTask_Refused(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Work(time.Millisecond))
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	hanger := testagent.Start(t, testagent.Options{Name: "Hanger", Skill: "slow", Streaming: true}, testagent.Hang())
	cfg.Agents = []registry.Spec{{ID: "worker", URL: agent.URL}, {ID: "hanger", URL: hanger.URL}}
	authed := startDaemon(t, cfg)
	open := orchdNode(t, "solo", "research", registry.Spec{ID: "worker", URL: agent.URL})

	done := func(c *a2aclient.Client) a2a.TaskID {
		t.Helper()
		m := userMessage(a2a.NewMessageID(), "survey")
		m.Metadata = map[string]any{a2aserver.SkillMetadataKey: "research"}
		res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m})
		if err != nil {
			t.Fatal(err)
		}
		task, ok := res.(*a2a.Task)
		if !ok || task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("SendMessage = %#v, want a completed task", res)
		}
		return task.ID
	}
	refused := func(c *a2aclient.Client, id a2a.TaskID) error {
		for ev, err := range c.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: id}) {
			if err != nil {
				return err
			}
			return fmt.Errorf("got an event, %s", eventsString([]a2a.Event{ev}))
		}
		return errors.New("the stream ended with no event and no error")
	}

	for _, b := range orchdBindings {
		c := bindingClient(t, open, b, nil)
		if err := refused(c, done(c)); !errors.Is(err, a2a.ErrUnsupportedOperation) {
			t.Errorf("%s, a completed task: %v, want UnsupportedOperationError", b.name, err)
		}
		if err := refused(c, "no-such-task"); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("%s, an unknown task: %v, want TaskNotFoundError", b.name, err)
		}
	}

	// Alice's task, ended or working (an execution runs it), is not Bob's
	// to follow.
	alice, bob := a2aAs(t, authed, aliceToken), a2aAs(t, authed, bobToken)
	if err := refused(bob, done(alice)); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another caller's ended task: %v, want TaskNotFoundError", err)
	}
	slow := userMessage(a2a.NewMessageID(), "forever")
	slow.Metadata = map[string]any{a2aserver.SkillMetadataKey: "slow"}
	res, err := alice.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: slow, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	working := res.(*a2a.Task).ID
	t.Cleanup(func() {
		_, _ = alice.CancelTask(context.WithoutCancel(t.Context()), &a2a.CancelTaskRequest{ID: working})
	})
	waitTask(t, alice, working, a2a.TaskStateWorking)
	if err := refused(bob, working); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another caller's working task: %v, want TaskNotFoundError", err)
	}

	direct := testagent.Client(t, agent.URL)
	if err := refused(direct, done(direct)); errors.Is(err, a2a.ErrUnsupportedOperation) || err == nil {
		t.Errorf("a2a-go's SubscribeToTask to a completed task = %v; orchd's own SubscribeToTask may no longer be needed", err)
	}
}

// TestSubscribeToTask_SteeredAndInterrupted follows a steerable task while
// it is steered, interrupted (INPUT_REQUIRED, marked so: the stream stays
// open), resumed and steered to its end.
func TestSubscribeToTask_SteeredAndInterrupted(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	base := orchdNode(t, "solo", "research", registry.Spec{ID: "c", URL: agent.URL})
	c := bindingClient(t, base, orchdBindings[0], nil)
	steerer := testagent.Client(t, base, a2aclient.WithCallInterceptors(a2aext.NewActivator(steering.URI)))
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: userMessage(a2a.NewMessageID(), "survey"),
		Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	waitTask(t, c, id, a2a.TaskStateWorking)
	s := subscribe(t, c, id)
	firstTask(t, s, id)

	signal := func(text string, control steering.Control) {
		t.Helper()
		m := userMessage(a2a.NewMessageID(), text)
		m.TaskID = id
		if control != "" {
			m.Metadata = map[string]any{steering.ControlKey: string(control)}
		}
		// A plain message resumes the task, which then works on: it must
		// not wait for the task's end.
		req := &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{ReturnImmediately: true}}
		if _, err := steerer.SendMessage(t.Context(), req); err != nil {
			t.Fatalf("%s %q: %v", control, text, err)
		}
	}
	// until reads the stream until an update to state, which it returns.
	until := func(state a2a.TaskState) *a2a.TaskStatusUpdateEvent {
		t.Helper()
		for {
			if st, ok := s.next(t).(*a2a.TaskStatusUpdateEvent); ok && st.Status.State == state {
				return st
			}
		}
	}
	signal("narrow", steering.Steer)
	until(a2a.TaskStateWorking)
	signal("stop", steering.Interrupt)
	if st := until(a2a.TaskStateInputRequired); st.Metadata[steering.InterruptedKey] != true {
		t.Errorf("the interrupt's INPUT_REQUIRED is not marked interrupted: %+v", st.Metadata)
	}
	signal("go on", "")
	until(a2a.TaskStateWorking)
	signal("finish", steering.Steer)
	evs := s.untilEnd(t)
	if lastState(evs) != a2a.TaskStateCompleted {
		t.Errorf("after the last steer: %s, want COMPLETED last", eventsString(evs))
	}
}
