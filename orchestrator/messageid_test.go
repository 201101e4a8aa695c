package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
)

// echoTask creates a task and completes it with "echo: " and the text it
// was sent, so each answer says which message it answers.
func echoTask(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
	if yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted,
			a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("echo: "+testagent.Text(ec.Message)))), nil)
	}
}

// TestMessageIDs_KeptAcrossHops sends a message and then the input the
// agent asks for through A → B → agent, over every binding of A: the agent
// sees the caller's message ids, unchanged.
func TestMessageIDs_KeptAcrossHops(t *testing.T) {
	t.Parallel()
	for _, b := range orchdBindings {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			c := testagent.Start(t, testagent.Options{Name: "C", Skill: "ask", Streaming: true}, testagent.Ask())
			bNode := orchdNode(t, "b", "ask", registry.Spec{ID: "c", URL: c.URL})
			aNode := orchdNode(t, "a", "ask", registry.Spec{ID: "b", URL: bNode})
			client := bindingClient(t, aNode, b, nil)

			first, input := "caller-first-"+b.name, "caller-input-"+b.name
			res, err := client.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: userMessage(first, "ask me")})
			if err != nil {
				t.Fatal(err)
			}
			task, ok := res.(*a2a.Task)
			if !ok || task.Status.State != a2a.TaskStateInputRequired {
				t.Fatalf("SendMessage = %#v, want a task waiting for input", res)
			}
			m := userMessage(input, "1999")
			m.TaskID = task.ID
			if res, err = client.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m}); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(taskEnd{true, a2a.TaskStateCompleted, "answered: 1999"}, taskEndOf(res)); diff != "" {
				t.Fatalf("input answered with %s (-want +got):\n%s", describe(res), diff)
			}
			var got []string
			for _, m := range c.Messages() {
				got = append(got, m.ID)
			}
			if want := []string{first, input}; !slices.Equal(got, want) {
				t.Errorf("the agent saw message ids %q, want the caller's %q", got, want)
			}
			// orchd's own task keeps the caller's ids in its history too.
			st, err := client.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
			if err != nil {
				t.Fatal(err)
			}
			var hist []string
			for _, m := range st.History {
				if m.Role == a2a.MessageRoleUser {
					hist = append(hist, m.ID)
				}
			}
			if want := []string{first, input}; !slices.Equal(hist, want) {
				t.Errorf("orchd's task history has user message ids %q, want %q", hist, want)
			}
		})
	}
}

// TestMessageIDs_SameIDTwice sends one message id many times at once: to
// an a2a-go agent directly, which makes a task of each, and through orchd,
// from one caller and from two authenticated ones. Through orchd too each
// send gets its own task, answering its own text: a repeated id never
// hands one caller's delegation to another send.
func TestMessageIDs_SameIDTwice(t *testing.T) {
	t.Parallel()
	const sends = 6
	agent := testagent.Start(t, testagent.Options{Name: "Echo", Skill: "echo", Streaming: true}, echoTask)

	open := orchdNode(t, "solo", "echo", registry.Spec{ID: "echo", URL: agent.URL})
	authCfg := loadDefaults(t)
	authCfg.Auth = authTokens()
	authCfg.Agents = []registry.Spec{{ID: "echo", URL: agent.URL}}
	authed := startDaemon(t, authCfg)

	tests := []struct {
		name    string
		clients []*a2aclient.Client
	}{
		{"a2a-go directly", []*a2aclient.Client{testagent.Client(t, agent.URL)}},
		{"orchd, one caller", []*a2aclient.Client{testagent.Client(t, open)}},
		{"orchd, two callers", []*a2aclient.Client{a2aAs(t, authed, aliceToken), a2aAs(t, authed, bobToken)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "same-id-" + tt.name
			var wg sync.WaitGroup
			var mu sync.Mutex
			seen := map[a2a.TaskID]bool{}
			for i := range sends {
				wg.Go(func() {
					c := tt.clients[i%len(tt.clients)]
					text := fmt.Sprintf("send %d", i)
					ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
					defer cancel()
					res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: userMessage(id, text)})
					if err != nil {
						t.Errorf("%s: %v", text, err)
						return
					}
					if diff := cmp.Diff(taskEnd{true, a2a.TaskStateCompleted, "echo: " + text}, taskEndOf(res)); diff != "" {
						t.Errorf("%s answered with %s (-want +got):\n%s", text, describe(res), diff)
						return
					}
					task := res.(*a2a.Task)
					mu.Lock()
					defer mu.Unlock()
					if seen[task.ID] {
						t.Errorf("task %s answered two sends", task.ID)
					}
					seen[task.ID] = true
				})
			}
			wg.Wait()
			if len(seen) != sends {
				t.Errorf("%d sends of one message id made %d tasks, want %d", sends, len(seen), sends)
			}
		})
	}
	n := 0
	for _, m := range agent.Messages() {
		if m.ID == "same-id-orchd, two callers" || m.ID == "same-id-orchd, one caller" {
			n++
		}
	}
	if n != 2*sends {
		t.Errorf("the agent saw the repeated id %d times through orchd, want %d", n, 2*sends)
	}
}

// describe says what an answer is, with a task's state and status text.
// taskEnd is what a test checks of a send's answer: whether it is a
// task, its state and the text of its status message.
type taskEnd struct {
	Task  bool
	State a2a.TaskState
	Text  string
}

// taskEndOf is res's taskEnd.
func taskEndOf(res a2a.SendMessageResult) taskEnd {
	task, ok := res.(*a2a.Task)
	if !ok {
		return taskEnd{}
	}
	e := taskEnd{Task: true, State: task.Status.State}
	if task.Status.Message != nil {
		e.Text = testagent.Text(task.Status.Message)
	}
	return e
}

func describe(res a2a.SendMessageResult) string {
	if task, ok := res.(*a2a.Task); ok {
		text := ""
		if task.Status.Message != nil {
			text = testagent.Text(task.Status.Message)
		}
		return fmt.Sprintf("task %s %s %q", task.ID, task.Status.State, text)
	}
	return fmt.Sprintf("%#v", res)
}
