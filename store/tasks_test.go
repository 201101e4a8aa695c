package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/natstest"
	"github.com/orchd/orchd/internal/testclock"
	"github.com/orchd/orchd/internal/testwait"
)

// tasksStart is where the test clocks of this file stand at first.
var tasksStart = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// newTestTasks opens a task store on a fresh embedded JetStream server.
func newTestTasks(t testing.TB, cfg TasksConfig) *Tasks {
	t.Helper()
	js := natstest.JetStream(t, natstest.Server(t, ""))
	tasks, err := NewTasks(t.Context(), js, cfg)
	if err != nil {
		t.Fatalf("NewTasks: %v", err)
	}
	return tasks
}

// tasksAs is ctx acting for user, as a2a-go's transports and an
// authenticating interceptor leave it; "" is an anonymous caller.
func tasksAs(ctx context.Context, user string) context.Context {
	ctx, cc := a2asrv.NewCallContext(ctx, nil)
	if user != "" {
		cc.User = a2asrv.NewAuthenticatedUser(user, nil)
	}
	return ctx
}

// tasksJSON renders v for failure messages.
func tasksJSON(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Sprintf("%#v", v)
	}
	return string(b)
}

// richTask is a task using every kind of part and nested metadata, all in
// the types JSON decodes to (float64, []any, map[string]any), so it comes
// back from the store deep-equal.
func richTask(id a2a.TaskID) *a2a.Task {
	ts := tasksStart.Add(1500 * time.Millisecond)
	return &a2a.Task{
		ID:        id,
		ContextID: "ctx-rich",
		Status: a2a.TaskStatus{
			State:     a2a.TaskStateWorking,
			Timestamp: &ts,
			Message: &a2a.Message{ID: "m-status", Role: a2a.MessageRoleAgent,
				Parts: a2a.ContentParts{a2a.NewTextPart("thinking <about> \"it\" & more\nnext line")}},
		},
		History: []*a2a.Message{
			{ID: "m1", Role: a2a.MessageRoleUser, ContextID: "ctx-rich", TaskID: id,
				Extensions:     []string{"https://example.com/ext/v1"},
				ReferenceTasks: []a2a.TaskID{"other-task"},
				Metadata:       map[string]any{"trace": map[string]any{"span": "abc", "depth": 2.0}},
				Parts: a2a.ContentParts{
					a2a.NewTextPart("héllo, 世界 🌍"),
					{Content: a2a.Raw([]byte{0x00, 0x01, 0xfe, 0xff, '\n'}), Filename: "blob.bin", MediaType: "application/octet-stream"},
					a2a.NewDataPart(map[string]any{"list": []any{1.0, "two", true, nil, []any{3.5}}, "nested": map[string]any{"deep": map[string]any{"x": -1.25}}}),
					{Content: a2a.URL("https://example.com/file.pdf"), Filename: "file.pdf", MediaType: "application/pdf",
						Metadata: map[string]any{"size": 1024.0}},
					a2a.NewTextPart(""),
					{Content: a2a.Raw([]byte{}), Filename: "empty.bin"},
				}},
			{ID: "m2", Role: a2a.MessageRoleAgent, Parts: a2a.ContentParts{a2a.NewDataPart([]any{1.0, 2.0})}},
		},
		Artifacts: []*a2a.Artifact{
			{ID: "a1", Name: "report", Description: "the report", Extensions: []string{"urn:x"},
				Metadata: map[string]any{"empty": map[string]any{}, "none": []any{}, "null": nil},
				Parts:    a2a.ContentParts{a2a.NewTextPart("done"), a2a.NewDataPart("a bare string")}},
		},
		Metadata: map[string]any{
			"level1": map[string]any{"level2": map[string]any{"level3": []any{map[string]any{"k": "v"}, 4.0}}},
			"flag":   false,
			"big":    9007199254740992.0, // 2^53, still exact
		},
	}
}

// TestTasks_RoundTrip stores tasks and reads them back: what JSON keeps
// comes back deep-equal, and what it changes changes as documented.
func TestTasks_RoundTrip(t *testing.T) {
	t.Parallel()
	tasks := newTestTasks(t, TasksConfig{})
	ctx := tasksAs(t.Context(), "alice")
	zone := time.FixedZone("UTC+5:30", 5*3600+1800)
	local := time.Date(2026, 3, 1, 17, 30, 0, 123456789, zone)
	cases := []struct {
		name string
		give *a2a.Task
		// want is what Get returns; give when nil.
		want *a2a.Task
	}{
		{name: "every part kind, nested metadata, history and artifacts", give: richTask("rich")},
		{name: "minimal", give: &a2a.Task{ID: "minimal", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateSubmitted}}},
		{name: "integers come back as float64", give: &a2a.Task{ID: "ints", ContextID: "c",
			Metadata: map[string]any{"n": 42, "list": []any{1, int64(2)}, "strs": []string{"a"}}},
			want: &a2a.Task{ID: "ints", ContextID: "c", Metadata: map[string]any{"n": 42.0, "list": []any{1.0, 2.0}, "strs": []any{"a"}}}},
		{name: "empty top-level collections come back nil", give: &a2a.Task{ID: "empties", ContextID: "c",
			History: []*a2a.Message{}, Artifacts: []*a2a.Artifact{}, Metadata: map[string]any{}},
			want: &a2a.Task{ID: "empties", ContextID: "c"}},
		{name: "id with characters a key cannot hold", give: &a2a.Task{ID: "job/42 with spaces.and*wild>cards=", ContextID: "c"}},
		{name: "unspecified state", give: &a2a.Task{ID: "unspecified", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateUnspecified}}},
		{name: "nil entries survive", give: &a2a.Task{ID: "nils", ContextID: "c", History: []*a2a.Message{nil, {ID: "m", Parts: a2a.ContentParts{nil}}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == nil {
				want = tc.give
			}
			v, err := tasks.Create(ctx, tc.give)
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			got, err := tasks.Get(ctx, tc.give.ID)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if got.Version != v || got.User != "alice" {
				t.Errorf("Get version %d user %q, want %d %q", got.Version, got.User, v, "alice")
			}
			if !reflect.DeepEqual(got.Task, want) {
				t.Errorf("Get returned\n%s\nwant\n%s", tasksJSON(got.Task), tasksJSON(want))
			}
			// Each Get is a copy of its own: changing one changes no other.
			got.Task.ContextID = "changed"
			if len(got.Task.History) > 0 && got.Task.History[0] != nil {
				got.Task.History[0].ID = "changed"
			}
			again, err := tasks.Get(ctx, tc.give.ID)
			if err != nil {
				t.Fatalf("Get again: %v", err)
			}
			if !reflect.DeepEqual(again.Task, want) {
				t.Errorf("a change to one Get's task showed in the next:\n%s", tasksJSON(again.Task))
			}
		})
	}

	t.Run("status time keeps its instant", func(t *testing.T) {
		task := &a2a.Task{ID: "zoned", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &local}}
		if _, err := tasks.Create(ctx, task); err != nil {
			t.Fatalf("Create: %v", err)
		}
		got, err := tasks.Get(ctx, "zoned")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if ts := got.Task.Status.Timestamp; ts == nil || !ts.Equal(local) {
			t.Errorf("timestamp %v, want %v", ts, local)
		}
	})
}

