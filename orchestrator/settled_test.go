package orchestrator

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testcmp"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// taskWrites counts the writes to the A2A tasks bucket of the daemon's
// embedded store so far: each stored version of a task is two (the task
// and its owner's index entry).
func taskWrites(t *testing.T, d *Daemon) uint64 {
	t.Helper()
	return streamWrites(t, d, "KV_orchd-tasks")
}

// streamWrites counts the writes to a stream of the daemon's embedded
// store so far.
func streamWrites(t *testing.T, d *Daemon, name string) uint64 {
	t.Helper()
	s, err := d.state.st.JetStream().Stream(t.Context(), name)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.LastSeq
}

// embeddedDaemon runs a daemon on the embedded store in a new state
// directory, with agents registered, until the test ends.
func embeddedDaemon(t *testing.T, agents ...registry.Spec) *Daemon {
	t.Helper()
	cfg := loadDefaults(t)
	cfg.StateDir = t.TempDir()
	cfg.Store.Mode = StoreEmbedded
	cfg.Agents = agents
	return runDaemon(t, cfg)
}

// TestSettledTask_OneWriteSameTask sends blocking messages through orchd
// for work that ends at once: orchd answers with the finished task, stored
// with one write, and that task is the one a2a-go's task machinery makes
// from the same work (asked with returnImmediately, then read back), in
// the answer, in GetTask and in ListTasks. Work that outlasts the wait for
// a settled answer goes through the machinery and is answered alike: the
// slow agent's work ends only once the test releases it, after the
// machinery has stored the task, so it outlasts that wait however the
// machine schedules the daemon.
func TestSettledTask_OneWriteSameTask(t *testing.T) {
	if testing.Short() {
		t.Skip("takes ~2 s: several tasks through both a settled answer and a2a-go's task machinery")
	}
	t.Parallel()
	quick := testagent.Start(t, testagent.Options{Name: "Quick", Skill: "quick", Streaming: true}, testagent.Work(0))
	release := make(chan struct{}, 1)
	slow := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true}, gatedWork(release))
	d := embeddedDaemon(t, registry.Spec{ID: "quick", URL: quick.URL}, registry.Spec{ID: "slow", URL: slow.URL})
	c := testagent.Client(t, "http://"+d.Addr().String())

	send := func(skill string, conf *a2a.SendMessageConfig) *a2a.Task {
		t.Helper()
		msg := userMessage(a2a.NewMessageID(), "survey")
		msg.Metadata = map[string]any{a2aserver.SkillMetadataKey: skill}
		res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg, Config: conf})
		if err != nil {
			t.Fatal(err)
		}
		task, ok := res.(*a2a.Task)
		if !ok {
			t.Fatalf("SendMessage = %T, want a Task", res)
		}
		if task.History[0].ID != msg.ID {
			t.Errorf("the task's first message is %q, want the caller's %q", task.History[0].ID, msg.ID)
		}
		return task
	}
	// The machinery's task, read back once it ended.
	machinery := func(skill string) testagent.TaskShape {
		t.Helper()
		task := send(skill, &a2a.SendMessageConfig{ReturnImmediately: true})
		testwait.Succeeds(t, 10*time.Second, "task "+string(task.ID)+" ended", func() error {
			if task.Status.State.Terminal() {
				return nil
			}
			var err error
			if task, err = c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID}); err != nil {
				t.Fatal(err)
			}
			return fmt.Errorf("it is %s", task.Status.State)
		})
		return testagent.ShapeOf(task)
	}
	want := machinery("quick")
	if diff := cmp.Diff(testagent.TaskShape{State: a2a.TaskStateCompleted, Artifacts: []string{"part one, part two"}}, want,
		testcmp.Only[testagent.TaskShape]("State", "Artifacts")); diff != "" {
		t.Fatalf("the machinery's task (-want +got):\n%s", diff)
	}

	// Work(0) ends within milliseconds, but a loaded machine may take
	// longer than the wait for a settled answer now and then: one settled
	// answer in a few tries is enough.
	settled := false
	for try := 0; try < 5 && !settled; try++ {
		before := taskWrites(t, d)
		task := send("quick", nil)
		writes := taskWrites(t, d) - before
		settled = writes == 2
		if got := testagent.ShapeOf(task); !equalShape(got, want) {
			t.Fatalf("answer (%d writes) = %+v\nwant %+v", writes, got, want)
		}
		stored, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
		if err != nil {
			t.Fatal(err)
		}
		if got := testagent.ShapeOf(stored); !equalShape(got, want) {
			t.Fatalf("GetTask = %+v\nwant %+v", got, want)
		}
		if !listed(t, c, task.ID) {
			t.Errorf("ListTasks does not list task %s", task.ID)
		}
		rec, err := d.delegations.Lookup(t.Context(), delegationOf(t, task))
		if err != nil {
			t.Errorf("the delegation's record: %v", err)
		} else if rec.Upstream == nil || rec.Upstream.TaskID != task.ID {
			t.Errorf("the delegation's record does not name task %s: upstream %+v", task.ID, rec.Upstream)
		}
	}
	if !settled {
		t.Error("no blocking send was answered with one write of its task")
	}

	release <- struct{}{} // the machinery's own task of the slow work ends at once
	wantSlow := machinery("slow")
	before := taskWrites(t, d)
	type answer struct {
		res a2a.SendMessageResult
		err error
	}
	answered := make(chan answer, 1)
	msg := userMessage(a2a.NewMessageID(), "survey")
	msg.Metadata = map[string]any{a2aserver.SkillMetadataKey: "slow"}
	go func() {
		res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg})
		answered <- answer{res, err}
	}()
	// No settled answer stores the task before its work ends: a write
	// while the work waits is the machinery's, which took the message.
	testwait.Until(t, 10*time.Second, "the task machinery to store the slow work's task", func() bool { return taskWrites(t, d) > before })
	release <- struct{}{}
	var got answer
	select {
	case got = <-answered:
	case <-time.After(30 * time.Second):
		t.Fatal("no answer 30s after the slow work was released")
	}
	task, ok := got.res.(*a2a.Task)
	if got.err != nil || !ok {
		t.Fatalf("SendMessage = %T %v, want a Task", got.res, got.err)
	}
	if writes := taskWrites(t, d) - before; writes <= 2 {
		t.Errorf("work that outlasted the wait for a settled answer was stored with %d writes, want the machinery's several", writes)
	}
	if got := testagent.ShapeOf(task); !equalShape(got, wantSlow) {
		t.Errorf("slow answer = %+v\nwant %+v", got, wantSlow)
	}
}

