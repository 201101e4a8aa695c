package orchestrator

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/natstest"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// containedEvents returns the contained events of delegation id at base.
func containedEvents(t *testing.T, base, id string) []delegation.Event {
	t.Helper()
	evs, _, err := nodeDaemon(base).Delegations().Events(t.Context(), id, 0, 0)
	if err != nil {
		t.Fatalf("events of %s: %v", id, err)
	}
	return slices.DeleteFunc(evs, func(ev delegation.Event) bool { return ev.Kind != delegation.KindContained })
}

// waitContained waits until delegation id at base reached state with n
// contained events, the last naming c, and returns the record.
func waitContained(t *testing.T, base, id string, state a2a.TaskState, n int, c registry.Containment) delegation.Record {
	t.Helper()
	rec := waitFor(t, base, id, state)
	evs := containedEvents(t, base, id)
	if len(evs) != n {
		t.Fatalf("delegation %s has %d contained events, want %d: %+v", id, len(evs), n, evs)
	}
	if got := evs[n-1].Containment; got == nil || *got != c {
		t.Errorf("delegation %s: contained event names %+v, want %+v", id, got, c)
	}
	return rec
}

// TestContain_StopsWorkAtAAndThroughB runs A → B → C, two orchds, with
// one delegation from A straight to C and one through B whose steer
// receipt names C. Containing C at A interrupts both, each logging who
// contained C, when and why; new work and input for C are refused, naming
// the containment; contain and release answer the same twice; releasing
// lets the work go on; containing with cancel cancels it.
func TestContain_StopsWorkAtAAndThroughB(t *testing.T) {
	t.Parallel()
	c := testagent.Start(t, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	b := orchdNode(t, "b", "research", registry.Spec{ID: "c", URL: c.URL})
	a := orchdNode(t, "a", "research", registry.Spec{ID: "b", URL: b}, registry.Spec{ID: "c", URL: c.URL})

	var direct, through delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "survey", "agent": "c"}`, &direct); code != 201 {
		t.Fatalf("delegate to C = %d", code)
	}
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "survey", "agent": "b"}`, &through); code != 201 {
		t.Fatalf("delegate through B = %d", code)
	}
	waitFor(t, a, direct.ID, a2a.TaskStateWorking)
	waitFor(t, a, through.ID, a2a.TaskStateWorking)
	var r steering.Receipt
	if code := call(t, "POST", a+"/v1/delegations/"+through.ID+":steer", `{"text": "keep going"}`, &r); code != 200 ||
		!slices.ContainsFunc(r.Hops, func(h steering.Hop) bool { return h.Agent == "C" }) {
		t.Fatalf("steer through B = %d %+v, want a receipt naming C", code, r)
	}

	var eb httpapi.ErrorBody
	for _, tc := range []struct{ path, body, code string }{
		{"/v1/agents/nosuch:contain", `{"reason": "r"}`, "not_found"},
		{"/v1/agents/c:contain", `{}`, "invalid_argument"},
		{"/v1/agents/c:contain", `{"reason": "` + strings.Repeat("x", registry.MaxContainmentReason+1) + `"}`, "invalid_argument"},
		{"/v1/agents/c:contain", `{"reason": "r", "why": "unknown field"}`, "invalid_argument"},
		{"/v1/agents/nosuch:release", ``, "not_found"},
	} {
		if call(t, "POST", a+tc.path, tc.body, &eb); eb.Error.Code != tc.code {
			t.Errorf("POST %s %s = %+v, want %s", tc.path, tc.body, eb, tc.code)
		}
	}

	before := time.Now().UTC()
	var ans httpapi.ContainmentAnswer
	if code := call(t, "POST", a+"/v1/agents/c:contain", `{"reason": "leaks data"}`, &ans); code != 200 || !ans.Contained || !ans.Changed || ans.Containment == nil {
		t.Fatalf("contain C = %d %+v", code, ans)
	}
	held := *ans.Containment
	if held.Agent != "c" || held.Reason != "leaks data" || held.By != "anonymous" || held.Cancel || held.At.Before(before.Add(-time.Second)) {
		t.Errorf("containment = %+v", held)
	}
	waitContained(t, a, direct.ID, a2a.TaskStateInputRequired, 1, held)
	waitContained(t, a, through.ID, a2a.TaskStateInputRequired, 1, held)
	if sigs := c.Signals(); !slices.ContainsFunc(sigs, func(s steering.Signal) bool {
		return s.Control == steering.Interrupt && strings.Contains(testagent.Text(s.Message), "contained by anonymous: leaks data")
	}) {
		t.Errorf("C took no interrupt naming the containment: %+v", sigs)
	}

	// Again: the same containment, unchanged.
	if code := call(t, "POST", a+"/v1/agents/c:contain", `{"reason": "other", "cancel": true}`, &ans); code != 200 || ans.Changed || ans.Containment == nil || *ans.Containment != held {
		t.Errorf("contain C again = %d %+v, want the first, unchanged", code, ans)
	}
	var ag registry.Agent
	if call(t, "GET", a+"/v1/agents/c", "", &ag); !ag.Contained || ag.Containment == nil || *ag.Containment != held {
		t.Errorf("agent c = contained %v %+v", ag.Contained, ag.Containment)
	}
	// No new work, no input, naming the containment.
	calls := len(c.Messages())
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "more", "agent": "c"}`, &eb); code != 422 || eb.Error.Code != "refused" ||
		!strings.Contains(eb.Error.Message, "contained by anonymous at") || !strings.Contains(eb.Error.Message, "leaks data") {
		t.Errorf("new work for C = %d %+v, want refused naming the containment", code, eb)
	}
	for _, id := range []string{direct.ID, through.ID} {
		if code := call(t, "POST", a+"/v1/delegations/"+id+"/messages", `{"text": "go on"}`, &eb); code != 409 || eb.Error.Code != "failed_precondition" ||
			!strings.Contains(eb.Error.Message, "agent is contained") {
			t.Errorf("input to %s = %d %+v, want refused naming the containment", id, code, eb)
		}
	}
	if got := len(c.Messages()); got != calls {
		t.Errorf("C received %d messages while contained", got-calls)
	}

	// Released: the work goes on, new work is sent.
	if code := call(t, "POST", a+"/v1/agents/c:release", "", &ans); code != 200 || ans.Contained || !ans.Changed || ans.Containment == nil || *ans.Containment != held {
		t.Fatalf("release C = %d %+v", code, ans)
	}
	if code := call(t, "POST", a+"/v1/agents/c:release", "", &ans); code != 200 || ans.Changed || ans.Containment != nil {
		t.Errorf("release C again = %d %+v, want nothing changed", code, ans)
	}
	for _, id := range []string{direct.ID, through.ID} {
		if code := call(t, "POST", a+"/v1/delegations/"+id+"/messages", `{"text": "go on"}`, nil); code != 200 {
			t.Fatalf("input to %s after the release = %d", id, code)
		}
		waitFor(t, a, id, a2a.TaskStateWorking)
	}

	// Contained with cancel: both are canceled, C's tasks too.
	if code := call(t, "POST", a+"/v1/agents/c:contain", `{"reason": "still leaking", "cancel": true}`, &ans); code != 200 || !ans.Changed || !ans.Containment.Cancel {
		t.Fatalf("contain C with cancel = %d %+v", code, ans)
	}
	waitContained(t, a, direct.ID, a2a.TaskStateCanceled, 2, *ans.Containment)
	waitContained(t, a, through.ID, a2a.TaskStateCanceled, 2, *ans.Containment)
	testwait.Until(t, 10*time.Second, "C's tasks canceled", func() bool { return c.Cancels() >= 2 })

	// Over A2A too, work for a contained agent is refused naming it.
	if code := call(t, "POST", a+"/v1/agents/b:contain", `{"reason": "also held"}`, nil); code != 200 {
		t.Fatalf("contain B = %d", code)
	}
	res, err := testagent.Client(t, a).SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey"))})
	task, ok := res.(*a2a.Task)
	if err != nil || !ok || task.Status.State != a2a.TaskStateRejected || task.Status.Message == nil ||
		!strings.Contains(testagent.Text(task.Status.Message), "contained by anonymous") {
		t.Errorf("A2A SendMessage with every agent contained = %+v, %v; want rejected naming the containment", res, err)
	}
}

// TestContain_EveryReplicaWithinASecond runs two orchds on one store: a
// containment made through one stops the work the other follows, and the
// other refuses new work for the agent, within a second; an orchd started
// on the store afterwards finds the agent contained.
func TestContain_EveryReplicaWithinASecond(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server and three daemons")
	}
	t.Parallel()
	nats := natstest.Listening(t)
	agent := testagent.Start(t, testagent.Options{Name: "Held", Skill: "work", Streaming: true, Steering: true}, testagent.Steerable())
	replica := func() string {
		cfg := loadDefaults(t)
		cfg.StateDir = t.TempDir()
		cfg.Store.URL = nats.ClientURL()
		cfg.Agents = []registry.Spec{{ID: "held", URL: agent.URL}}
		return startDaemon(t, cfg)
	}
	one, two := replica(), replica()
	var rec delegation.Record
	if code := call(t, "POST", one+"/v1/delegations", `{"text": "work", "skill": "work"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waitFor(t, one, rec.ID, a2a.TaskStateWorking)

	var ans httpapi.ContainmentAnswer
	if code := call(t, "POST", two+"/v1/agents/held:contain", `{"reason": "misbehaves"}`, &ans); code != 200 || !ans.Changed {
		t.Fatalf("contain through the second replica = %d %+v", code, ans)
	}
	kept := time.Now()
	testwait.Until(t, 5*time.Second, "the first replica to see the containment", func() bool {
		var ag registry.Agent
		return call(t, "GET", one+"/v1/agents/held", "", &ag) == 200 && ag.Contained
	})
	took := time.Since(kept)
	if took > time.Second {
		t.Errorf("the first replica saw the containment after %s, want within a second", took)
	}
	t.Logf("the first replica saw the containment %s after the second kept it", took.Round(time.Millisecond))
	var eb httpapi.ErrorBody
	if code := call(t, "POST", one+"/v1/delegations", `{"text": "more", "skill": "work"}`, &eb); code != 422 || !strings.Contains(eb.Error.Message, "misbehaves") {
		t.Errorf("new work at the first replica = %d %+v, want refused naming the containment", code, eb)
	}
	waitContained(t, one, rec.ID, a2a.TaskStateInputRequired, 1, *ans.Containment)

	// An orchd started afterwards on the store finds it contained at once.
	three := replica()
	var ag registry.Agent
	testwait.Until(t, 10*time.Second, "the agent registered at the third replica", func() bool {
		return call(t, "GET", three+"/v1/agents/held", "", &ag) == 200
	})
	if !ag.Contained || ag.Containment == nil || *ag.Containment != *ans.Containment {
		t.Errorf("the third replica's agent: contained %v %+v, want %+v", ag.Contained, ag.Containment, *ans.Containment)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, _, err := nodeDaemon(three).Delegations().Release(ctx, "held", "test"); err != nil {
		t.Fatalf("release at the third replica: %v", err)
	}
	testwait.Until(t, 5*time.Second, "the first replica to see the release", func() bool {
		var ag registry.Agent
		return call(t, "GET", one+"/v1/agents/held", "", &ag) == 200 && !ag.Contained
	})
	if code := call(t, "POST", one+"/v1/delegations/"+rec.ID+"/messages", `{"text": "go on"}`, nil); code != 200 {
		t.Errorf("input after the release = %d", code)
	}
}

// TestConsole_ShowsAContainedAgent checks that the console's agent pages
// show who contained an agent and why, and a delegation's page the
// contained event.
func TestConsole_ShowsAContainedAgent(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	cfg := loadDefaults(t)
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)
	var rec delegation.Record
	if code := call(t, "POST", base+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waitFor(t, base, rec.ID, a2a.TaskStateWorking)
	if code := call(t, "POST", base+"/v1/agents/worker:contain", `{"reason": "leaks <data>"}`, nil); code != 200 {
		t.Fatalf("contain = %d", code)
	}
	waitFor(t, base, rec.ID, a2a.TaskStateInputRequired)
	_, _, page := browse(t, "GET", base+"/ui/agents", "", nil)
	wantIn(t, "agents page", page, `<span class="bad">contained</span> by anonymous: leaks &lt;data&gt;`)
	_, _, page = browse(t, "GET", base+"/ui/agents/worker", "", nil)
	wantIn(t, "agent page", page, "<dt>Contained</dt>", "contained by anonymous at ", "(running work interrupted): leaks &lt;data&gt;", "orchd agents release worker")
	_, _, page = browse(t, "GET", base+"/ui/delegations/"+rec.ID, "", nil)
	wantIn(t, "delegation page", page, "<td>contained</td>", "agent worker contained by anonymous at ")
}

// TestContain_PoliciesSeeAgentContained runs a policy that reads
// agent.contained: a dry run decides a contained agent by it, and the
// same agent again once released.
func TestContain_PoliciesSeeAgentContained(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research"}, testagent.Work(time.Millisecond))
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "brake.yaml"), `policy: brake
default: allow
rules:
  - name: contained
    deny: agent.contained
    reasonExpression: '"held by " + agent.containment.by + ": " + agent.containment.reason'
`)
	cfg := loadDefaults(t)
	cfg.Policies.Paths = []string{dir}
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)
	decide := func() policies.Decision {
		t.Helper()
		var res httpapi.EvaluateResponse
		if code := call(t, "POST", base+"/v1/policy:evaluate", `{"agents": ["worker"]}`, &res); code != 200 || res.Result == nil || len(res.Decisions) != 1 {
			t.Fatalf("dry run = %d %+v", code, res)
		}
		return res.Decisions[0]
	}
	if d := decide(); !d.Allowed {
		t.Errorf("free agent refused: %q", d.Reasons)
	}
	if code := call(t, "POST", base+"/v1/agents/worker:contain", `{"reason": "leaks data"}`, nil); code != 200 {
		t.Fatalf("contain = %d", code)
	}
	if d := decide(); d.Allowed || !slices.Equal(d.Reasons, []string{"held by anonymous: leaks data"}) {
		t.Errorf("contained agent: allowed %v, reasons %q; want refused by the policy", d.Allowed, d.Reasons)
	}
	if code := call(t, "POST", base+"/v1/agents/worker:release", "", nil); code != 200 {
		t.Fatalf("release = %d", code)
	}
	if d := decide(); !d.Allowed {
		t.Errorf("released agent refused: %q", d.Reasons)
	}
}

