package orchestrator

import (
	"slices"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

func TestChain_SteeringCrossesHops(t *testing.T) {
	t.Parallel()
	c := testagent.Start(t, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	d := testagent.Start(t, testagent.Options{Name: "D", Skill: "draft", Streaming: true}, testagent.Hang())
	b := orchdNode(t, "b", "research", registry.Spec{ID: "c", URL: c.URL}, registry.Spec{ID: "d", URL: d.URL})
	a := orchdNode(t, "a", "research", registry.Spec{ID: "b", URL: b})
	// B's card lists "research" only; let A reach D's work through B too.
	if code := call(t, "POST", a+"/v1/agents", `{"id": "b-draft", "url": "`+b+`/.well-known/agent-card.json"}`, nil); code != 201 {
		t.Fatalf("register B again = %d", code)
	}

	// A root requiring steerable: A → B (steerable as a router) → C.
	var rec delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "survey", "skill": "research", "requires": ["steerable", "interruptible"]}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waitFor(t, a, rec.ID, a2a.TaskStateWorking)

	var r steering.Receipt
	if code := call(t, "POST", a+"/v1/delegations/"+rec.ID+":steer", `{"text": "narrow to 2025", "referenceMessageId": "out-3"}`, &r); code != 200 {
		t.Fatalf("steer at A = %d %+v", code, r)
	}
	want := []steering.Hop{{Agent: "a", Seq: 1}, {Agent: "b", Seq: 1}, {Agent: "C", Seq: 1}}
	if !slices.Equal(r.Hops, want) || r.ReferenceMessageID != "out-3" {
		t.Errorf("receipt = %+v, want hops %v", r, want)
	}
	if sigs := c.Signals(); len(sigs) != 1 || testagent.Text(sigs[0].Message) != "narrow to 2025" || sigs[0].ReferenceMessageID != "out-3" {
		t.Errorf("C took %+v", sigs)
	}

	// Interrupt settles through B: A's delegation waits for input, marked
	// interrupted; the next message resumes C's same task.
	if code := call(t, "POST", a+"/v1/delegations/"+rec.ID+":interrupt", `{"text": "stop"}`, &r); code != 200 || len(r.Hops) != 3 {
		t.Fatalf("interrupt at A = %d %+v", code, r)
	}
	waiting := waitFor(t, a, rec.ID, a2a.TaskStateInputRequired)
	live, ok := nodeDaemon(a).Delegations().Get(rec.ID)
	if !ok {
		t.Fatal("A does not hold its delegation")
	}
	evs, _, _ := live.Events(0)
	if !slices.ContainsFunc(evs, func(ev delegation.Event) bool {
		return ev.State == a2a.TaskStateInputRequired && ev.Metadata[steering.InterruptedKey] == true
	}) || waiting.LastEvent != evs[len(evs)-1].Seq {
		t.Errorf("no event of A's delegation marks the interrupt: %+v", evs)
	}
	if code := call(t, "POST", a+"/v1/delegations/"+rec.ID+"/messages", `{"text": "go on"}`, &rec); code != 200 {
		t.Fatalf("resume = %d", code)
	}
	waitFor(t, a, rec.ID, a2a.TaskStateWorking)
	if code := call(t, "POST", a+"/v1/delegations/"+rec.ID+":steer", `{"text": "finish"}`, &r); code != 200 {
		t.Fatalf("final steer = %d", code)
	}
	done := waitFor(t, a, rec.ID, a2a.TaskStateCompleted)
	if got := testagent.Text(done.Result); got != "finished: finish" {
		t.Errorf("result = %q", got)
	}
	if msgs := c.Messages(); len(msgs) != 2 || msgs[1].TaskID == "" {
		t.Errorf("C's executions: %d", len(msgs))
	}

	// A steer to D is refused at B, naming the hop and the mode, and D
	// gets nothing.
	if code := call(t, "POST", b+"/v1/delegations", `{"text": "draft it", "skill": "draft"}`, &rec); code != 201 {
		t.Fatalf("delegate to D = %d", code)
	}
	waitFor(t, b, rec.ID, a2a.TaskStateWorking)
	before := len(d.Calls())
	var eb ErrorBody
	if code := call(t, "POST", b+"/v1/delegations/"+rec.ID+":steer", `{"text": "shorter"}`, &eb); code != 409 ||
		!strings.Contains(eb.Error.Message, "hop d does not advertise the steerable mode") {
		t.Errorf("steer to D = %d %+v", code, eb)
	}
	if len(d.Calls()) != before {
		t.Errorf("D received a refused steer: %v", d.Calls()[before:])
	}
	call(t, "POST", b+"/v1/delegations/"+rec.ID+":cancel", "", nil)
}

func TestChain_SteerRefusedAtBForANonSteerableLeaf(t *testing.T) {
	t.Parallel()
	d := testagent.Start(t, testagent.Options{Name: "D", Skill: "draft", Streaming: true}, testagent.Hang())
	b := orchdNode(t, "b", "draft", registry.Spec{ID: "d", URL: d.URL})
	a := orchdNode(t, "a", "draft", registry.Spec{ID: "b", URL: b})
	var rec delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "draft", "skill": "draft"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waitFor(t, a, rec.ID, a2a.TaskStateWorking)
	before := len(d.Calls())
	var eb ErrorBody
	code := call(t, "POST", a+"/v1/delegations/"+rec.ID+":steer", `{"text": "shorter"}`, &eb)
	if code != 409 || !strings.Contains(eb.Error.Message, "hop b refused the steer") || !strings.Contains(eb.Error.Message, "hop d does not advertise the steerable mode") {
		t.Errorf("steer through B to D = %d %+v", code, eb)
	}
	if len(d.Calls()) != before {
		t.Errorf("D received a refused steer: %v", d.Calls()[before:])
	}
	call(t, "POST", a+"/v1/delegations/"+rec.ID+":cancel", "", nil)

	// Requiring steerable at the root: B (a steerable router) takes the
	// work, then refuses it before anything reaches D.
	var strict delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "draft", "skill": "draft", "requires": ["steerable"]}`, &strict); code != 201 {
		t.Fatalf("strict delegate = %d", code)
	}
	rejected := waitFor(t, a, strict.ID, a2a.TaskStateRejected)
	sends := 0
	for _, m := range d.Calls() {
		if m == "SendStreamingMessage" || m == "SendMessage" {
			sends++
		}
	}
	if !strings.Contains(rejected.Error, "d: lacks required capability steerable") || sends != 1 {
		t.Errorf("strict delegation: %q, D calls %v", rejected.Error, d.Calls())
	}
}
