package orchestrator

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

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
				var r struct {
					steering.Receipt
					Error json.RawMessage `json:"error"`
				}
				code := call(t, "POST", a+"/v1/delegations/"+id+":steer", body, &r)
				type steered struct {
					Seq  int64
					Hops int
				}
				if diff := cmp.Diff(answer[steered]{200, steered{int64(j + 1), 3}}, answer[steered]{code, steered{r.Seq, len(r.Hops)}}); diff != "" {
					t.Errorf("task %d steer %d (-want +got):\n%s\nerror: %s", i, j, diff, r.Error)
					return
				}
				if j%4 == 0 { // a retry must not be delivered again
					var dup steering.Receipt
					code := call(t, "POST", a+"/v1/delegations/"+id+":steer", body, &dup)
					type retried struct {
						Duplicate bool
						Seq       int64
					}
					if diff := cmp.Diff(answer[retried]{200, retried{true, r.Seq}}, answer[retried]{code, retried{dup.Duplicate, dup.Seq}}); diff != "" {
						t.Errorf("task %d retry of steer %d (-want +got):\n%s", i, j, diff)
					}
				}
			}
		})
	}
	wg.Wait()

	byTask := map[a2a.TaskID][]steering.Signal{}
	// A receipt says a steer is queued at C; C takes it a moment later.
	for _, s := range c.TookSignals(t, tasks*steers) {
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
	type losses struct{ Lost, Duplicated, Reordered int }
	if diff := cmp.Diff(losses{}, losses{lost, duplicated, reordered}); diff != "" {
		t.Errorf("steers C took amiss (-want +got):\n%s", diff)
	}
	for _, id := range ids {
		call(t, "POST", a+"/v1/delegations/"+id+":cancel", "", nil)
	}
}
