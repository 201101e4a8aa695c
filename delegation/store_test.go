package delegation

import (
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

func TestMemoryStore_BoundedKeepsRunning(t *testing.T) {
	t.Parallel()
	s := NewMemoryStore(3)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(id string, st a2a.TaskState, i int) {
		if err := s.Put(t.Context(), Record{ID: id, State: st, CreatedAt: at.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	put("running", a2a.TaskStateWorking, 0)
	put("done-1", a2a.TaskStateCompleted, 1)
	put("done-2", a2a.TaskStateFailed, 2)
	put("done-3", a2a.TaskStateCompleted, 3)
	put("done-4", a2a.TaskStateCompleted, 4)
	all, _ := s.List(t.Context(), a2a.TaskStateUnspecified)
	var ids []string
	for _, r := range all {
		ids = append(ids, r.ID)
	}
	if len(all) != 3 || ids[0] != "done-4" || ids[2] != "running" {
		t.Errorf("kept %v; want the newest ended and the running one", ids)
	}
	if _, err := s.Get(t.Context(), "done-1"); err == nil {
		t.Error("the oldest ended record was kept")
	}
	// Updating a kept record does not count twice.
	put("running", a2a.TaskStateCompleted, 0)
	if all, _ := s.List(t.Context(), a2a.TaskStateCompleted); len(all) != 3 {
		t.Errorf("completed = %d", len(all))
	}
}
