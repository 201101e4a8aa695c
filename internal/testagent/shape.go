package testagent

import (
	"slices"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TaskShape is what a caller sees of a finished task, without what
// differs from one task to the next (ids, times, a delegation's id), so
// tests can compare tasks answered by different routes with cmp.Diff.
type TaskShape struct {
	State     a2a.TaskState
	Status    string   // the status message, "ROLE:text"
	History   []string // each message, "ROLE:text"
	Artifacts []string // each artifact's text
	Metadata  []string // the metadata keys, sorted
}

// ShapeOf returns the shape of task.
func ShapeOf(task *a2a.Task) TaskShape {
	s := TaskShape{State: task.Status.State}
	if m := task.Status.Message; m != nil {
		s.Status = string(m.Role) + ":" + Text(m)
	}
	for _, m := range task.History {
		s.History = append(s.History, string(m.Role)+":"+Text(m))
	}
	for _, a := range task.Artifacts {
		text := ""
		for _, p := range a.Parts {
			text += p.Text()
		}
		s.Artifacts = append(s.Artifacts, text)
	}
	for k := range task.Metadata {
		s.Metadata = append(s.Metadata, k)
	}
	slices.Sort(s.Metadata)
	return s
}
