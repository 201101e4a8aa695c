package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/google/go-cmp/cmp"
)

// memoryTasksTask is a task with something in every part a caller could
// change after storing it or after reading it.
func memoryTasksTask(id a2a.TaskID) *a2a.Task {
	at := tasksStart
	return &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted, Timestamp: &at,
		Message: &a2a.Message{ID: "m", Role: a2a.MessageRoleAgent, Parts: a2a.ContentParts{a2a.NewTextPart("done")}}},
		History:   tasksHistory(2),
		Artifacts: []*a2a.Artifact{{ID: "art", Parts: a2a.ContentParts{a2a.NewTextPart("out")}}},
		Metadata:  map[string]any{"n": 1.0}}
}

// TestMemoryTasks_Copies checks that what a caller stored or read is its
// own: changing it afterwards changes nothing stored, nor what List sorts
// and filters by.
func TestMemoryTasks_Copies(t *testing.T) {
	t.Parallel()
	ctx := tasksAs(t.Context(), "alice")
	m := NewMemoryTasks(MemoryTasksConfig{})
	task := memoryTasksTask("t1")
	if _, err := m.Create(ctx, task); err != nil {
		t.Fatalf("Create: %v", err)
	}
	want := memoryTasksTask("t1")

	task.Status.Message.Parts[0] = a2a.NewTextPart("changed after Create")
	*task.Status.Timestamp = tasksStart.Add(time.Hour)
	task.Metadata["n"] = 2.0
	task.History = nil
	got, err := m.Get(ctx, "t1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(want, got.Task); diff != "" {
		t.Errorf("Get after the stored task changed (-want +got):\n%s", diff)
	}

	got.Task.Artifacts[0].Parts[0] = a2a.NewTextPart("changed after Get")
	got.Task.Metadata["n"] = 3.0
	again, err := m.Get(ctx, "t1")
	if err != nil {
		t.Fatalf("Get again: %v", err)
	}
	if diff := cmp.Diff(want, again.Task); diff != "" {
		t.Errorf("Get after a read task changed (-want +got):\n%s", diff)
	}

	// The status time List filters by is the stored one, not the changed
	// one: a filter after the stored time but before the changed time
	// leaves the task out.
	after := tasksStart.Add(time.Minute)
	resp, err := m.List(ctx, &a2a.ListTasksRequest{StatusTimestampAfter: &after})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if len(resp.Tasks) != 0 {
		t.Errorf("List after %v returned %d tasks, want none: the stored status time is %v", after, len(resp.Tasks), tasksStart)
	}
}