// TestTasks_Golden pins the stored record's layout: a record written by an
// earlier orchd must stay readable, so a change of layout needs a new
// version and a new golden file next to this one.
func TestTasks_Golden(t *testing.T) {
	t.Parallel()
	path := filepath.Join("testdata", "tasks", "record-v1.txt")
	tasks := &Tasks{cfg: TasksConfig{MaxTaskBytes: DefaultMaxTaskBytes}}
	got, err := tasks.encode("alice", tasksStart, richTask("golden"))
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	if os.Getenv("ORCHD_UPDATE_GOLDEN") != "" {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file (ORCHD_UPDATE_GOLDEN=1 writes it): %v", err)
	}
	if !bytes.Equal(got, golden) {
		t.Errorf("record layout changed; got\n%s\nwant\n%s", got, golden)
	}
	hdr, body, err := splitTaskRecord(golden)
	if err != nil {
		t.Fatalf("split golden record: %v", err)
	}
	if diff := cmp.Diff(taskHeader{V: 1, User: "alice", Users: taskUsersMarked, Updated: tasksStart}, hdr); diff != "" {
		t.Errorf("golden header (-want +got):\n%s", diff)
	}
	var task a2a.Task
	if err := json.Unmarshal(body, &task); err != nil {
		t.Fatalf("decode golden task: %v", err)
	}
	if want := richTask("golden"); !reflect.DeepEqual(&task, want) {
		t.Errorf("golden task decodes to\n%s\nwant\n%s", tasksJSON(&task), tasksJSON(want))
	}
}

// tasksSentinels are the errors callers decide on; two stores agree on an
// error when it matches the same one of these.
var tasksSentinels = []error{taskstore.ErrTaskAlreadyExists, taskstore.ErrConcurrentModification,
	a2a.ErrTaskNotFound, a2a.ErrUnauthenticated, a2a.ErrInvalidRequest, a2a.ErrParseError, a2a.ErrInvalidParams}

// tasksErrKind names err by the sentinel it matches.
func tasksErrKind(err error) string {
	if err == nil {
		return "nil"
	}
	for _, s := range tasksSentinels {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "unexpected: " + err.Error()
}

// tasksOp is one step of the differential test.
type tasksOp struct {
	name string
	user string
	// op is create, update, get or list.
	op   string
	task *a2a.Task
	// id is the task got.
	id a2a.TaskID
	// version is what an update names: latest, stale, future or missing.
	version string
	list    *a2a.ListTasksRequest
	// nextPage continues the previous list of the same store.
	nextPage bool
	wantErr  error
}

// tasksRun applies ops to one store and remembers what it needs to name
// versions and pages.
type tasksRun struct {
	s        taskstore.Store
	clock    *testclock.Clock
	versions map[a2a.TaskID][]taskstore.TaskVersion
	next     string
}

// tasksResult is what a step returned, in a form two stores can share.
type tasksResult struct {
	Err  string
	Task *a2a.Task
	User string
	// Latest says a returned version is the newest this store handed out
	// for the task.
	Latest bool
	List   *a2a.ListTasksResponse
}

func (r *tasksRun) apply(ctx context.Context, op tasksOp) tasksResult {
	r.clock.Advance(time.Second)
	ctx = tasksAs(ctx, op.user)
	var res tasksResult
	switch op.op {
	case "create":
		v, err := r.s.Create(ctx, op.task)
		res.Err = tasksErrKind(err)
		if err == nil {
			r.versions[op.task.ID] = append(r.versions[op.task.ID], v)
		}
	case "update":
		vs := r.versions[op.task.ID]
		var prev taskstore.TaskVersion
		switch op.version {
		case "latest":
			prev = vs[len(vs)-1]
		case "stale":
			prev = vs[len(vs)-2]
		case "future":
			prev = vs[len(vs)-1] + 1000
		case "missing":
			prev = taskstore.TaskVersionMissing
		}
		v, err := r.s.Update(ctx, &taskstore.UpdateRequest{Task: op.task, Event: op.task, PrevVersion: prev})
		res.Err = tasksErrKind(err)
		if err == nil {
			res.Latest = v.After(vs[len(vs)-1])
			r.versions[op.task.ID] = append(vs, v)
		}
	case "get":
		st, err := r.s.Get(ctx, op.id)
		res.Err = tasksErrKind(err)
		if err == nil {
			vs := r.versions[op.id]
			res.Task, res.User, res.Latest = st.Task, st.User, st.Version == vs[len(vs)-1]
		}
	case "list":
		req := *op.list
		if op.nextPage {
			req.PageToken = r.next
		}
		resp, err := r.s.List(ctx, &req)
		res.Err = tasksErrKind(err)
		if err == nil {
			res.List = resp
			r.next = resp.NextPageToken
		}
	}
	return res
}

// tasksHistory is n short messages.
func tasksHistory(n int) []*a2a.Message {
	var h []*a2a.Message
	for i := range n {
		h = append(h, &a2a.Message{ID: fmt.Sprintf("h%d", i), Role: a2a.MessageRoleUser, Parts: a2a.ContentParts{a2a.NewTextPart(fmt.Sprint(i))}})
	}
	return h
}

// TestTasks_MatchesInMemory applies one sequence of operations to a2a-go's
// InMemory store, to Tasks and to MemoryTasks: every step returns the same
// result and the same error. The steps keep to what the two do alike (see Tasks for where
// they differ on purpose; TestTasks_DiffersFromInMemory covers those).
func TestTasks_MatchesInMemory(t *testing.T) {
	t.Parallel()
	ts := func(sec int) *time.Time { v := tasksStart.Add(time.Duration(sec) * time.Second); return &v }
	work := func(id a2a.TaskID, ctxID string, state a2a.TaskState, at *time.Time) *a2a.Task {
		return &a2a.Task{ID: id, ContextID: ctxID, Status: a2a.TaskStatus{State: state, Timestamp: at},
			History:   tasksHistory(3),
			Artifacts: []*a2a.Artifact{{ID: "art", Parts: a2a.ContentParts{a2a.NewTextPart("out " + string(id))}}},
			Metadata:  map[string]any{"id": string(id), "n": map[string]any{"deep": []any{1.0, "x"}}}}
	}
	t1v2 := work("t1", "c1", a2a.TaskStateWorking, ts(20))
	t1v2.History = append(t1v2.History, &a2a.Message{ID: "more", Role: a2a.MessageRoleAgent, Parts: a2a.ContentParts{a2a.NewTextPart("more")}})
	t1v2.Metadata["step"] = 2.0
	t1v3 := work("t1", "c1", a2a.TaskStateWorking, ts(30))
	t1v3.Metadata["step"] = 3.0
	long := work("long", "c2", a2a.TaskStateInputRequired, ts(40))
	long.History = tasksHistory(105)
	weird := work("job/42 with spaces.and*wild>cards", "c1", a2a.TaskStateSubmitted, nil)
	done := work("t2", "c2", a2a.TaskStateCompleted, ts(50))

	ops := []tasksOp{
		{name: "create", user: "alice", op: "create", task: work("t1", "c1", a2a.TaskStateWorking, ts(10))},
		{name: "create again", user: "alice", op: "create", task: work("t1", "c1", a2a.TaskStateWorking, ts(10)), wantErr: taskstore.ErrTaskAlreadyExists},
		{name: "create another user's id", user: "bob", op: "create", task: work("t1", "c9", a2a.TaskStateWorking, nil), wantErr: taskstore.ErrTaskAlreadyExists},
		{name: "get as owner", user: "alice", op: "get", id: "t1"},
		{name: "get as another user", user: "bob", op: "get", id: "t1", wantErr: a2a.ErrTaskNotFound},
		{name: "get anonymously", user: "", op: "get", id: "t1", wantErr: a2a.ErrTaskNotFound},
		{name: "get missing", user: "alice", op: "get", id: "nope", wantErr: a2a.ErrTaskNotFound},
		{name: "update at the latest version", user: "alice", op: "update", task: t1v2, version: "latest"},
		{name: "update at a stale version", user: "alice", op: "update", task: t1v3, version: "stale", wantErr: taskstore.ErrConcurrentModification},
		{name: "update at a future version", user: "alice", op: "update", task: t1v3, version: "future", wantErr: taskstore.ErrConcurrentModification},
		{name: "update another user's task", user: "bob", op: "update", task: t1v3, version: "latest", wantErr: a2a.ErrTaskNotFound},
		{name: "update another user's task naming no version", user: "bob", op: "update", task: t1v3, version: "missing", wantErr: a2a.ErrTaskNotFound},
		{name: "get after the refused updates", user: "alice", op: "get", id: "t1"},
		{name: "update naming no version", user: "alice", op: "update", task: t1v3, version: "missing"},
		{name: "get the untracked update", user: "alice", op: "get", id: "t1"},
		{name: "update a missing task", user: "alice", op: "update", task: work("nope", "c1", a2a.TaskStateWorking, nil), version: "missing", wantErr: a2a.ErrTaskNotFound},
		{name: "create long history", user: "alice", op: "create", task: long},
		{name: "create odd id", user: "alice", op: "create", task: weird},
		{name: "get odd id", user: "alice", op: "get", id: weird.ID},
		{name: "create ended", user: "alice", op: "create", task: done},
		{name: "create bob's", user: "bob", op: "create", task: work("b1", "c1", a2a.TaskStateWorking, ts(60))},
		{name: "create anonymous", user: "", op: "create", task: work("anon", "c1", a2a.TaskStateWorking, nil)},
		{name: "get anonymous as anonymous", user: "", op: "get", id: "anon"},
		{name: "list anonymously", user: "", op: "list", list: &a2a.ListTasksRequest{}, wantErr: a2a.ErrUnauthenticated},
		{name: "list", user: "alice", op: "list", list: &a2a.ListTasksRequest{}},
		{name: "list with artifacts, no history", user: "alice", op: "list", list: &a2a.ListTasksRequest{IncludeArtifacts: true, HistoryLength: new(0)}},
		{name: "list last two messages", user: "alice", op: "list", list: &a2a.ListTasksRequest{HistoryLength: new(2)}},
		{name: "list whole history", user: "alice", op: "list", list: &a2a.ListTasksRequest{HistoryLength: new(-1)}},
		{name: "list by context", user: "alice", op: "list", list: &a2a.ListTasksRequest{ContextID: "c1"}},
		{name: "list by state", user: "alice", op: "list", list: &a2a.ListTasksRequest{Status: a2a.TaskStateCompleted}},
		{name: "list by status time", user: "alice", op: "list", list: &a2a.ListTasksRequest{StatusTimestampAfter: ts(35)}},
		{name: "list page 1", user: "alice", op: "list", list: &a2a.ListTasksRequest{PageSize: 2}},
		{name: "list page 2", user: "alice", op: "list", list: &a2a.ListTasksRequest{PageSize: 2}, nextPage: true},
		{name: "list page 3", user: "alice", op: "list", list: &a2a.ListTasksRequest{PageSize: 2}, nextPage: true},
		{name: "list page size over 100", user: "alice", op: "list", list: &a2a.ListTasksRequest{PageSize: 101}, wantErr: a2a.ErrInvalidRequest},
		{name: "list negative page size", user: "alice", op: "list", list: &a2a.ListTasksRequest{PageSize: -1}, wantErr: a2a.ErrInvalidRequest},
		{name: "list bad token", user: "alice", op: "list", list: &a2a.ListTasksRequest{PageToken: "!!not base64"}, wantErr: a2a.ErrParseError},
		{name: "list token without separator", user: "alice", op: "list", list: &a2a.ListTasksRequest{PageToken: "bm9zZXBhcmF0b3I="}, wantErr: a2a.ErrParseError},
		{name: "list as bob", user: "bob", op: "list", list: &a2a.ListTasksRequest{IncludeArtifacts: true}},
		{name: "update t1 to ended", user: "alice", op: "update", task: work("t1", "c1", a2a.TaskStateFailed, ts(70)), version: "latest"},
		{name: "list after the update", user: "alice", op: "list", list: &a2a.ListTasksRequest{PageSize: 3}},
		{name: "list ended by context", user: "alice", op: "list", list: &a2a.ListTasksRequest{ContextID: "c1", Status: a2a.TaskStateFailed}},
	}

	newRun := func(s func(now func() time.Time) taskstore.Store) *tasksRun {
		clock := testclock.New(tasksStart)
		return &tasksRun{s: s(clock.Now), clock: clock, versions: map[a2a.TaskID][]taskstore.TaskVersion{}}
	}
	mem := newRun(func(now func() time.Time) taskstore.Store {
		return taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator(), TimeProvider: now})
	})
	js := natstest.JetStream(t, natstest.Server(t, ""))
	kv := newRun(func(now func() time.Time) taskstore.Store {
		tasks, err := NewTasks(t.Context(), js, TasksConfig{Now: now})
		if err != nil {
			t.Fatalf("NewTasks: %v", err)
		}
		return tasks
	})

	ours := newRun(func(now func() time.Time) taskstore.Store {
		return NewMemoryTasks(MemoryTasksConfig{Now: now})
	})

	for i, op := range ops {
		want := mem.apply(t.Context(), op)
		got := kv.apply(t.Context(), op)
		if want.Err != tasksErrKind(op.wantErr) {
			t.Fatalf("step %d %q: InMemory returned error %q, the test expects %q", i, op.name, want.Err, tasksErrKind(op.wantErr))
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("step %d %q:\nTasks returned\n%s\nInMemory returned\n%s", i, op.name, tasksJSON(got), tasksJSON(want))
		}
		if got := ours.apply(t.Context(), op); !reflect.DeepEqual(got, want) {
			t.Errorf("step %d %q:\nMemoryTasks returned\n%s\nInMemory returned\n%s", i, op.name, tasksJSON(got), tasksJSON(want))
		}
		if op.op == "list" && want.List != nil && want.List.TotalSize == 0 {
			t.Errorf("step %d %q lists nothing, which proves little", i, op.name)
		}
	}
}