// TestContain_FindsWorkBelowByItsLineage runs A → B → C with C known at A
// under another id, and nothing steered: containing C at A stops the work
// through B, found by the lineage B reports (C's card name and digest),
// not by a receipt.
func TestContain_FindsWorkBelowByItsLineage(t *testing.T) {
	t.Parallel()
	c := testagent.Start(t, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	b := orchdNode(t, "b", "research", registry.Spec{ID: "c", URL: c.URL})
	a := orchdNode(t, "a", "research", registry.Spec{ID: "b", URL: b}, registry.Spec{ID: "leaf", URL: c.URL})

	var through delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "survey", "agent": "b"}`, &through); code != 201 {
		t.Fatalf("delegate through B = %d", code)
	}
	testwait.Until(t, 10*time.Second, "A's record to name C below B", func() bool {
		rec := waitFor(t, a, through.ID, a2a.TaskStateWorking)
		return rec.Lineage != nil && slices.ContainsFunc(rec.Lineage.Hops, func(h delegation.LineageHop) bool { return h.AgentName == "C" })
	})

	var ans httpapi.ContainmentAnswer
	if code := call(t, "POST", a+"/v1/agents/leaf:contain", `{"reason": "leaks data"}`, &ans); code != 200 || ans.Containment == nil {
		t.Fatalf("contain C = %d %+v", code, ans)
	}
	waitContained(t, a, through.ID, a2a.TaskStateInputRequired, 1, *ans.Containment)
	if sigs := c.Signals(); !slices.ContainsFunc(sigs, func(s steering.Signal) bool {
		return s.Control == steering.Interrupt && strings.Contains(testagent.Text(s.Message), "contained by anonymous: leaks data")
	}) {
		t.Errorf("C took no interrupt naming the containment: %+v", sigs)
	}
}
