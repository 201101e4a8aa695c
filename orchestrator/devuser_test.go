package orchestrator

import (
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
)

// TestListTasks_NoAuthListsTheCallersTasks: with no authentication
// configured, on loopback, ListTasks lists the tasks the (development)
// caller made, with tasks kept in memory and in the durable store alike,
// over every binding that serves it.
func TestListTasks_NoAuthListsTheCallersTasks(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Work(time.Millisecond))
	for _, store := range []string{"memory", "durable"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			cfg := loadDefaults(t)
			cfg.Agents = []registry.Spec{{ID: "worker", URL: agent.URL}}
			if store == "durable" {
				cfg.StateDir = t.TempDir()
			}
			base := startDaemon(t, cfg)
			send := bindingClient(t, base, orchdBindings[0], nil)
			var made []a2a.TaskID
			for range 2 {
				res, err := send.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: userMessage(a2a.NewMessageID(), "survey")})
				if err != nil {
					t.Fatal(err)
				}
				task, ok := res.(*a2a.Task)
				if !ok {
					t.Fatalf("SendMessage = %T", res)
				}
				made = append(made, task.ID)
			}
			// a2a-go's JSON-RPC 0.3 handler has no tasks/list.
			for _, b := range []a2aBinding{orchdBindings[0], orchdBindings[1], orchdBindings[3]} {
				list, err := bindingClient(t, base, b, nil).ListTasks(t.Context(), &a2a.ListTasksRequest{})
				if err != nil {
					t.Errorf("%s ListTasks: %v", b.name, err)
					continue
				}
				var got []a2a.TaskID
				for _, task := range list.Tasks {
					got = append(got, task.ID)
				}
				if diff := cmp.Diff([]a2a.TaskID{made[1], made[0]}, got); diff != "" {
					t.Errorf("%s ListTasks, want newest first (-want +got):\n%s", b.name, diff)
				}
			}
		})
	}
}