// TestTasks_DiffersFromInMemory shows each documented difference from
// InMemory.
func TestTasks_DiffersFromInMemory(t *testing.T) {
	t.Parallel()
	ctx := tasksAs(t.Context(), "alice")

	t.Run("ids with underscores page", func(t *testing.T) {
		t.Parallel()
		mem := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})
		tasks := newTestTasks(t, TasksConfig{})
		ours := NewMemoryTasks(MemoryTasksConfig{})
		for _, s := range []taskstore.Store{mem, tasks, ours} {
			for _, id := range []a2a.TaskID{"a_1", "a_2", "a_3"} {
				if _, err := s.Create(ctx, &a2a.Task{ID: id, ContextID: "c"}); err != nil {
					t.Fatalf("Create %s: %v", id, err)
				}
			}
		}
		for name, s := range map[string]taskstore.Store{"Tasks": tasks, "MemoryTasks": ours} {
			var seen []a2a.TaskID
			token := ""
			for range 3 {
				resp, err := s.List(ctx, &a2a.ListTasksRequest{PageSize: 1, PageToken: token})
				if err != nil {
					t.Fatalf("%s.List: %v", name, err)
				}
				for _, task := range resp.Tasks {
					seen = append(seen, task.ID)
				}
				token = resp.NextPageToken
			}
			if want := []a2a.TaskID{"a_3", "a_2", "a_1"}; !reflect.DeepEqual(seen, want) || token != "" {
				t.Errorf("%s paged %v (next %q), want %v", name, seen, token, want)
			}
		}
		first, err := mem.List(ctx, &a2a.ListTasksRequest{PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := mem.List(ctx, &a2a.ListTasksRequest{PageSize: 1, PageToken: first.NextPageToken}); !errors.Is(err, a2a.ErrParseError) {
			t.Errorf("InMemory paged an id with _ (err %v); the difference is gone, update the doc", err)
		}
	})

	t.Run("refused on write", func(t *testing.T) {
		t.Parallel()
		tasks := newTestTasks(t, TasksConfig{MaxTaskBytes: 4 << 10})
		mem := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})
		part := func(p *a2a.Part) *a2a.Task {
			return &a2a.Task{ID: a2a.NewTaskID(), ContextID: "c", History: []*a2a.Message{{ID: "m", Parts: a2a.ContentParts{p}}}}
		}
		cases := []struct {
			name    string
			task    *a2a.Task
			want    error
			memOK   bool
			wantMsg string
		}{
			{name: "part without content", task: part(&a2a.Part{}), want: a2a.ErrInvalidParams, memOK: true},
			{name: "nil data", task: part(a2a.NewDataPart(nil)), want: a2a.ErrInvalidParams, memOK: true},
			{name: "nil raw bytes", task: part(a2a.NewRawPart(nil)), want: a2a.ErrInvalidParams, memOK: true},
			{name: "empty URL", task: part(&a2a.Part{Content: a2a.URL("")}), want: a2a.ErrInvalidParams, memOK: true},
			{name: "artifact part without content", task: &a2a.Task{ID: "art", ContextID: "c",
				Artifacts: []*a2a.Artifact{{ID: "a", Parts: a2a.ContentParts{{}}}}}, want: a2a.ErrInvalidParams, memOK: true},
			{name: "empty id", task: &a2a.Task{ContextID: "c"}, want: a2a.ErrInvalidParams, memOK: true},
			{name: "id over 512 bytes", task: &a2a.Task{ID: a2a.TaskID(strings.Repeat("x", 513)), ContextID: "c"}, want: a2a.ErrInvalidParams, memOK: true},
			{name: "over MaxTaskBytes", task: &a2a.Task{ID: "big", ContextID: "c", Metadata: map[string]any{"blob": strings.Repeat("x", 5<<10)}},
				want: ErrTaskTooLarge, memOK: true, wantMsg: "over the limit of 4096"},
			{name: "NaN metadata", task: &a2a.Task{ID: "nan", ContextID: "c", Metadata: map[string]any{"x": nan()}}, memOK: true},
		}
		for _, tc := range cases {
			_, err := tasks.Create(ctx, tc.task)
			if err == nil || (tc.want != nil && !errors.Is(err, tc.want)) || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("%s: Tasks.Create returned %v, want %v", tc.name, err, tc.want)
			}
			if _, err := tasks.Get(ctx, tc.task.ID); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("%s: refused task is readable (err %v)", tc.name, err)
			}
			if _, err := mem.Create(ctx, tc.task); (err == nil) != tc.memOK {
				t.Errorf("%s: InMemory.Create returned %v", tc.name, err)
			}
		}
		// What InMemory's checks refuse but JSON carries is accepted.
		if _, err := tasks.Create(ctx, &a2a.Task{ID: "uint", ContextID: "c", Metadata: map[string]any{"u": uint(7), "s": struct{ A int }{1}}}); err != nil {
			t.Errorf("Tasks.Create of uint and struct metadata: %v", err)
		}
		if _, err := mem.Create(ctx, &a2a.Task{ID: "uint", ContextID: "c", Metadata: map[string]any{"u": uint(7)}}); err == nil {
			t.Errorf("InMemory accepted uint metadata; the difference is gone, update the doc")
		}
		st, err := tasks.Get(ctx, "uint")
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]any{"u": 7.0, "s": map[string]any{"A": 1.0}}; !reflect.DeepEqual(st.Task.Metadata, want) {
			t.Errorf("metadata %v, want %v", st.Task.Metadata, want)
		}
	})

	t.Run("versions are revisions", func(t *testing.T) {
		t.Parallel()
		tasks := newTestTasks(t, TasksConfig{})
		v1, err := tasks.Create(ctx, &a2a.Task{ID: "v1", ContextID: "c"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tasks.Create(ctx, &a2a.Task{ID: "v2", ContextID: "c"}); err != nil {
			t.Fatal(err)
		}
		v1b, err := tasks.Update(ctx, &taskstore.UpdateRequest{Task: &a2a.Task{ID: "v1", ContextID: "c"}, PrevVersion: v1})
		if err != nil {
			t.Fatal(err)
		}
		// Revisions count every write to the bucket (tasks and index
		// entries), so a task's versions increase but skip.
		if !v1b.After(v1) || v1b == v1+1 {
			t.Errorf("versions of v1: %d then %d, want increasing with a gap", v1, v1b)
		}
	})
}

// nan is a float JSON cannot encode.
func nan() float64 {
	zero := 0.0
	return zero / zero
}

// TestTasks_BlindUpdate shows what an Update naming no version does: it
// replaces the task like InMemory, but never brings back a task that is
// gone and never writes over a change made meanwhile without having read
// it.
func TestTasks_BlindUpdate(t *testing.T) {
	t.Parallel()
	tasks := newTestTasks(t, TasksConfig{})
	ctx := tasksAs(t.Context(), "alice")
	task := &a2a.Task{ID: "blind", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	v1, err := tasks.Create(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	task.Metadata = map[string]any{"n": 1.0}
	v2, err := tasks.Update(ctx, &taskstore.UpdateRequest{Task: task})
	if err != nil || !v2.After(v1) {
		t.Fatalf("blind update: version %d after %d, err %v", v2, v1, err)
	}
	// Concurrent blind writers all land, one after another: none is lost
	// to a conflict it could not see.
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Go(func() {
			mine := &a2a.Task{ID: "blind", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}, Metadata: map[string]any{"n": float64(i)}}
			_, err := tasks.Update(ctx, &taskstore.UpdateRequest{Task: mine})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, taskstore.ErrConcurrentModification) {
			t.Errorf("blind concurrent update: %v", err)
		}
	}
	if _, err := tasks.Update(ctx, &taskstore.UpdateRequest{Task: &a2a.Task{ID: "never-created", ContextID: "c"}}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("blind update of a missing task: %v, want ErrTaskNotFound (a KV update at revision 0 would create it)", err)
	}
	if _, err := tasks.Get(ctx, "never-created"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("blind update created a task: %v", err)
	}
}

// TestTasks_UpdatesWithoutReadingWhileRemembered checks that updates of
// tasks taking turns, as the events of many running tasks do, swap
// without reading the task first while the store remembers every one,
// however many tasks end in between, and read first past Hints, when the
// least recently written is always the one forgotten.
func TestTasks_UpdatesWithoutReadingWhileRemembered(t *testing.T) {
	t.Parallel()
	const hints, rounds = 32, 3
	cases := []struct {
		name  string
		n     int // running tasks updated in turn
		ended int // tasks that end between two rounds
	}{
		{name: "remembered", n: hints - 4},
		{name: "remembered while more end", n: hints - 4, ended: 2 * hints},
		{name: "more than remembered", n: hints + 8},
	}
	sent := map[string]float64{} // messages per update
	for _, tc := range cases {
		js := natstest.JetStream(t, natstest.Server(t, ""))
		tasks, err := NewTasks(t.Context(), js, TasksConfig{Hints: hints})
		if err != nil {
			t.Fatal(err)
		}
		ctx := tasksAs(t.Context(), "alice")
		create := func(id string, state a2a.TaskState) (*a2a.Task, taskstore.TaskVersion) {
			t.Helper()
			task := &a2a.Task{ID: a2a.TaskID(id), ContextID: "c", Status: a2a.TaskStatus{State: state}}
			v, err := tasks.Create(ctx, task)
			if err != nil {
				t.Fatal(err)
			}
			return task, v
		}
		all := make([]*a2a.Task, tc.n)
		versions := make([]taskstore.TaskVersion, tc.n)
		for i := range all {
			all[i], versions[i] = create(fmt.Sprintf("t%d", i), a2a.TaskStateWorking)
		}
		var out uint64
		for r := range rounds {
			before := js.Conn().Stats().OutMsgs
			for i, task := range all {
				task.Metadata = map[string]any{"round": float64(r)}
				if versions[i], err = tasks.Update(ctx, &taskstore.UpdateRequest{Task: task, PrevVersion: versions[i]}); err != nil {
					t.Fatalf("update %s: %v", task.ID, err)
				}
			}
			out += js.Conn().Stats().OutMsgs - before
			for i := range tc.ended {
				create(fmt.Sprintf("e%d-%d", r, i), a2a.TaskStateCompleted)
			}
		}
		sent[tc.name] = float64(out) / float64(rounds*tc.n)
		t.Logf("%s: %d tasks, %d remembered: %.2f messages sent per update", tc.name, tc.n, hints, sent[tc.name])
	}
	remembered := sent["remembered"]
	if got := sent["remembered while more end"]; got > remembered+0.1 {
		t.Errorf("%.2f messages per update while tasks end, %.2f otherwise: the ended ones pushed running ones out", got, remembered)
	}
	if forgotten := sent["more than remembered"]; forgotten < remembered+0.9 {
		t.Errorf("%.2f messages per update remembered, %.2f forgotten: want one more (the read) when forgotten", remembered, forgotten)
	}
}

// TestTasks_ConcurrentUpdates has several writers race on one version of
// a task, round after round, both through the plain swap and through the
// TTL-carrying publish of ended states: exactly one wins each round, and
// the others get ErrConcurrentModification.
func TestTasks_ConcurrentUpdates(t *testing.T) {
	t.Parallel()
	tasks := newTestTasks(t, TasksConfig{})
	ctx := tasksAs(t.Context(), "alice")
	if _, err := tasks.Create(ctx, &a2a.Task{ID: "race", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
		t.Fatal(err)
	}
	const writers, rounds = 6, 8
	for round := range rounds {
		st, err := tasks.Get(ctx, "race")
		if err != nil {
			t.Fatal(err)
		}
		state := a2a.TaskStateWorking
		if round%2 == 1 {
			state = a2a.TaskStateCompleted
		}
		type outcome struct {
			writer  int
			version taskstore.TaskVersion
			err     error
		}
		start := make(chan struct{})
		out := make(chan outcome, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				task := &a2a.Task{ID: "race", ContextID: "c", Status: a2a.TaskStatus{State: state},
					Metadata: map[string]any{"writer": float64(w), "round": float64(round)}}
				<-start
				v, err := tasks.Update(ctx, &taskstore.UpdateRequest{Task: task, PrevTask: st.Task, PrevVersion: st.Version})
				out <- outcome{w, v, err}
			})
		}
		close(start)
		wg.Wait()
		close(out)
		var won []outcome
		for o := range out {
			switch {
			case o.err == nil:
				won = append(won, o)
			case !errors.Is(o.err, taskstore.ErrConcurrentModification):
				t.Errorf("round %d writer %d: %v, want ErrConcurrentModification", round, o.writer, o.err)
			}
		}
		if len(won) != 1 {
			t.Fatalf("round %d: %d writers won version %d, want exactly 1", round, len(won), st.Version)
		}
		now, err := tasks.Get(ctx, "race")
		if err != nil {
			t.Fatal(err)
		}
		if now.Version != won[0].version || now.Task.Metadata["writer"] != float64(won[0].writer) || now.Task.Status.State != state {
			t.Fatalf("round %d: stored version %d by writer %v, want %d by %d", round, now.Version, now.Task.Metadata["writer"], won[0].version, won[0].writer)
		}
	}
}

// TestTasks_Retention writes ended tasks with a 2 s retention: they are
// gone within a few seconds, index entries too, while a working task
// stays; the id of an expired task can be used again.
func TestTasks_Retention(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 2 s retention")
	}
	t.Parallel()
	tasks := newTestTasks(t, TasksConfig{Retention: 2 * time.Second})
	ctx := tasksAs(t.Context(), "alice")
	started := time.Now()
	if _, err := tasks.Create(ctx, &a2a.Task{ID: "born-ended", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}); err != nil {
		t.Fatal(err)
	}
	v, err := tasks.Create(ctx, &a2a.Task{ID: "ends", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.Update(ctx, &taskstore.UpdateRequest{Task: &a2a.Task{ID: "ends", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateCanceled}}, PrevVersion: v}); err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.Create(ctx, &a2a.Task{ID: "works", ContextID: "c", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []a2a.TaskID{"born-ended", "ends"} {
		if _, err := tasks.Get(ctx, id); err != nil {
			t.Fatalf("ended task %s is not readable right after its write: %v", id, err)
		}
	}

	testwait.Until(t, 10*time.Second, "ended tasks expiring (retention 2s)", func() bool {
		_, err1 := tasks.Get(ctx, "born-ended")
		_, err2 := tasks.Get(ctx, "ends")
		if err1 != nil && !errors.Is(err1, a2a.ErrTaskNotFound) || err2 != nil && !errors.Is(err2, a2a.ErrTaskNotFound) {
			t.Fatalf("Get while waiting for expiry: %v, %v", err1, err2)
		}
		return errors.Is(err1, a2a.ErrTaskNotFound) && errors.Is(err2, a2a.ErrTaskNotFound)
	})
	goneAfter := time.Since(started)
	if goneAfter < 1500*time.Millisecond {
		t.Errorf("ended tasks gone after %s, before their 2s retention", goneAfter)
	}
	t.Logf("ended tasks gone %s after their write (retention 2s)", goneAfter)
	if _, err := tasks.Get(ctx, "works"); err != nil {
		t.Errorf("working task expired: %v", err)
	}
	testwait.Succeeds(t, 10*time.Second, "index entries of expired tasks swept", func() error {
		resp, err := tasks.List(ctx, &a2a.ListTasksRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if resp.TotalSize != 1 || len(resp.Tasks) != 1 || resp.Tasks[0].ID != "works" {
			return fmt.Errorf("listed: total %d, %d tasks", resp.TotalSize, len(resp.Tasks))
		}
		return nil
	})
	if _, err := tasks.Create(ctx, &a2a.Task{ID: "ends", ContextID: "c2", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}); err != nil {
		t.Errorf("Create on an expired task's id: %v", err)
	}
}

// TestTasks_ListBound lists a user owning more tasks than MaxListEntries:
// List refuses with ErrTooManyTasks instead of answering a page that may
// miss the newest; other users are unaffected.
func TestTasks_ListBound(t *testing.T) {
	t.Parallel()
	tasks := newTestTasks(t, TasksConfig{MaxListEntries: 3})
	alice, bob := tasksAs(t.Context(), "alice"), tasksAs(t.Context(), "bob")
	for i := range 3 {
		if _, err := tasks.Create(alice, &a2a.Task{ID: a2a.TaskID(fmt.Sprint("a", i)), ContextID: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tasks.Create(bob, &a2a.Task{ID: "b", ContextID: "c"}); err != nil {
		t.Fatal(err)
	}
	if resp, err := tasks.List(alice, &a2a.ListTasksRequest{}); err != nil || resp.TotalSize != 3 {
		t.Fatalf("List at the bound: %v, %+v", err, resp)
	}
	if _, err := tasks.Create(alice, &a2a.Task{ID: "a3", ContextID: "c"}); err != nil {
		t.Fatal(err)
	}
	if _, err := tasks.List(alice, &a2a.ListTasksRequest{}); !errors.Is(err, ErrTooManyTasks) {
		t.Errorf("List over the bound: %v, want ErrTooManyTasks", err)
	}
	if resp, err := tasks.List(bob, &a2a.ListTasksRequest{}); err != nil || resp.TotalSize != 1 {
		t.Errorf("List of another user: %v, %+v", err, resp)
	}
}

// TestTasks_ListRepairsIndex removes a task behind the store's back, as an
// index write lost after its task expired would leave it: List skips the
// entry and removes it.
func TestTasks_ListRepairsIndex(t *testing.T) {
	t.Parallel()
	tasks := newTestTasks(t, TasksConfig{})
	ctx := tasksAs(t.Context(), "alice")
	for _, id := range []a2a.TaskID{"keep", "lost"} {
		if _, err := tasks.Create(ctx, &a2a.Task{ID: id, ContextID: "c"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := tasks.kv.Purge(t.Context(), "t.lost"); err != nil {
		t.Fatal(err)
	}
	resp, err := tasks.List(ctx, &a2a.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Tasks) != 1 || resp.Tasks[0].ID != "keep" {
		t.Errorf("listed %s", tasksJSON(resp.Tasks))
	}
	resp, err = tasks.List(ctx, &a2a.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.TotalSize != 1 {
		t.Errorf("the dangling entry was not removed: total %d", resp.TotalSize)
	}
}

// TestTasks_Unreachable stops the server under the store: every operation
// fails within the store's timeout with delegation.ErrUnavailable (a
// versioned update once its ride-out is over too), and no error shows
// the user's name or the task's content.
func TestTasks_Unreachable(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out timeouts of a stopped server")
	}
	t.Parallel()
	s := natstest.Server(t, "")
	tasks, err := NewTasks(t.Context(), natstest.JetStream(t, s), TasksConfig{Timeout: 500 * time.Millisecond, RideOut: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := tasksAs(t.Context(), "secret-user")
	task := &a2a.Task{ID: "t", ContextID: "c", Metadata: map[string]any{"token": "secret-content"}}
	v, err := tasks.Create(ctx, task)
	if err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	ops := map[string]func() error{
		"create": func() error {
			_, err := tasks.Create(ctx, &a2a.Task{ID: "t2", ContextID: "c", Metadata: task.Metadata})
			return err
		},
		"update": func() error {
			_, err := tasks.Update(ctx, &taskstore.UpdateRequest{Task: task, PrevVersion: v})
			return err
		},
		"get":  func() error { _, err := tasks.Get(ctx, "t"); return err },
		"list": func() error { _, err := tasks.List(ctx, &a2a.ListTasksRequest{}); return err },
	}
	for name, op := range ops {
		began := time.Now()
		err := op()
		if took := time.Since(began); took > 4*time.Second {
			t.Errorf("%s took %s with the store down", name, took)
		}
		if !errors.Is(err, delegation.ErrUnavailable) {
			t.Errorf("%s with the store down: %v, want ErrUnavailable", name, err)
			continue
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("%s error shows a user or content: %v", name, err)
		}
	}
}

// TestNewTasks_Config refuses configurations the store cannot honour.
func TestNewTasks_Config(t *testing.T) {
	t.Parallel()
	js := natstest.JetStream(t, natstest.Server(t, ""))
	payload := int(js.Conn().MaxPayload())
	cases := []struct {
		name string
		cfg  TasksConfig
		want string
	}{
		{name: "replicas", cfg: TasksConfig{Replicas: 6}, want: "replicas 6"},
		{name: "sub-second retention", cfg: TasksConfig{Retention: 500 * time.Millisecond}, want: "at least 1s"},
		{name: "task bigger than a message", cfg: TasksConfig{MaxTaskBytes: payload}, want: "max_payload"},
		{name: "negative list bound", cfg: TasksConfig{MaxListEntries: -1}, want: "max list entries"},
		{name: "negative timeout", cfg: TasksConfig{Timeout: -time.Second}, want: "timeout"},
		{name: "negative hints", cfg: TasksConfig{Hints: -1}, want: "hints -1"},
		{name: "too many hints", cfg: TasksConfig{Hints: MaxHints + 1}, want: "hints"},
	}
	for _, tc := range cases {
		if _, err := NewTasks(t.Context(), js, tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: NewTasks returned %v, want an error about %q", tc.name, err, tc.want)
		}
	}
	tasks, err := NewTasks(t.Context(), js, TasksConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if want := min(DefaultMaxTaskBytes, payload-taskPayloadHeadroom); tasks.cfg.MaxTaskBytes != want {
		t.Errorf("default MaxTaskBytes %d with max_payload %d, want %d", tasks.cfg.MaxTaskBytes, payload, want)
	}
	st, err := tasks.kv.Status(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	type bucket struct {
		Name      string
		History   int64
		MarkerTTL time.Duration
	}
	got := bucket{st.Bucket(), st.History(), st.LimitMarkerTTL()}
	if diff := cmp.Diff(bucket{DefaultTasksBucket, 1, taskMarkerTTL}, got); diff != "" {
		t.Errorf("bucket (-want +got):\n%s", diff)
	}
}

// TestTaskToken keys ids that a subject cannot hold apart from ids it can.
func TestTaskToken(t *testing.T) {
	t.Parallel()
	cases := []struct {
		id   a2a.TaskID
		want string
	}{
		{id: "0b4f6c1e-8d7a-4c1b-9a55-2f3e8d9c0a11", want: "0b4f6c1e-8d7a-4c1b-9a55-2f3e8d9c0a11"},
		{id: "with_underscore", want: "with_underscore"},
		{id: "a.b", want: "=YS5i"},
		{id: "=YS5i", want: "=PVlTNWk"},
		{id: "*", want: "=Kg"},
		{id: ">", want: "=Pg"},
		{id: "sp ace", want: "=c3AgYWNl"},
	}
	for _, tc := range cases {
		got, err := taskToken(tc.id)
		if err != nil || got != tc.want {
			t.Errorf("taskToken(%q) = %q, %v; want %q", tc.id, got, err, tc.want)
		}
	}
}

// tasksAgent is an A2A agent whose every task goes WORKING, gets an
// artifact and COMPLETES; a message saying "hold" waits at WORKING until
// released or cancelled, or until the test ends (stop).
type tasksAgent struct {
	release chan struct{}
	// stop cancels held tasks: a2a-go runs executions on contexts of
	// their own, which closing the HTTP server does not end.
	stop <-chan struct{}
}

func (a *tasksAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		task := &a2a.Task{ID: ec.TaskID, ContextID: ec.ContextID, History: []*a2a.Message{ec.Message},
			Status:   a2a.TaskStatus{State: a2a.TaskStateWorking},
			Metadata: map[string]any{"agent": map[string]any{"levels": []any{1.0, map[string]any{"deep": "yes"}}}}}
		if ec.StoredTask != nil {
			task = ec.StoredTask
			task.Status = a2a.TaskStatus{State: a2a.TaskStateWorking}
		}
		if !yield(task, nil) {
			return
		}
		if ec.Message.Parts[0].Text() == "hold" {
			select {
			case <-a.release:
			case <-ctx.Done():
				return
			case <-a.stop:
				// a2a-go ends an execution at its final event, not when
				// the executor returns.
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
				return
			}
		}
		if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("result of "+string(ec.TaskID))), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (a *tasksAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// tasksAlice authenticates every A2A call as alice, as orchd's auth
// middleware would name a caller.
type tasksAlice struct {
	a2asrv.PassthroughCallInterceptor
}

func (tasksAlice) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	cc.User = a2asrv.NewAuthenticatedUser("alice", nil)
	return ctx, nil, nil
}

// tasksServe serves an a2a-go handler storing in tasks over JSON-RPC on
// 127.0.0.1 and returns a client of it.
func tasksServe(t *testing.T, tasks *Tasks, agent *tasksAgent) *a2aclient.Client {
	t.Helper()
	agent.stop = t.Context().Done()
	h := a2asrv.NewHandler(agent, a2asrv.WithTaskStore(tasks), a2asrv.WithCallInterceptors(tasksAlice{}),
		a2asrv.WithLogger(slog.New(slog.DiscardHandler)))
	srv := httptest.NewServer(a2asrv.NewJSONRPCHandler(h))
	t.Cleanup(srv.Close)
	client, err := a2aclient.NewFromEndpoints(t.Context(), []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL, a2a.TransportProtocolJSONRPC)})
	if err != nil {
		t.Fatalf("A2A client: %v", err)
	}
	return client
}

// tasksSend sends text as a new message; hold returns once the task is
// stored WORKING.
func tasksSend(t *testing.T, client *a2aclient.Client, text string, hold bool) *a2a.Task {
	t.Helper()
	req := &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))}
	if hold {
		req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
	}
	res, err := client.SendMessage(t.Context(), req)
	if err != nil {
		t.Fatalf("SendMessage %q: %v", text, err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage %q returned %T, want a task", text, res)
	}
	return task
}

// TestTasks_A2AHandler serves a real a2a-go handler on the store: a task
// runs to COMPLETED with its artifact, a held one is followed by a
// subscription and another cancelled; after the NATS server restarts on
// its store, a new handler serves the same tasks, and a task left WORKING
// by the old process can be cancelled but not subscribed to.
func TestTasks_A2AHandler(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s1 := natstest.Server(t, dir)
	tasks1, err := NewTasks(t.Context(), natstest.JetStream(t, s1), TasksConfig{})
	if err != nil {
		t.Fatal(err)
	}
	agent1 := &tasksAgent{release: make(chan struct{})}
	client := tasksServe(t, tasks1, agent1)

	done := tasksSend(t, client, "hello", false)
	if done.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("sent task ended %s:\n%s", done.Status.State, tasksJSON(done))
	}
	if len(done.Artifacts) != 1 || done.Artifacts[0].Parts[0].Text() != "result of "+string(done.ID) {
		t.Fatalf("sent task's artifacts are not the one result:\n%s", tasksJSON(done))
	}
	gotDone, err := client.GetTask(t.Context(), &a2a.GetTaskRequest{ID: done.ID})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotDone, done) {
		t.Errorf("GetTask returned\n%s\nSendMessage returned\n%s", tasksJSON(gotDone), tasksJSON(done))
	}

	followed := tasksSend(t, client, "hold", true)
	var states []a2a.TaskState
	for ev, err := range client.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: followed.ID}) {
		if err != nil {
			t.Fatalf("SubscribeToTask: %v", err)
		}
		switch ev := ev.(type) {
		case *a2a.Task:
			states = append(states, ev.Status.State)
			close(agent1.release)
		case *a2a.TaskArtifactUpdateEvent:
			states = append(states, "artifact")
		case *a2a.TaskStatusUpdateEvent:
			states = append(states, ev.Status.State)
		}
	}
	if want := []a2a.TaskState{a2a.TaskStateWorking, "artifact", a2a.TaskStateCompleted}; !reflect.DeepEqual(states, want) {
		t.Errorf("subscription saw %v, want %v", states, want)
	}

	agent1.release = make(chan struct{}) // the next holds wait again
	canceled := tasksSend(t, client, "hold", true)
	task, err := client.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: canceled.ID})
	if err != nil || task.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask of a running task: %v, %+v", err, task)
	}
	if _, err := client.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: done.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
		t.Errorf("CancelTask of a completed task: %v, want ErrTaskNotCancelable", err)
	}
	orphan := tasksSend(t, client, "hold", true)
	before, err := client.GetTask(t.Context(), &a2a.GetTaskRequest{ID: followed.ID})
	if err != nil {
		t.Fatal(err)
	}

	// The old process dies with the orphan still running; the next one
	// starts on the same store.
	s1.Shutdown()
	s1.WaitForShutdown()
	s2 := natstest.Server(t, dir)
	tasks2, err := NewTasks(t.Context(), natstest.JetStream(t, s2), TasksConfig{})
	if err != nil {
		t.Fatal(err)
	}
	client2 := tasksServe(t, tasks2, &tasksAgent{release: make(chan struct{})})
	for _, want := range []*a2a.Task{done, before} {
		got, err := client2.GetTask(t.Context(), &a2a.GetTaskRequest{ID: want.ID})
		if err != nil {
			t.Fatalf("GetTask %s after the restart: %v", want.ID, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("after the restart GetTask returned\n%s\nwant\n%s", tasksJSON(got), tasksJSON(want))
		}
	}
	list, err := client2.ListTasks(t.Context(), &a2a.ListTasksRequest{})
	if err != nil || list.TotalSize != 4 {
		t.Fatalf("ListTasks after the restart: %v, %s", err, tasksJSON(list))
	}
	got, err := client2.GetTask(t.Context(), &a2a.GetTaskRequest{ID: orphan.ID})
	if err != nil || got.Status.State != a2a.TaskStateWorking {
		t.Fatalf("orphan after the restart: %v, %+v", err, got)
	}
	for _, err := range client2.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: orphan.ID}) {
		if !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("SubscribeToTask of the orphan: %v, want ErrTaskNotFound (no execution runs it)", err)
		}
		break
	}
	task, err = client2.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: orphan.ID})
	if err != nil || task.Status.State != a2a.TaskStateCanceled {
		t.Errorf("CancelTask of the orphan: %v, %+v", err, task)
	}
}

