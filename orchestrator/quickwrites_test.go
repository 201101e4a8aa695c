package orchestrator

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// quickConfig is a daemon on the embedded store in dir, whose quick
// writes wait the longest lag, with the agents given.
func quickConfig(t *testing.T, dir string, agents ...registry.Spec) Config {
	t.Helper()
	cfg := loadDefaults(t)
	cfg.StateDir = dir
	cfg.Store.QuickWriteLag = "1s"
	cfg.Delegation.PollInterval = Duration(20 * time.Millisecond)
	cfg.Agents = agents
	return cfg
}

// storedRecord reads the record of id straight from the daemon's
// JetStream bucket, not through the store (whose reads wait for queued
// records): nil when it is not there.
func storedRecord(t *testing.T, d *Daemon, id string) *delegation.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	kv, err := d.state.st.JetStream().KeyValue(ctx, "orchd-delegations")
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, "d."+id)
	if err != nil {
		return nil
	}
	var r delegation.Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		t.Fatal(err)
	}
	return &r
}

// TestQuickWrites_ReadableAfterAnswer checks a delegation answered at
// once, whose record is queued when the caller has the answer, reads
// back through the API at once: listed (from the store), got, and with
// its events.
func TestQuickWrites_ReadableAfterAnswer(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Replier", Skill: "reply"}, testagent.Reply("hello"))
	base := startDaemon(t, quickConfig(t, t.TempDir(), registry.Spec{ID: "replier", URL: agent.URL}))
	for i := range 5 {
		var rec delegation.Record
		if code := call(t, "POST", base+"/v1/delegations", fmt.Sprintf(`{"text": "hi %d", "agent": "replier"}`, i), &rec); code != 201 || rec.State != a2a.TaskStateCompleted {
			t.Fatalf("POST /v1/delegations = %d %s, want 201 COMPLETED", code, rec.State)
		}
		var page struct {
			Delegations []delegation.Record `json:"delegations"`
		}
		if code := call(t, "GET", base+"/v1/delegations?pageSize=10", "", &page); code != 200 || !slices.Contains(recordIDs(page.Delegations), rec.ID) {
			t.Errorf("GET /v1/delegations right after the answer = %d, ids %v; want %s among them", code, recordIDs(page.Delegations), rec.ID)
		}
		var got delegation.Record
		if code := call(t, "GET", base+"/v1/delegations/"+rec.ID, "", &got); code != 200 || got.State != a2a.TaskStateCompleted ||
			got.Result == nil || testagent.Text(got.Result) != "hello" {
			t.Errorf("GET /v1/delegations/%s = %d %s %+v, want 200 COMPLETED hello", rec.ID, code, got.State, got.Result)
		}
		if evs := readEvents(t, base+"/v1/delegations/"+rec.ID+"/events", ""); len(evs) == 0 || lastEventState(evs) != a2a.TaskStateCompleted {
			t.Errorf("events of %s = %s, want them to end COMPLETED", rec.ID, kinds(evs))
		}
	}
}

// TestQuickWrites_StopWritesQueued checks a graceful stop writes the
// records of delegations answered at once that were still queued: a
// daemon started again on the state directory reads every one.
func TestQuickWrites_StopWritesQueued(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Replier", Skill: "reply"}, testagent.Reply("hello"))
	dir := t.TempDir()
	cfg := quickConfig(t, dir, registry.Spec{ID: "replier", URL: agent.URL})
	cfg.Listen = "127.0.0.1:0"
	d, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	testwait.Until(t, 10*time.Second, "the daemon binding its port", func() bool { return d.Addr() != nil })
	base := "http://" + d.Addr().String()
	var ids, queued []string
	for i := range 20 {
		var rec delegation.Record
		if code := call(t, "POST", base+"/v1/delegations", fmt.Sprintf(`{"text": "hi %d", "agent": "replier"}`, i), &rec); code != 201 {
			cancel()
			t.Fatalf("POST /v1/delegations = %d (Run: %v)", code, <-done)
		}
		ids = append(ids, rec.ID)
		if storedRecord(t, d, rec.ID) == nil {
			queued = append(queued, rec.ID)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if len(queued) == 0 {
		t.Fatal("every record was written before its answer: nothing was queued for the stop to write")
	}
	t.Logf("%d of %d records still queued at the stop", len(queued), len(ids))
	base = startDaemon(t, quickConfig(t, dir, registry.Spec{ID: "replier", URL: agent.URL}))
	for _, id := range ids {
		var got struct {
			State a2a.TaskState `json:"state"`
		}
		if code := call(t, "GET", base+"/v1/delegations/"+id, "", &got); code != 200 || got.State != a2a.TaskStateCompleted {
			t.Errorf("after the restart, GET /v1/delegations/%s = %d %s, want 200 COMPLETED", id, code, got.State)
		}
	}
}

// TestQuickWrites_RunningKeptBeforeAnswer checks work that goes on is
// acknowledged only once durable, the quick writes on: when the caller
// has the answer, the running record is in the store already.
func TestQuickWrites_RunningKeptBeforeAnswer(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Hanger", Skill: "hang"}, testagent.Hang())
	base := startDaemon(t, quickConfig(t, t.TempDir(), registry.Spec{ID: "hanger", URL: agent.URL}))
	d := nodeDaemon(base)
	for i := range 3 {
		var rec delegation.Record
		if code := call(t, "POST", base+"/v1/delegations", fmt.Sprintf(`{"text": "work %d", "agent": "hanger"}`, i), &rec); code != 201 {
			t.Fatalf("POST /v1/delegations = %d", code)
		}
		got := storedRecord(t, d, rec.ID)
		if got == nil || got.State.Terminal() {
			t.Fatalf("the answer came before the running record of %s was stored (stored: %+v)", rec.ID, got)
		}
		if code := call(t, "POST", base+"/v1/delegations/"+rec.ID+":cancel", "", nil); code != 200 {
			t.Errorf("cancel %s = %d", rec.ID, code)
		}
	}
}
