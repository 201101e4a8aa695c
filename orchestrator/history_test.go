package orchestrator

import (
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
)

// historyIDs lists the ids of a task's history.
func historyIDs(t *a2a.Task) []string {
	var ids []string
	for _, m := range t.History {
		ids = append(ids, m.ID)
	}
	return ids
}

// askedAndAnswered runs an Ask agent's task to its end through client: a
// message, the input it asks for, and returns the task, its history then
// holding three messages.
func askedAndAnswered(t *testing.T, client *a2aclient.Client, historyLength *int) (first, last *a2a.Task) {
	t.Helper()
	res, err := client.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: userMessage(a2a.NewMessageID(), "ask me"),
		Config: &a2a.SendMessageConfig{HistoryLength: historyLength}})
	if err != nil {
		t.Fatal(err)
	}
	first, ok := res.(*a2a.Task)
	if !ok || first.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("SendMessage = %#v, want a task waiting for input", res)
	}
	m := userMessage(a2a.NewMessageID(), "1999")
	m.TaskID = first.ID
	if res, err = client.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{HistoryLength: historyLength}}); err != nil {
		t.Fatal(err)
	}
	if last, ok = res.(*a2a.Task); !ok || last.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("input answered with %#v", res)
	}
	return first, last
}

// TestHistoryLength_GetTaskAndSendMessage checks historyLength as A2A 1.0
// §3.2.4 defines it, over every binding orchd serves: unset is the whole
// history, 0 none, N the N most recent messages, on GetTask and on the
// Task SendMessage and SendStreamingMessage answer with.
func TestHistoryLength_GetTaskAndSendMessage(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Asker", Skill: "ask", Streaming: true}, testagent.Ask())
	base := orchdNode(t, "solo", "ask", registry.Spec{ID: "asker", URL: agent.URL})
	for _, b := range orchdBindings {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			client := bindingClient(t, base, b, nil)
			_, done := askedAndAnswered(t, client, nil)
			full, err := client.GetTask(t.Context(), &a2a.GetTaskRequest{ID: done.ID})
			if err != nil {
				t.Fatal(err)
			}
			all := historyIDs(full)
			if len(all) < 3 || !slices.Equal(historyIDs(done), all) {
				t.Fatalf("unset historyLength: SendMessage's history %q, GetTask's %q; want the same three or more", historyIDs(done), all)
			}
			for _, n := range []int{0, 1, 2, len(all), len(all) + 5, -1} {
				want := all
				if n >= 0 && n < len(all) {
					want = all[len(all)-n:]
				}
				got, err := client.GetTask(t.Context(), &a2a.GetTaskRequest{ID: done.ID, HistoryLength: &n})
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(historyIDs(got), want) {
					t.Errorf("GetTask historyLength %d: history %q, want %q", n, historyIDs(got), want)
				}
			}
			// A2A 0.3's HTTP+JSON binding sends the configuration as
			// proto3 JSON, whose plain int32 cannot tell 0 from unset:
			// a2a-go reads 0 there as unset, so the whole history comes.
			noneOnSend := b.name != "rest-0.3"
			for _, n := range []int{0, 1} {
				first, last := askedAndAnswered(t, client, &n)
				if n == 0 && !noneOnSend {
					if len(last.History) < 3 {
						t.Errorf("SendMessage historyLength 0 over %s: %d history messages, want all (0 reads as unset)", b.name, len(last.History))
					}
					continue
				}
				if len(first.History) > n || len(last.History) != n {
					t.Errorf("SendMessage historyLength %d: histories of %d and %d messages", n, len(first.History), len(last.History))
				}
				if n == 1 {
					stored, err := client.GetTask(t.Context(), &a2a.GetTaskRequest{ID: last.ID})
					if err != nil {
						t.Fatal(err)
					}
					if all := historyIDs(stored); !slices.Equal(historyIDs(last), all[len(all)-1:]) {
						t.Errorf("SendMessage historyLength 1 kept %q of %q, want the most recent", historyIDs(last), all)
					}
				}
			}
			zero := 0
			for ev, err := range client.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: userMessage(a2a.NewMessageID(), "ask me"),
				Config: &a2a.SendMessageConfig{HistoryLength: &zero}}) {
				if err != nil {
					t.Fatal(err)
				}
				if task, ok := ev.(*a2a.Task); ok && noneOnSend && len(task.History) != 0 {
					t.Errorf("SendStreamingMessage historyLength 0: the Task event has %d history messages", len(task.History))
				}
			}
		})
	}
}

// TestHistoryLength_A2AGoIgnoresItOnSendMessage shows the gap orchd
// closes: an a2a-go agent answers SendMessage with the whole history
// whatever historyLength says, and cuts GetTask's.
func TestHistoryLength_A2AGoIgnoresItOnSendMessage(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Asker", Skill: "ask", Streaming: true}, testagent.Ask())
	client := testagent.Client(t, agent.URL)
	zero := 0
	_, last := askedAndAnswered(t, client, &zero)
	if len(last.History) == 0 {
		t.Errorf("a2a-go's SendMessage honoured historyLength 0; orchd's historyLimit may no longer be needed")
	}
	got, err := client.GetTask(t.Context(), &a2a.GetTaskRequest{ID: last.ID, HistoryLength: &zero})
	if err != nil || len(got.History) != 0 {
		t.Errorf("a2a-go's GetTask historyLength 0 = %d messages, %v", len(got.History), err)
	}
}
