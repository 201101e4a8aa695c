package a2aserver

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testengine"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// TestFailGuard_RefusesAFailureItsDelegationDidNotHave: a2a-go marks a task
// FAILED, writing it with the event it could not process. failGuard lets
// such a write through only when the delegation behind the task failed;
// a FAILED the event itself says, one with no event (the executor's own
// failure) and one of a task that is no delegation's go through too.
func TestFailGuard_RefusesAFailureItsDelegationDidNotHave(t *testing.T) {
	t.Parallel()
	hang := testagent.Start(t, testagent.Options{Name: "Hang", Skill: "hang", Streaming: true}, testagent.Hang())
	fail := testagent.Start(t, testagent.Options{Name: "Fail", Skill: "fail", Streaming: true}, testagent.Failing("no"))
	parts := testengine.New(t, registry.Spec{ID: "hang", URL: hang.URL}, registry.Spec{ID: "fail", URL: fail.URL})
	engine := delegation.NewEngine(parts.Registry, parts.Policies, delegation.NewMemoryStore(0), delegation.Config{HTTPClient: parts.HTTPClient}, nil)
	t.Cleanup(engine.Close)
	if err := engine.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	working, err := engine.Delegate(t.Context(), delegation.Request{Skill: "hang", Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	failed, err := engine.Delegate(t.Context(), delegation.Request{Skill: "fail", Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "the failing delegation to fail", func() bool {
		return failed.Record().State == a2a.TaskStateFailed
	})
	g := failGuard{x: newExecutor(engine, nil, nil, t.Context(), slog.New(slog.DiscardHandler))}

	of := func(id string) map[string]any {
		return map[string]any{taskDelegationKey: map[string]any{"delegation": id}}
	}
	markedFailed := func(md map[string]any) *a2a.Task {
		return &a2a.Task{ID: a2a.NewTaskID(), Status: a2a.TaskStatus{State: a2a.TaskStateFailed}, Metadata: md}
	}
	workingEv := a2a.NewStatusUpdateEvent(a2a.TaskInfo{}, a2a.TaskStateWorking, nil)
	for _, tc := range []struct {
		name   string
		req    *taskstore.UpdateRequest
		refuse string // in the refusal; "" lets it through
	}{
		{"a working delegation", &taskstore.UpdateRequest{Task: markedFailed(of(working.ID())), Event: workingEv}, "which is TASK_STATE_"},
		{"an unknown delegation", &taskstore.UpdateRequest{Task: markedFailed(of("nope")), Event: workingEv}, "which cannot be read"},
		{"a failed delegation", &taskstore.UpdateRequest{Task: markedFailed(of(failed.ID())), Event: workingEv}, ""},
		{"an event that says FAILED", &taskstore.UpdateRequest{Task: markedFailed(of(working.ID())),
			Event: a2a.NewStatusUpdateEvent(a2a.TaskInfo{}, a2a.TaskStateFailed, nil)}, ""},
		{"no event", &taskstore.UpdateRequest{Task: markedFailed(of(working.ID()))}, ""},
		{"no delegation", &taskstore.UpdateRequest{Task: markedFailed(nil), Event: workingEv}, ""},
		{"not FAILED", &taskstore.UpdateRequest{Task: &a2a.Task{ID: a2a.NewTaskID(), Status: a2a.TaskStatus{State: a2a.TaskStateWorking},
			Metadata: of(working.ID())}, Event: workingEv}, ""},
	} {
		_, err := g.check(t.Context(), tc.req)
		switch {
		case tc.refuse == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.name, err)
		case tc.refuse != "" && (err == nil || !strings.Contains(err.Error(), tc.refuse)):
			t.Errorf("%s: %v; want a refusal saying %q", tc.name, err, tc.refuse)
		}
	}
}
