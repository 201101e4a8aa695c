package orchestrator

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/natstest"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
)

// TestFollow_RidesOutAStoreOutage follows a delegation by server-sent
// events on a replica that does not own it, so every read of its log
// goes to the store, while the NATS server the two replicas share is down
// for longer than a store call's timeout: the stream stays open and brings
// every event once, in order, to COMPLETED, and the replica logs the
// outage in two lines, not a line per failed read.
func TestFollow_RidesOutAStoreOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server and two daemons")
	}
	t.Parallel()
	nats := natstest.NewNode(t)
	release := make(chan struct{})
	agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work", Streaming: true}, gatedWork(release))
	// A store call gives up after 1 s, well within the outage.
	extra := fmt.Sprintf("store:\n  url: %q\n  timeout: 1s\n", nats.URL())
	owner := childDaemon(t, t.TempDir(), extra)
	follower := childDaemon(t, t.TempDir(), extra)
	if code := call(t, "POST", owner.base+"/v1/agents", `{"url":"`+agent.URL+`"}`, nil); code != 201 {
		t.Fatalf("add agent = %d", code)
	}
	var rec delegation.Record
	if code := call(t, "POST", owner.base+"/v1/delegations", `{"skill":"work","message":{"role":"ROLE_USER","parts":[{"text":"go"}]}}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	testwait.Until(t, 10*time.Second, "the delegation on the follower's replica", func() bool {
		return callNoFail(follower.base+"/v1/delegations/"+rec.ID, nil) == 200
	})

	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", follower.base+"/v1/delegations/"+rec.ID+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan delegation.Event)
	go func(body io.Reader) { // ends when the stream does
		defer close(events)
		sc := bufio.NewScanner(body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev delegation.Event
				if json.Unmarshal([]byte(data), &ev) != nil {
					continue
				}
				select {
				case events <- ev:
				case <-ctx.Done(): // the test gave up
					return
				}
			}
		}
	}(resp.Body)
	var seen []delegation.Event
	for ev := range events {
		seen = append(seen, ev)
		if ev.Kind == "artifact" {
			break
		}
	}
	if len(seen) == 0 || seen[len(seen)-1].Kind != "artifact" {
		t.Fatalf("the stream ended before the first artifact: %s", kinds(seen))
	}

	// The follower now waits for the next event, and looks at the log's
	// tail again within seconds: that look fails while the server is down.
	time.Sleep(200 * time.Millisecond)
	nats.Stop()
	time.Sleep(4 * time.Second)
	nats.Start()
	close(release)
	for ev := range events {
		seen = append(seen, ev)
	}
	for i, ev := range seen {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: %s", i, ev.Seq, kinds(seen))
		}
	}
	if last := seen[len(seen)-1]; last.State != a2a.TaskStateCompleted {
		t.Fatalf("the stream ended at %s, not at the delegation's end: %s", last.State, kinds(seen))
	}
	// The outage ends in the log once a second passed with no failed
	// read after a read that went through.
	testwait.Until(t, 10*time.Second, "the end of the outage in the follower's log", func() bool {
		return len(follower.logged("followers' reads of delegation events go through again")) > 0
	})
	if got := follower.logged("delegation events"); len(got) != 2 ||
		!strings.Contains(got[0], "read delegation events for a follower; it waits and reads again") ||
		!strings.Contains(got[1], "followers' reads of delegation events go through again") {
		t.Errorf("the follower's replica logged, of the reads of delegation events:\n%s\nwant the outage's start and end", strings.Join(got, "\n"))
	}
}

// streamThroughOrchd starts a NATS server, a daemon whose store is on it
// (its store section adds store), and a streaming agent that works
// gatedWork(release); it returns them with an A2A client of the daemon
// and a message for the agent's skill.
func streamThroughOrchd(t *testing.T, store string) (*natstest.Node, chan struct{}, *a2aclient.Client, *a2a.Message) {
	t.Helper()
	nats, release, d := orchdOnNode(t, store)
	return nats, release, testagent.Client(t, d.base), workMessage()
}

// orchdOnNode starts a daemon, in its own process, on a NATS node with
// store calls bounded by 1s and the extra store settings, and registers an
// agent that streams each task's first chunk and finishes once release is
// closed.
func orchdOnNode(t *testing.T, store string) (*natstest.Node, chan struct{}, *child) {
	t.Helper()
	nats := natstest.NewNode(t)
	release := make(chan struct{})
	agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work", Streaming: true}, gatedWork(release))
	d := childDaemon(t, t.TempDir(), fmt.Sprintf("store:\n  url: %q\n  timeout: 1s\n%s", nats.URL(), store))
	if code := call(t, "POST", d.base+"/v1/agents", `{"url":"`+agent.URL+`"}`, nil); code != 201 {
		t.Fatalf("add agent = %d", code)
	}
	return nats, release, d
}

// workMessage is a message for orchd's A2A interface naming the skill.
func workMessage() *a2a.Message {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go"))
	msg.Metadata = map[string]any{a2aserver.SkillMetadataKey: "work"}
	return msg
}

// TestA2AStream_RidesOutAStoreOutage streams a task through orchd over
// A2A while the NATS server behind orchd's task store is down for longer
// than a store call's timeout: a2a-go stores every event of the task as
// it passes, and the writes that fail meanwhile are tried again, so the
// stream goes on to the task's end and the stored task ends COMPLETED.
// Before, a2a-go took the failed write for the task's failure: the
// stream ended with an error and the stored task stayed WORKING for
// ever, while the delegation completed.
func TestA2AStream_RidesOutAStoreOutage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server and a daemon")
	}
	t.Parallel()
	nats, release, c, msg := streamThroughOrchd(t, "")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var seen []string
	var task a2a.TaskID
	stopped := false
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			t.Fatalf("the stream failed after %v: %v", seen, err)
		}
		task = ev.TaskInfo().TaskID
		switch ev := ev.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			seen = append(seen, testagent.Text(&a2a.Message{Parts: ev.Artifact.Parts}))
			if !stopped {
				// The task's next event comes while the server is down.
				stopped = true
				nats.Stop()
				close(release)
				time.Sleep(4 * time.Second)
				nats.Start()
			}
		case *a2a.TaskStatusUpdateEvent:
			seen = append(seen, string(ev.Status.State))
		}
	}
	want := []string{string(a2a.TaskStateWorking), "part one, ", "part two", string(a2a.TaskStateCompleted)}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Errorf("the stream's events (-want +got):\n%s", diff)
	}
	got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task})
	if err != nil || got.Status.State != a2a.TaskStateCompleted {
		t.Errorf("the stored task: %v, %v; want it COMPLETED", got, err)
	}
}

// TestA2AStream_OutlivesTheTaskRideOut streams a task through orchd over
// A2A while the NATS server is down for longer than store.taskRideOut:
// the task's event that cannot be stored ends the execution, and the
// caller's stream, with an error, but the task is not marked FAILED, and
// once the server is back orchd writes the rest of the delegation into
// it: the stored task ends COMPLETED with the whole artifact. Before,
// a2a-go marked the task FAILED (when the store came back in time for
// that write) or left it WORKING for ever, while the delegation completed.
func TestA2AStream_OutlivesTheTaskRideOut(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server and a daemon")
	}
	t.Parallel()
	nats, release, c, msg := streamThroughOrchd(t, "  taskRideOut: 1s\n")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var task a2a.TaskID
	back := make(chan struct{})
	var streamErr error
	for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			streamErr = err
			break
		}
		task = ev.TaskInfo().TaskID
		switch ev := ev.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			if task != "" && release != nil {
				// The rest of the work comes while the server is down,
				// for longer than the task's updates wait.
				nats.Stop()
				close(release)
				release = nil
				go func() {
					defer close(back)
					time.Sleep(5 * time.Second)
					nats.Start()
				}()
			}
		case *a2a.TaskStatusUpdateEvent:
			if ev.Status.State.Terminal() {
				t.Fatalf("the stream ended the task %s while the store was down; want an error", ev.Status.State)
			}
		}
	}
	if streamErr == nil {
		t.Fatal("the stream ended without an error while the store was down")
	}
	t.Logf("the stream ended: %v", streamErr)
	<-back
	var got *a2a.Task
	testwait.Until(t, 45*time.Second, "the stored task to end", func() bool {
		var err error
		got, err = c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task})
		return err == nil && got.Status.State.Terminal()
	})
	if got.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the stored task ended %s; want COMPLETED, as its delegation", got.Status.State)
	}
	// Its two chunks, as a2a-go appends them.
	if len(got.Artifacts) != 1 || testagent.Text(&a2a.Message{Parts: got.Artifacts[0].Parts}) != "part one,  part two" {
		b, _ := json.Marshal(got.Artifacts)
		t.Errorf("the stored task's artifacts: %s; want one, in two parts: \"part one, \", \"part two\"", b)
	}
}

// TestA2AStreams_AnOutageInAFewLines streams 20 tasks through orchd over
// A2A, and stops the NATS server for longer than their updates wait
// (taskRideOut) while their agent finishes them: every task is taken over
// and written again once the server is back, and the log says so in a few
// lines, where it took two lines a task, more on a2a-go's side.
func TestA2AStreams_AnOutageInAFewLines(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server and a daemon")
	}
	t.Parallel()
	const tasks = 20
	nats, release, d := orchdOnNode(t, "  taskRideOut: 1s\n")
	c := testagent.Client(t, d.base)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ids := make(chan a2a.TaskID, tasks)
	var wg sync.WaitGroup
	for range tasks {
		wg.Go(func() {
			sent := false
			for ev, err := range c.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: workMessage()}) {
				if err != nil {
					return // the outage ends the stream
				}
				if _, ok := ev.(*a2a.TaskArtifactUpdateEvent); ok && !sent {
					sent = true
					ids <- ev.TaskInfo().TaskID
				}
			}
		})
	}
	var all []a2a.TaskID
	for range tasks {
		select {
		case id := <-ids:
			all = append(all, id)
		case <-ctx.Done():
			t.Fatalf("%d of %d tasks streamed their first chunk", len(all), tasks)
		}
	}
	nats.Stop()
	close(release)
	time.Sleep(5 * time.Second)
	nats.Start()
	wg.Wait()
	for _, id := range all {
		testwait.Until(t, 45*time.Second, "task "+string(id)+" to end", func() bool {
			got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id})
			return err == nil && got.Status.State == a2a.TaskStateCompleted
		})
	}
	// The first task taken over, perhaps a count, and the writes going
	// through again (2 lines in the runs seen; a write failing again
	// just after the server is back would start a second outage): the
	// earlier code logged 60. a2a-go logs its own line a task.
	var lines []string
	for _, says := range []string{"the A2A task's execution ended before the task settled", "mirror a delegation into its A2A task", "A2A tasks' writes"} {
		lines = append(lines, d.logged(says)...)
	}
	if n := len(d.logged("A2A tasks' writes go through again")); n < 1 || n > 2 || len(lines) > 6 {
		t.Errorf("%d lines for %d tasks taken over, %d of them saying the writes go through again; want at most 6, 1 or 2 of them:\n%s", len(lines), tasks, n, strings.Join(lines, "\n"))
	}
}