// tasksBenchTask is a task like one an agent answers after some turns: 20
// history messages and metadata keys×3 levels deep (keys top-level keys,
// each holding a 3-level map with a string, a number and a list).
func tasksBenchTask(id a2a.TaskID, keys int) *a2a.Task {
	meta := map[string]any{}
	for i := range keys {
		meta[fmt.Sprintf("ext-%03d", i)] = map[string]any{
			"l2": map[string]any{
				"l3":   map[string]any{"s": fmt.Sprintf("value %d", i), "n": float64(i), "list": []any{1.0, "two", true}},
				"note": "second level",
			},
			"seen": float64(i * 7),
		}
	}
	history := make([]*a2a.Message, 20)
	for i := range history {
		history[i] = &a2a.Message{ID: fmt.Sprintf("m%02d", i), Role: a2a.MessageRoleUser, ContextID: "bench", TaskID: id,
			Metadata: map[string]any{"turn": float64(i)},
			Parts:    a2a.ContentParts{a2a.NewTextPart(strings.Repeat("words of a turn ", 8))}}
	}
	return &a2a.Task{ID: id, ContextID: "bench", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}, History: history, Metadata: meta}
}

// tasksBenchStores are the stores the benchmarks compare.
func tasksBenchStores(b *testing.B) map[string]taskstore.Store {
	return map[string]taskstore.Store{
		"inmemory":  taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()}),
		"jetstream": newTestTasks(b, TasksConfig{}),
	}
}