func equalShape(a, b testagent.TaskShape) bool {
	return a.State == b.State && a.Status == b.Status && slices.Equal(a.History, b.History) &&
		slices.Equal(a.Artifacts, b.Artifacts) && slices.Equal(a.Metadata, b.Metadata)
}

// delegationOf is the delegation a task of orchd's names.
func delegationOf(t *testing.T, task *a2a.Task) string {
	t.Helper()
	id, ok := taskDelegation(task)
	if !ok {
		t.Fatalf("task %s names no delegation: %v", task.ID, task.Metadata)
	}
	return id
}

// listed reports whether ListTasks through c lists the task.
func listed(t *testing.T, c *a2aclient.Client, id a2a.TaskID) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	page, err := c.ListTasks(ctx, &a2a.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return slices.ContainsFunc(page.Tasks, func(task *a2a.Task) bool { return task.ID == id })
}

// doneAtOnce answers with the Task already COMPLETED, with its artifact.
func doneAtOnce(_ context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
	task := a2a.NewSubmittedTask(ec, ec.Message)
	task.Artifacts = []*a2a.Artifact{{ID: "result", Parts: a2a.ContentParts{a2a.NewTextPart("pong")}}}
	task.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done"))}
	yield(task, nil)
}

// TestSettledTask_StreamOfOneAnswer streams through orchd: work an agent
// ended with its first answer comes as that one Task, stored once, as the
// agent's own stream brings it; work an agent streams comes event by
// event, as it came.
func TestSettledTask_StreamOfOneAnswer(t *testing.T) {
	t.Parallel()
	once := testagent.Start(t, testagent.Options{Name: "Once", Skill: "once", Streaming: true}, doneAtOnce)
	steps := testagent.Start(t, testagent.Options{Name: "Steps", Skill: "steps", Streaming: true}, testagent.Work(0))
	d := embeddedDaemon(t, registry.Spec{ID: "once", URL: once.URL}, registry.Spec{ID: "steps", URL: steps.URL})
	c := testagent.Client(t, "http://"+d.Addr().String())
	stream := func(c *a2aclient.Client, skill string) []a2a.Event {
		t.Helper()
		msg := userMessage(a2a.NewMessageID(), "survey")
		msg.Metadata = map[string]any{a2aserver.SkillMetadataKey: skill}
		var evs []a2a.Event
		for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}) {
			if err != nil {
				t.Fatal(err)
			}
			evs = append(evs, ev)
		}
		return evs
	}

	direct := stream(testagent.Client(t, once.URL), "once")
	before := taskWrites(t, d)
	got := stream(c, "once")
	if writes := taskWrites(t, d) - before; writes != 2 {
		t.Errorf("the task was stored with %d writes, want 2 (one version)", writes)
	}
	if len(got) != 1 || len(direct) != 1 {
		t.Fatalf("stream through orchd = %d events, direct %d; want the one Task both", len(got), len(direct))
	}
	task, ok := got[0].(*a2a.Task)
	want := testagent.ShapeOf(direct[0].(*a2a.Task))
	want.Metadata = []string{delegation.ExtensionURI}
	if !ok || !equalShape(testagent.ShapeOf(task), want) {
		t.Fatalf("stream through orchd = %+v\nwant %+v", got[0], want)
	}
	if stored, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID}); err != nil || !equalShape(testagent.ShapeOf(stored), want) {
		t.Errorf("GetTask = %+v, %v\nwant %+v", stored, err, want)
	}

	if got := stream(c, "steps"); len(got) < 4 {
		t.Errorf("a streamed task came through orchd in %d events, want each of its steps", len(got))
	}
}