// TestMemoryTasks_AsTasks checks MemoryTasks where Tasks differs from
// InMemory on purpose (see Tasks): JSON's numbers, ids refused and parts
// JSON cannot carry. TestTasks_DiffersFromInMemory pages ids with "_".
func TestMemoryTasks_AsTasks(t *testing.T) {
	t.Parallel()
	ctx := tasksAs(t.Context(), "alice")
	m := NewMemoryTasks(MemoryTasksConfig{})

	task := memoryTasksTask("n1")
	task.Metadata = map[string]any{"int": 7, "list": []string{"a"}}
	if _, err := m.Create(ctx, task); err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, err := m.Get(ctx, "n1")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if diff := cmp.Diff(map[string]any{"int": 7.0, "list": []any{"a"}}, got.Task.Metadata); diff != "" {
		t.Errorf("metadata read back as JSON decodes it (-want +got):\n%s", diff)
	}

	for _, tc := range []struct {
		name string
		task *a2a.Task
		want error
	}{
		{"no task", nil, a2a.ErrInvalidParams},
		{"empty id", &a2a.Task{}, a2a.ErrInvalidParams},
		{"id over 512 bytes", &a2a.Task{ID: a2a.TaskID(fmt.Sprintf("%0513d", 0))}, a2a.ErrInvalidParams},
		{"a part with no content", &a2a.Task{ID: "p1", History: []*a2a.Message{{ID: "m", Parts: a2a.ContentParts{&a2a.Part{}}}}}, a2a.ErrInvalidParams},
	} {
		if _, err := m.Create(ctx, tc.task); !errors.Is(err, tc.want) {
			t.Errorf("Create with %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	if _, err := m.Update(ctx, &taskstore.UpdateRequest{Task: &a2a.Task{ID: "n1", History: []*a2a.Message{{ID: "m", Parts: a2a.ContentParts{&a2a.Part{}}}}}}); !errors.Is(err, a2a.ErrInvalidParams) {
		t.Errorf("Update with a part with no content: %v, want %v", err, a2a.ErrInvalidParams)
	}
}

// TestMemoryTasks_MaxEnded checks the bound on ended tasks: beyond it the
// tasks that ended longest ago are forgotten, and tasks still working are
// all kept.
func TestMemoryTasks_MaxEnded(t *testing.T) {
	t.Parallel()
	ctx := tasksAs(t.Context(), "alice")
	m := NewMemoryTasks(MemoryTasksConfig{MaxEnded: 3})
	create := func(id a2a.TaskID, state a2a.TaskState) {
		t.Helper()
		if _, err := m.Create(ctx, &a2a.Task{ID: id, ContextID: "c", Status: a2a.TaskStatus{State: state}}); err != nil {
			t.Fatalf("Create %s: %v", id, err)
		}
	}
	create("w1", a2a.TaskStateWorking)
	for _, id := range []a2a.TaskID{"e1", "e2", "e3", "e4"} {
		create(id, a2a.TaskStateCompleted)
	}
	create("w2", a2a.TaskStateWorking)
	// w2 ends: the fifth ended task, so e2 goes after e1.
	if _, err := m.Update(ctx, &taskstore.UpdateRequest{Task: &a2a.Task{ID: "w2", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateFailed}}}); err != nil {
		t.Fatalf("Update w2: %v", err)
	}
	var kept []a2a.TaskID
	for _, id := range []a2a.TaskID{"w1", "e1", "e2", "e3", "e4", "w2"} {
		_, err := m.Get(ctx, id)
		switch {
		case err == nil:
			kept = append(kept, id)
		case !errors.Is(err, a2a.ErrTaskNotFound):
			t.Fatalf("Get %s: %v", id, err)
		}
	}
	if diff := cmp.Diff([]a2a.TaskID{"w1", "e3", "e4", "w2"}, kept); diff != "" {
		t.Errorf("tasks kept (-want +got):\n%s", diff)
	}
	resp, err := m.List(ctx, &a2a.ListTasksRequest{})
	if err != nil || resp.TotalSize != 4 {
		t.Errorf("List: %v tasks, %v; want 4", resp, err)
	}
}

// TestMemoryTasks_Concurrent has writers update their own tasks naming the
// version they read while readers get and list them: every update lands
// exactly once, in order, and no reader sees a task half written.
func TestMemoryTasks_Concurrent(t *testing.T) {
	t.Parallel()
	const writers, updates = 8, 50
	ctx := tasksAs(t.Context(), "alice")
	m := NewMemoryTasks(MemoryTasksConfig{})
	for w := range writers {
		if _, err := m.Create(ctx, &a2a.Task{ID: a2a.TaskID(fmt.Sprint("w", w)), ContextID: "c", Metadata: map[string]any{"n": 0.0}}); err != nil {
			t.Fatalf("Create: %v", err)
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			id := a2a.TaskID(fmt.Sprint("w", w))
			for range updates {
				st, err := m.Get(ctx, id)
				if err != nil {
					t.Errorf("Get %s: %v", id, err)
					return
				}
				st.Task.Metadata["n"] = st.Task.Metadata["n"].(float64) + 1
				if _, err := m.Update(ctx, &taskstore.UpdateRequest{Task: st.Task, PrevVersion: st.Version}); err != nil {
					t.Errorf("Update %s: %v", id, err)
					return
				}
			}
		})
	}
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				resp, err := m.List(ctx, &a2a.ListTasksRequest{})
				if err != nil || resp.TotalSize != writers {
					t.Errorf("List: %v tasks, %v", resp, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	readers.Wait()
	for w := range writers {
		id := a2a.TaskID(fmt.Sprint("w", w))
		st, err := m.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get %s: %v", id, err)
		}
		if n := st.Task.Metadata["n"]; n != float64(updates) || st.Version != updates+1 {
			t.Errorf("%s: n = %v at version %d, want %d at %d", id, n, st.Version, updates, updates+1)
		}
	}
}

// BenchmarkTaskStores_CreateGet stores a task that ended and reads it
// back, as orchd does for a caller answered with a task, in a2a-go's
// InMemory and in MemoryTasks.
func BenchmarkTaskStores_CreateGet(b *testing.B) {
	ctx := tasksAs(b.Context(), "alice")
	for _, s := range []struct {
		name  string
		store func() taskstore.Store
	}{
		{"InMemory", func() taskstore.Store {
			return taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})
		}},
		{"MemoryTasks", func() taskstore.Store { return NewMemoryTasks(MemoryTasksConfig{}) }},
	} {
		b.Run(s.name, func(b *testing.B) {
			st := s.store()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				id := a2a.TaskID(fmt.Sprint("t", i))
				i++
				if _, err := st.Create(ctx, memoryTasksTask(id)); err != nil {
					b.Fatal(err)
				}
				if _, err := st.Get(ctx, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