// BenchmarkTaskStore compares Get and Update of a 20-message task with 50
// keys of 3-level metadata on Tasks (embedded JetStream, in-process
// connection, file storage) and a2a-go's InMemory (gob copies).
func BenchmarkTaskStore(b *testing.B) {
	for _, name := range []string{"inmemory", "jetstream"} {
		s := tasksBenchStores(b)[name]
		ctx := tasksAs(b.Context(), "alice")
		task := tasksBenchTask("bench", 50)
		v, err := s.Create(ctx, task)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("store="+name+"/op=get", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Get(ctx, "bench"); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("store="+name+"/op=update", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if v, err = s.Update(ctx, &taskstore.UpdateRequest{Task: task, Event: task, PrevVersion: v}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkTaskStoreUpdateByMetadata runs Update with ever more nested
// metadata: the cost per update should grow with the metadata's size, not
// its square.
func BenchmarkTaskStoreUpdateByMetadata(b *testing.B) {
	for _, name := range []string{"inmemory", "jetstream"} {
		for _, keys := range []int{50, 200, 800} {
			b.Run(fmt.Sprintf("store=%s/keys=%d", name, keys), func(b *testing.B) {
				s := tasksBenchStores(b)[name]
				ctx := tasksAs(b.Context(), "alice")
				task := tasksBenchTask("bench", keys)
				v, err := s.Create(ctx, task)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if v, err = s.Update(ctx, &taskstore.UpdateRequest{Task: task, PrevVersion: v}); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// TestTasks_UpdateCostLinear checks that an Update's work grows linearly
// with its metadata: 16 times the keys may cost at most 32 times the
// allocations (a quadratic cost would be 256 times).
func TestTasks_UpdateCostLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("measures allocations over many updates")
	}
	tasks := newTestTasks(t, TasksConfig{})
	ctx := tasksAs(t.Context(), "alice")
	allocs := func(keys int) float64 {
		id := a2a.TaskID(fmt.Sprint("linear-", keys))
		task := tasksBenchTask(id, keys)
		v, err := tasks.Create(ctx, task)
		if err != nil {
			t.Fatal(err)
		}
		return testing.AllocsPerRun(20, func() {
			if v, err = tasks.Update(ctx, &taskstore.UpdateRequest{Task: task, PrevVersion: v}); err != nil {
				t.Fatal(err)
			}
		})
	}
	small, large := allocs(50), allocs(800)
	t.Logf("allocations per Update: %.0f with 50 keys, %.0f with 800", small, large)
	if large > 32*small {
		t.Errorf("16× the metadata took %.1f× the allocations", large/small)
	}
}

// tasksBenchAgent answers every message with a task of 20 history
// messages and 50 keys of nested metadata, an artifact, then COMPLETED.
type tasksBenchAgent struct{}

func (tasksBenchAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		task := tasksBenchTask(ec.TaskID, 50)
		task.ContextID = ec.ContextID
		if !yield(task, nil) || !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("result")), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
	}
}

func (tasksBenchAgent) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {}
}

// BenchmarkTaskStoreHandler sends messages through a2a-go's handler (no
// transport) to an agent answering with a large task, on each store: the
// rate one orchd hop can serve. a2a-go's own event processing still
// copies the task with gob on every event, whichever store is used.
func BenchmarkTaskStoreHandler(b *testing.B) {
	for _, name := range []string{"inmemory", "jetstream"} {
		b.Run("store="+name, func(b *testing.B) {
			h := a2asrv.NewHandler(tasksBenchAgent{}, a2asrv.WithTaskStore(tasksBenchStores(b)[name]),
				a2asrv.WithLogger(slog.New(slog.DiscardHandler)))
			ctx := tasksAs(b.Context(), "alice")
			b.ReportAllocs()
			for b.Loop() {
				res, err := h.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go"))})
				if err != nil {
					b.Fatal(err)
				}
				if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateCompleted {
					b.Fatalf("SendMessage returned %v", res)
				}
			}
		})
	}
}

// TestTasks_LegacyUsers reads a task stored before user names were marked
// (testdata/tasks/record-v1-unmarked.txt, user "alice", with its index
// entry as that version wrote it): it belongs to LegacyUser("alice"), not
// to a caller named "alice" today, and a write by its owner marks it.
func TestTasks_LegacyUsers(t *testing.T) {
	t.Parallel()
	old, err := os.ReadFile(filepath.Join("testdata", "tasks", "record-v1-unmarked.txt"))
	if err != nil {
		t.Fatal(err)
	}
	legacy := func(u string) string { return "legacy:" + u }
	for _, tc := range []struct {
		name       string
		legacyUser func(string) string
		owner      string
	}{
		{"mapped", legacy, "legacy:alice"},
		{"kept as stored", nil, "alice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tasks := newTestTasks(t, TasksConfig{LegacyUser: tc.legacyUser})
			if _, err := tasks.kv.Put(t.Context(), "t.golden", old); err != nil {
				t.Fatal(err)
			}
			entry := []byte(`{"id":"golden","contextId":"ctx-rich","state":"TASK_STATE_WORKING","updated":"2026-03-01T12:00:00Z","user":"alice"}`)
			if _, err := tasks.kv.Put(t.Context(), "u."+userToken("alice")+".golden", entry); err != nil {
				t.Fatal(err)
			}
			alice, owner := tasksAs(t.Context(), "alice"), tasksAs(t.Context(), tc.owner)
			got, err := tasks.Get(owner, "golden")
			if err != nil {
				t.Fatalf("Get as %q: %v", tc.owner, err)
			}
			if got.User != tc.owner || got.Task.ID != "golden" {
				t.Fatalf("Get as %q = task %s of %q, want golden of %q", tc.owner, got.Task.ID, got.User, tc.owner)
			}
			if tc.owner == "alice" {
				return // nothing is mapped: the stored name owns it
			}
			if got, err := tasks.Get(alice, "golden"); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("Get as alice = %+v, %v; want task not found", got, err)
			}
			if list, err := tasks.List(alice, &a2a.ListTasksRequest{}); err != nil || len(list.Tasks) != 0 || list.TotalSize != 0 {
				t.Errorf("List as alice = %s, %v; want none", tasksJSON(list), err)
			}
			upd := got.Task
			upd.Status.State = a2a.TaskStateCompleted
			if _, err := tasks.Update(alice, &taskstore.UpdateRequest{Task: upd, PrevVersion: got.Version}); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("Update as alice = %v; want task not found", err)
			}
			if _, err := tasks.Update(owner, &taskstore.UpdateRequest{Task: upd, PrevVersion: got.Version}); err != nil {
				t.Fatalf("Update as its owner: %v", err)
			}
			stored, err := tasks.kv.Get(t.Context(), "t.golden")
			if err != nil {
				t.Fatal(err)
			}
			hdr, _, err := splitTaskRecord(stored.Value())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(taskHeader{V: 1, User: tc.owner, Users: taskUsersMarked}, hdr, cmpopts.IgnoreFields(taskHeader{}, "Updated")); diff != "" {
				t.Errorf("header after the owner's write (-want +got):\n%s", diff)
			}
			if got, err := tasks.Get(owner, "golden"); err != nil || got.Task.Status.State != a2a.TaskStateCompleted {
				t.Errorf("Get as its owner after the write = %+v, %v", got, err)
			}
			if _, err := tasks.Get(alice, "golden"); !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("Get as alice after the write = %v; want task not found", err)
			}
			// Tasks stored now are marked: alice owns hers.
			if _, err := tasks.Create(alice, &a2a.Task{ID: "new", ContextID: "c"}); err != nil {
				t.Fatal(err)
			}
			list, err := tasks.List(alice, &a2a.ListTasksRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if len(list.Tasks) != 1 || list.Tasks[0].ID != "new" || list.TotalSize != 1 {
				t.Errorf("List as alice = %s; want only her new task", tasksJSON(list))
			}
		})
	}
}

// TestTasks_UpdateRidesOutAnOutage updates a task while the NATS server
// is down for longer than a store call's timeout, as a2a-go does for each
// event of an execution: the update waits for the server and goes
// through. And an update whose first try was kept but whose
// acknowledgement was lost, tried again over the version it named, finds
// its own value stored and succeeds.
func TestTasks_UpdateRidesOutAnOutage(t *testing.T) {
	t.Parallel()
	node := natstest.NewNode(t)
	js := node.JetStream(t)
	clock := func() time.Time { return tasksStart }
	tasks, err := NewTasks(t.Context(), js, TasksConfig{Timeout: 500 * time.Millisecond, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := tasksAs(t.Context(), "alice")
	task := &a2a.Task{ID: a2a.NewTaskID(), ContextID: "ctx", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	v1, err := tasks.Create(ctx, task)
	if err != nil {
		t.Fatal(err)
	}

	node.Stop()
	go func() {
		time.Sleep(2 * time.Second)
		node.Start()
	}()
	next := *task
	next.Artifacts = []*a2a.Artifact{{ID: "a1", Parts: a2a.ContentParts{a2a.NewTextPart("made while the store was down")}}}
	v2, err := tasks.Update(ctx, &taskstore.UpdateRequest{Task: &next, PrevTask: task, PrevVersion: v1})
	if err != nil {
		t.Fatalf("an update across a 2 s outage: %v", err)
	}
	if st, err := tasks.Get(ctx, task.ID); err != nil || st.Version != v2 || len(st.Task.Artifacts) != 1 {
		t.Fatalf("after the outage the task is %s at %v (%v); want the update, at %v", tasksJSON(st), st.Version, err, v2)
	}

	// The first try of the next update was kept; its acknowledgement
	// was lost.
	last := next
	last.Status = a2a.TaskStatus{State: a2a.TaskStateInputRequired}
	value, err := tasks.encode("alice", clock(), &last)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := taskToken(task.ID)
	if err != nil {
		t.Fatal(err)
	}
	kept, err := tasks.kv.Update(t.Context(), "t."+tok, value, uint64(v2))
	if err != nil {
		t.Fatal(err)
	}
	v3, err := tasks.Update(ctx, &taskstore.UpdateRequest{Task: &last, PrevTask: &next, PrevVersion: v2})
	if err != nil || uint64(v3) != kept {
		t.Errorf("an update tried again after its first try was kept: %v, %v; want the kept version %d", v3, err, kept)
	}
	// Another's value at that version is still a conflict.
	other := last
	other.Status = a2a.TaskStatus{State: a2a.TaskStateWorking}
	if _, err := tasks.Update(ctx, &taskstore.UpdateRequest{Task: &other, PrevTask: &next, PrevVersion: v2}); !errors.Is(err, taskstore.ErrConcurrentModification) {
		t.Errorf("an update over a version another update replaced: %v; want ErrConcurrentModification", err)
	}
}