// settleQuickWrites waits until the records d's store queued after their
// answers (docs/state.md) are written: a listing of the store waits for
// them.
func settleQuickWrites(t *testing.T, d *Daemon) {
	t.Helper()
	if _, err := d.state.deleg.List(t.Context(), delegation.Query{PageSize: 1}); err != nil {
		t.Fatal(err)
	}
}

// TestDelegation_EndedAtOnceStoredOnce delegates through the HTTP API to an
// agent whose first answer is the Task already COMPLETED: the record is
// written once, ended, with the agent's artifact and final message.
func TestDelegation_EndedAtOnceStoredOnce(t *testing.T) {
	t.Parallel()
	once := testagent.Start(t, testagent.Options{Name: "Once", Skill: "once"}, doneAtOnce)
	d := embeddedDaemon(t, registry.Spec{ID: "once", URL: once.URL})
	base := "http://" + d.Addr().String()
	before := streamWrites(t, d, "KV_orchd-delegations")
	var rec delegation.Record
	if code := call(t, "POST", base+"/v1/delegations", `{"text": "survey", "skill": "once"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d %+v", code, rec)
	}
	settleQuickWrites(t, d)
	if writes := streamWrites(t, d, "KV_orchd-delegations") - before; writes != 1 {
		t.Errorf("the record was written %d times, want once", writes)
	}
	var stored delegation.Record
	if code := call(t, "GET", base+"/v1/delegations/"+rec.ID, "", &stored); code != 200 {
		t.Fatalf("GET = %d", code)
	}
	if diff := cmp.Diff(outcome{State: a2a.TaskStateCompleted, Artifacts: 1, Result: "done"}, outcomeOf(stored)); diff != "" {
		t.Errorf("stored record (-want +got):\n%s", diff)
	}
	evs, ended, err := d.delegations.Events(t.Context(), rec.ID, 0, 0)
	if err != nil {
		t.Fatalf("events: %v", err)
	}
	if !ended {
		t.Errorf("events %s have not ended", kinds(evs))
	}
	if lastEventState(evs) != a2a.TaskStateCompleted {
		t.Errorf("events %s, want COMPLETED last", kinds(evs))
	}

	// Over A2A the one write names orchd's task too: the caller's answer,
	// whether it waits for the work or asks for an immediate answer (the
	// work being over, that is the finished task too).
	for _, conf := range []*a2a.SendMessageConfig{nil, {ReturnImmediately: true}} {
		before = streamWrites(t, d, "KV_orchd-delegations")
		tasksBefore := taskWrites(t, d)
		msg := userMessage(a2a.NewMessageID(), "survey")
		msg.Metadata = map[string]any{a2aserver.SkillMetadataKey: "once"}
		res, err := testagent.Client(t, base).SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg, Config: conf})
		if err != nil {
			t.Fatal(err)
		}
		task, ok := res.(*a2a.Task)
		if !ok || task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("SendMessage (config %+v) = %+v, want a completed Task", conf, res)
		}
		settleQuickWrites(t, d)
		if writes := streamWrites(t, d, "KV_orchd-delegations") - before; writes != 1 {
			t.Errorf("over A2A (config %+v) the record was written %d times, want once", conf, writes)
		}
		if writes := taskWrites(t, d) - tasksBefore; writes != 2 {
			t.Errorf("over A2A (config %+v) the tasks bucket was written %d times, want a settled task's 2", conf, writes)
		}
		page, err := d.delegations.List(t.Context(), delegation.Query{PageSize: 1})
		if err != nil || len(page.Records) != 1 {
			t.Fatalf("List = %+v, %v", page, err)
		}
		want := &delegation.Upstream{TaskID: task.ID, ContextID: task.ContextID}
		if diff := cmp.Diff(want, page.Records[0].Upstream, testcmp.Only[delegation.Upstream]("TaskID", "ContextID")); diff != "" {
			t.Errorf("the record's upstream, want the task answered (-want +got):\n%s", diff)
		}
	}
}
