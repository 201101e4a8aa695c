package orchestrator

import (
	"fmt"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// TestSteering_StressTwoHops sends 1,000 steers over 100 concurrent tasks
// through A → B → C, each task's steers in order from its own caller, some
// of them retried, and checks that C took every steer exactly once and in
// order.
func TestSteering_StressTwoHops(t *testing.T) {
	if testing.Short() {
		t.Skip("takes ~10 s: 1,000 steers over 100 tasks across two hops")
	}
	t.Parallel()
	const tasks, steers = 100, 10
	c := testagent.Start(t, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	b := orchdNode(t, "b", "research", registry.Spec{ID: "c", URL: c.URL})
	a := orchdNode(t, "a", "research", registry.Spec{ID: "b", URL: b})

	ids := make([]string, tasks)
	for i := range ids {
		var rec delegation.Record
		if code := call(t, "POST", a+"/v1/delegations", fmt.Sprintf(`{"text": "task %d", "skill": "research"}`, i), &rec); code != 201 {
			t.Fatalf("delegate %d = %d", i, code)
		}
		ids[i] = rec.ID
	}
	for _, id := range ids {
		waitFor(t, a, id, a2a.TaskStateWorking)
	}

	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			for j := range steers {
				body := fmt.Sprintf(`{"message": {"messageId": "t%d-s%d", "role": "ROLE_USER", "parts": [{"text": "t%d-s%d"}]}}`, i, j, i, j)
				var r steering.Receipt
				if code := call(t, "POST", a+"/v1/delegations/"+id+":steer", body, &r); code != 200 || r.Seq != int64(j+1) || len(r.Hops) != 3 {
					t.Errorf("task %d steer %d: %d %+v", i, j, code, r)
					return
				}
				if j%4 == 0 { // a retry must not be delivered again
					var dup steering.Receipt
					if code := call(t, "POST", a+"/v1/delegations/"+id+":steer", body, &dup); code != 200 || !dup.Duplicate || dup.Seq != r.Seq {
						t.Errorf("task %d retry of steer %d: %d %+v", i, j, code, dup)
					}
				}
			}
		})
	}
	wg.Wait()

	byTask := map[a2a.TaskID][]steering.Signal{}
	for _, s := range c.Signals() {
		byTask[s.Message.TaskID] = append(byTask[s.Message.TaskID], s)
	}
	if len(byTask) != tasks {
		t.Fatalf("C took steers for %d tasks, want %d", len(byTask), tasks)
	}
	lost, duplicated, reordered := 0, 0, 0
	for _, sigs := range byTask {
		seen := map[string]bool{}
		for k, s := range sigs {
			text := testagent.Text(s.Message)
			if seen[text] {
				duplicated++
			}
			seen[text] = true
			if s.Seq != int64(k+1) || (k > 0 && text < testagent.Text(sigs[k-1].Message)) {
				reordered++
			}
		}
		lost += steers - len(seen)
	}
	if lost != 0 || duplicated != 0 || reordered != 0 {
		t.Errorf("lost %d, duplicated %d, reordered %d steers", lost, duplicated, reordered)
	}
	for _, id := range ids {
		call(t, "POST", a+"/v1/delegations/"+id+":cancel", "", nil)
	}
}
