package orchestrator

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/natstest"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/steering"
)

// TestCluster_OwnerKilledMidTask runs three orchd replicas, each in its
// own process, on a 3-node NATS cluster started in the test. The replica
// that took the work is killed with SIGKILL mid-task; another carries the
// delegation on, a steer sent through the third reaches the agent once,
// and the event log, read through the second, holds every event once.
func TestCluster_OwnerKilledMidTask(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS cluster and three daemons")
	}
	t.Parallel()
	nats := natstest.NewCluster(t, 3)
	agent := testagent.Start(t, testagent.Options{Name: "Steered", Skill: "work", Streaming: true, Steering: true}, testagent.Steerable())
	// timeout: a 3-node cluster in the test process places buckets
	// slowly on a loaded machine; each store call may take 20 s, not 5.
	// The default leaseTTL (10s): that cluster, on a machine busy with
	// other packages' tests, has stalled every write for over 5 s, which
	// a 2 s lease does not ride out: every replica lost its lease then.
	extra := fmt.Sprintf("store:\n  url: %q\n  replicas: 3\n  timeout: 20s\n", nats.URLs())
	var replicas []*child
	for range 3 {
		replicas = append(replicas, childDaemon(t, t.TempDir(), extra))
	}
	first, second, third := replicas[0], replicas[1], replicas[2]
	if code := call(t, "POST", first.base+"/v1/agents", `{"url":"`+agent.URL+`"}`, nil); code != 201 {
		t.Fatalf("add agent = %d", code)
	}
	for _, r := range replicas { // each replica's registry watches the store
		testwait.Until(t, 10*time.Second, "replica "+r.base+" seeing the agent", func() bool {
			var l httpapi.AgentList
			return callNoFail(r.base+"/v1/agents", &l) == 200 && len(l.Agents) == 1
		})
	}
	var rec delegation.Record
	if code := call(t, "POST", first.base+"/v1/delegations", `{"skill":"work","message":{"role":"ROLE_USER","parts":[{"text":"go"}]}}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	// Reads on another replica may lag the write by a moment: the
	// cluster's followers answer reads too.
	testwait.Until(t, 10*time.Second, "the delegation on the second replica", func() bool {
		var r delegation.Record
		return callNoFail(second.base+"/v1/delegations/"+rec.ID, &r) == 200
	})
	events := "/v1/delegations/" + rec.ID + "/events"
	seen := readUntil(t, second.base+events, "", func(ev delegation.Event) bool { return ev.State == a2a.TaskStateWorking })

	first.kill()
	killed := time.Now()
	var receipt steering.Receipt
	steer := `{"message":{"messageId":"steer-1","role":"ROLE_USER","parts":[{"text":"finish"}]}}`
	if code := call(t, "POST", third.base+"/v1/delegations/"+rec.ID+":steer", steer, &receipt); code != 200 {
		t.Fatalf("steer through the third replica = %d %+v", code, receipt)
	}
	// A retry, through the second replica, is answered with the first
	// receipt and not delivered again.
	var again steering.Receipt
	code := call(t, "POST", second.base+"/v1/delegations/"+rec.ID+":steer", steer, &again)
	type retried struct {
		Duplicate bool
		Seq       int64
	}
	if diff := cmp.Diff(answer[retried]{200, retried{true, receipt.Seq}}, answer[retried]{code, retried{again.Duplicate, again.Seq}}); diff != "" {
		t.Errorf("retried steer, want the first's receipt (-want +got):\n%s", diff)
	}
	rest := readEvents(t, second.base+events, fmt.Sprint(seen[len(seen)-1].Seq))
	t.Logf("the owner was killed; the steer was acknowledged and the work ended %s later", time.Since(killed).Round(time.Millisecond))
	all := append(seen, rest...)
	terminal, steers := 0, 0
	for i, ev := range all {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: %s", i, ev.Seq, kinds(all))
		}
		if ev.State.Terminal() && agentStatus(ev) {
			terminal++
		}
		if ev.Kind == "steer" {
			steers++
		}
	}
	// The record is written just after the log: read it once it caught up.
	testwait.Until(t, 10*time.Second, "the record ended, on the third replica", func() bool {
		return call(t, "GET", third.base+"/v1/delegations/"+rec.ID, "", &rec) == 200 && rec.State.Terminal()
	})
	if terminal != 1 || steers != 1 {
		t.Errorf("%d terminal events and %d steers in the log, want 1 of each: %s", terminal, steers, kinds(all))
	}
	if o := outcomeOf(rec); o.State != a2a.TaskStateCompleted || !strings.Contains(o.Result, "finished: finish") {
		t.Errorf("the delegation ended %s (%q) with result %q, want COMPLETED, finished: finish", o.State, rec.Error, o.Result)
	}
	if n := len(agent.Signals()); n != 1 {
		t.Errorf("the agent took %d signals, want 1", n)
	}
}

// agentStatus reports whether a delegation event is a status of the
// agent's: a state event, or a message that is not the caller's input
// passed on.
func agentStatus(ev delegation.Event) bool {
	return ev.Kind == "state" || ev.Kind == "message" && (ev.Message == nil || ev.Message.Role != a2a.MessageRoleUser)
}
