package orchestrator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
)

// TestDeadline_MiddleHopEndsItsTask sends work to orchd B over A2A, as an
// orchd A would, with a chain deadline; B delegates it to C, which never
// finishes. At the deadline B cancels C and B's own A2A task ends FAILED,
// whether it was working or waiting for input.
func TestDeadline_MiddleHopEndsItsTask(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		do    testagent.Behaviour
		state a2a.TaskState
	}{
		{"working", testagent.Hang(), a2a.TaskStateWorking},
		{"input required", testagent.Ask(), a2a.TaskStateInputRequired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := testagent.Start(t, testagent.Options{Name: "C", Skill: "slow", Streaming: true}, tt.do)
			b := orchdNode(t, "b", "slow", registry.Spec{ID: "c", URL: c.URL})
			client := a2aClient(t, b)

			deadline := time.Now().Add(2 * time.Second)
			msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("forever"))
			delegation.Chain{Path: []string{"a"}, Depth: 1, MaxDepth: 4, Skill: "slow", Deadline: deadline}.Attach(msg)
			var task a2a.TaskID
			var last a2a.TaskState
			var lastText string
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			for ev, err := range client.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}) {
				if err != nil {
					t.Fatal(err)
				}
				switch e := ev.(type) {
				case *a2a.Task:
					task = e.ID
				case *a2a.TaskStatusUpdateEvent:
					task, last = e.TaskID, e.Status.State
					if e.Status.Message != nil {
						lastText = testagent.Text(e.Status.Message)
					}
				}
			}
			want := "passed while agent c was " + strings.TrimPrefix(string(tt.state), "TASK_STATE_") + "; canceled downstream"
			if tt.state == a2a.TaskStateWorking {
				// The stream carries the end.
				if last != a2a.TaskStateFailed {
					t.Errorf("the stream ended %s %q, want FAILED", last, lastText)
				}
				if !strings.HasPrefix(lastText, "deadline ") || !strings.HasSuffix(lastText, want) {
					t.Errorf("the stream ended saying %q, want deadline ... %q", lastText, want)
				}
			} else if last != tt.state {
				t.Fatalf("the stream ended %s %q, want %s", last, lastText, tt.state)
			}
			// The task ends FAILED in B's store, waiting or not.
			waitTask(t, client, task, a2a.TaskStateFailed)
			got, err := client.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status.Message == nil || !strings.HasSuffix(testagent.Text(got.Status.Message), want) {
				t.Errorf("B's task is %s (%+v), want FAILED ending %q", got.Status.State, got.Status.Message, want)
			}
			if c.Cancels() != 1 {
				t.Errorf("C saw %d cancels, want 1", c.Cancels())
			}
			// Input to the ended task is refused, not passed on.
			input := a2a.NewMessageForTask(a2a.MessageRoleUser, got, a2a.NewTextPart("2026"))
			if _, err := client.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: input}); err == nil {
				t.Error("input to a task that ended FAILED was taken")
			}
			if n := len(c.Messages()); n != 1 {
				t.Errorf("C received %d messages, want 1", n)
			}
		})
	}
}

// TestDeadline_ChainABC gives a delegation at A a deadline; the work waits
// at C, two hops down. Every hop ends FAILED: A and B at the deadline, C's
// task canceled.
func TestDeadline_ChainABC(t *testing.T) {
	if testing.Short() {
		t.Skip("takes ~2 s: waits for a deadline two hops down to pass")
	}
	t.Parallel()
	c := testagent.Start(t, testagent.Options{Name: "C", Skill: "slow", Streaming: true}, testagent.Hang())
	b := orchdNode(t, "b", "slow", registry.Spec{ID: "c", URL: c.URL})
	a := orchdNode(t, "a", "slow", registry.Spec{ID: "b", URL: b})
	deadline := time.Now().Add(2 * time.Second).UTC()
	var rec delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "forever", "skill": "slow", "deadline": "`+deadline.Format(time.RFC3339Nano)+`"}`, &rec); code != 201 {
		t.Fatalf("delegate at A = %d %+v", code, rec)
	}
	atA := waitFor(t, a, rec.ID, a2a.TaskStateFailed)
	if !strings.HasPrefix(atA.Error, "deadline ") || !strings.Contains(atA.Error, " passed while agent b was WORKING; ") {
		t.Errorf("A's error = %q", atA.Error)
	}
	var list struct {
		Delegations []delegation.Record `json:"delegations"`
	}
	call(t, "GET", b+"/v1/delegations", "", &list)
	if len(list.Delegations) != 1 {
		t.Fatalf("B has %d delegations", len(list.Delegations))
	}
	atB := waitFor(t, b, list.Delegations[0].ID, a2a.TaskStateFailed)
	if !strings.Contains(atB.Error, " passed while agent c was WORKING; canceled downstream") || !atB.Chain.Deadline.Equal(deadline) {
		t.Errorf("B's record = %+v", atB)
	}
	if c.Cancels() != 1 {
		t.Errorf("C saw %d cancels, want 1", c.Cancels())
	}
}

// a2aClient is an a2a-go client of the orchd at base.
func a2aClient(t *testing.T, base string) *a2aclient.Client {
	t.Helper()
	card, err := (&agentcard.Resolver{}).Resolve(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(t.Context(), card)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
