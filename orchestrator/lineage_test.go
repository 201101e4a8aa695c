package orchestrator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// waitLineage reads the delegation at base until ok says its record is
// as wanted, and returns it.
func waitLineage(t *testing.T, base, id, what string, ok func(delegation.Record) error) delegation.Record {
	t.Helper()
	var rec delegation.Record
	testwait.Succeeds(t, 10*time.Second, what, func() error {
		rec = delegation.Record{}
		if code := call(t, "GET", base+"/v1/delegations/"+id, "", &rec); code != 200 {
			return fmt.Errorf("GET = %d", code)
		}
		return ok(rec)
	})
	return rec
}

// leafIs checks that the last hop of rec's lineage is the agent with id
// and name at the state, its task named.
func leafIs(rec delegation.Record, hops int, agent, name string, state a2a.TaskState) error {
	l := rec.Lineage
	switch {
	case l == nil:
		return fmt.Errorf("no lineage yet (state %s)", rec.State)
	case len(l.Hops) != hops:
		return fmt.Errorf("lineage has %d hops, want %d: %+v", len(l.Hops), hops, l.Hops)
	}
	leaf := l.Hops[hops-1]
	if leaf.Agent != agent || leaf.AgentName != name || leaf.State != state || leaf.TaskID == "" || leaf.CardDigest == "" {
		return fmt.Errorf("leaf hop %+v, want agent %s (%s) %s with its task and card digest", leaf, agent, name, state)
	}
	return nil
}

// A → B → D → agent: A's API shows every hop's agent, state and timings
// down to the leaf agent as the work goes, before any steer, and the
// console's tree page shows the leaf too.
func TestLineage_RootSeesTheLeafBeforeAnySteer(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	leaf := testagent.Start(t, testagent.Options{Name: "Leaf researcher", Skill: "research", Streaming: true}, testagent.Stream(1, 1, 8, hold))
	d := orchdNode(t, "d", "research", registry.Spec{ID: "leaf", URL: leaf.URL})
	b := orchdNode(t, "b", "research", registry.Spec{ID: "d", URL: d})
	a := orchdNode(t, "a", "research", registry.Spec{ID: "b", URL: b})

	var rec delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("delegate at A = %d %+v", code, rec)
	}
	working := waitLineage(t, a, rec.ID, "A's lineage naming the leaf WORKING", func(r delegation.Record) error {
		if err := leafIs(r, 2, "leaf", "Leaf researcher", a2a.TaskStateWorking); err != nil {
			return err
		}
		if s := r.Lineage.Hops[0].State; s != a2a.TaskStateWorking {
			return fmt.Errorf("B's hop is %s", s)
		}
		return nil
	})
	mid := working.Lineage.Hops[0]
	if mid.Orchd != "b" || mid.Name != "orchd b" || mid.Agent != "d" || mid.AgentName != "orchd d" || mid.State != a2a.TaskStateWorking ||
		mid.TaskID == "" || mid.Delegation == "" || mid.CreatedAt.IsZero() || mid.UpdatedAt.Before(mid.CreatedAt) {
		t.Errorf("B's hop at A: %+v", mid)
	}
	if low := working.Lineage.Hops[1]; low.Orchd != "d" || low.CreatedAt.IsZero() {
		t.Errorf("D's hop at A: %+v", low)
	}
	if working.Downstream.Name != "orchd b" {
		t.Errorf("A's downstream hop is named %q, want orchd b", working.Downstream.Name)
	}
	if sigs := leaf.Signals(); len(sigs) != 0 {
		t.Fatalf("a steer went down the chain: %+v", sigs)
	}

	_, _, page := browse(t, "GET", a+"/ui/delegations/"+rec.ID, "", nil)
	wantIn(t, "the tree page", page, "Leaf researcher", `data-role="agent below"`, "orchd d", "working")
	if strings.Contains(page, `id="below-unknown"`) {
		t.Errorf("the tree page still waits for a steer to name the hops below")
	}

	close(hold)
	done := waitLineage(t, a, rec.ID, "A's lineage naming the leaf COMPLETED", func(r delegation.Record) error {
		return leafIs(r, 2, "leaf", "Leaf researcher", a2a.TaskStateCompleted)
	})
	if done.State != a2a.TaskStateCompleted {
		t.Errorf("A's delegation is %s", done.State)
	}
	if h := done.Lineage.Hops[1]; !h.UpdatedAt.After(working.Lineage.Hops[1].UpdatedAt) {
		t.Errorf("the leaf's hop kept its time: %v then %v", working.Lineage.Hops[1].UpdatedAt, h.UpdatedAt)
	}
}
