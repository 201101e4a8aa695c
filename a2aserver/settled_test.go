package a2aserver

import (
	"fmt"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/internal/testagent"
)

func equalShape(a, b testagent.TaskShape) bool {
	return a.State == b.State && a.Status == b.Status && slices.Equal(a.History, b.History) &&
		slices.Equal(a.Artifacts, b.Artifacts) && slices.Equal(a.Metadata, b.Metadata)
}

// TestFoldEvent applies events as a2a-go's task machinery stores them,
// and never changes what the events hold.
func TestFoldEvent(t *testing.T) {
	info := a2a.TaskInfo{TaskID: "t1", ContextID: "c1"}
	text := func(s string) a2a.ContentParts { return a2a.ContentParts{a2a.NewTextPart(s)} }
	art := func(id, s string, md map[string]any) *a2a.Artifact {
		return &a2a.Artifact{ID: a2a.ArtifactID(id), Parts: text(s), Metadata: md}
	}
	artEv := func(a *a2a.Artifact, appendParts bool) *a2a.TaskArtifactUpdateEvent {
		return &a2a.TaskArtifactUpdateEvent{TaskID: info.TaskID, ContextID: info.ContextID, Artifact: a, Append: appendParts}
	}
	statusEv := func(state a2a.TaskState, msg string, md map[string]any) *a2a.TaskStatusUpdateEvent {
		var m *a2a.Message
		if msg != "" {
			m = a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.NewTextPart(msg))
		}
		ev := a2a.NewStatusUpdateEvent(info, state, m)
		ev.Metadata = md
		return ev
	}
	for _, tc := range []struct {
		name   string
		events []a2a.Event
		want   testagent.TaskShape
	}{
		{"a new artifact is added", []a2a.Event{artEv(art("a", "one", nil), false), artEv(art("b", "two", nil), false)},
			testagent.TaskShape{State: a2a.TaskStateSubmitted, History: []string{"ROLE_USER:hi"}, Artifacts: []string{"one", "two"}, Metadata: []string{"x"}}},
		{"an artifact with a known id replaces it", []a2a.Event{artEv(art("a", "one", nil), false), artEv(art("a", "again", nil), false)},
			testagent.TaskShape{State: a2a.TaskStateSubmitted, History: []string{"ROLE_USER:hi"}, Artifacts: []string{"again"}, Metadata: []string{"x"}}},
		{"an append grows the parts", []a2a.Event{artEv(art("a", "one, ", nil), false), artEv(art("a", "two", map[string]any{"k": 1}), true)},
			testagent.TaskShape{State: a2a.TaskStateSubmitted, History: []string{"ROLE_USER:hi"}, Artifacts: []string{"one, two"}, Metadata: []string{"x"}}},
		{"a status message moves to the history", []a2a.Event{statusEv(a2a.TaskStateWorking, "working", nil), statusEv(a2a.TaskStateWorking, "", nil), statusEv(a2a.TaskStateCompleted, "done", nil)},
			testagent.TaskShape{State: a2a.TaskStateCompleted, Status: "ROLE_AGENT:done", History: []string{"ROLE_USER:hi", "ROLE_AGENT:working"}, Metadata: []string{"x"}}},
		{"status metadata is merged", []a2a.Event{statusEv(a2a.TaskStateWorking, "", map[string]any{"interrupted": true}), statusEv(a2a.TaskStateCompleted, "", map[string]any{"y": 2})},
			testagent.TaskShape{State: a2a.TaskStateCompleted, History: []string{"ROLE_USER:hi"}, Metadata: []string{"interrupted", "x", "y"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := a2a.NewSubmittedTask(info, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi")))
			task.Metadata = map[string]any{"x": 1}
			var before []string
			for _, ev := range tc.events {
				before = append(before, eventText(ev))
			}
			for _, ev := range tc.events {
				foldEvent(task, ev)
			}
			if got := testagent.ShapeOf(task); !equalShape(got, tc.want) {
				t.Errorf("task = %+v\nwant %+v", got, tc.want)
			}
			for i, ev := range tc.events {
				if eventText(ev) != before[i] {
					t.Errorf("event %d changed: %s, was %s", i, eventText(ev), before[i])
				}
			}
		})
	}
}

// eventText is what an event holds, to tell whether it changed.
func eventText(ev a2a.Event) string {
	switch ev := ev.(type) {
	case *a2a.TaskArtifactUpdateEvent:
		s := ""
		for _, p := range ev.Artifact.Parts {
			s += p.Text()
		}
		return fmt.Sprintf("artifact %s %q %v", ev.Artifact.ID, s, ev.Artifact.Metadata)
	case *a2a.TaskStatusUpdateEvent:
		return fmt.Sprintf("status %s %v", ev.Status.State, ev.Metadata)
	}
	return fmt.Sprintf("%T", ev)
}
