package orchestrator

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// Stopping a daemon ends its long-lived streams, an API event follower and
// the A2A stream of a task it mirrors for an upstream orchd, instead of
// waiting out the graceful-shutdown timeout on them.
func TestRun_StopsPromptlyWithStreamsOpen(t *testing.T) {
	t.Parallel()
	c := testagent.Start(t, testagent.Options{Name: "C", Skill: "research", Streaming: true}, testagent.Hang())
	cfg := loadDefaults(t)
	cfg.Listen = "127.0.0.1:0"
	cfg.Delegation.Self = "b"
	cfg.Agent.Skills = []SkillConfig{{ID: "research"}}
	cfg.Agents = []registry.Spec{{ID: "c", URL: c.URL}}
	b, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- b.Run(ctx) }()
	testwait.Until(t, 10*time.Second, "B starting with its agent", func() bool { return b.Addr() != nil && b.Registry().Len() > 0 })
	bURL := "http://" + b.Addr().String()
	a := orchdNode(t, "a", "research", registry.Spec{ID: "b", URL: bURL})

	var rec delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("delegate at A = %d", code)
	}
	waitFor(t, a, rec.ID, a2a.TaskStateWorking)
	var list httpapi.DelegationList
	if code := call(t, "GET", bURL+"/v1/delegations", "", &list); code != 200 || len(list.Delegations) != 1 {
		t.Fatalf("B's delegations = %d %+v", code, list)
	}
	resp, err := http.Get(bURL + "/v1/delegations/" + list.Delegations[0].ID + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()

	start := time.Now()
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run = %v", err)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("Run took %v to stop", took)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return")
	}
	// A learns why: B's task failed, naming what B left running.
	failed := waitFor(t, a, rec.ID, a2a.TaskStateFailed)
	if !strings.Contains(failed.Error, "orchd stopped while the task was in flight") || !strings.Contains(failed.Error, "at c ") {
		t.Errorf("A's delegation failed with %q", failed.Error)
	}
	// C's task is still running, as B said; end it.
	card, err := agentcard.NewResolver(nil).Resolve(t.Context(), c.URL)
	if err != nil {
		t.Fatal(err)
	}
	cc, err := a2aclient.NewFromCard(t.Context(), card)
	if err != nil {
		t.Fatal(err)
	}
	task, err := cc.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: list.Delegations[0].Downstream.TaskID})
	if err != nil || task.Status.State != a2a.TaskStateCanceled {
		t.Errorf("cancel C's task: %v, %+v", err, task)
	}
}
