package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2aext"
	"google.golang.org/grpc"

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
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
	if sigs := c.TookSignals(t, 1); len(sigs) != 1 {
		t.Errorf("C took %d signals, want 1: %+v", len(sigs), sigs)
	} else if text, ref := testagent.Text(sigs[0].Message), sigs[0].ReferenceMessageID; text != "narrow to 2025" || ref != "out-3" {
		t.Errorf("C took %q referring to %q, want %q referring to out-3", text, ref, "narrow to 2025")
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
	var eb httpapi.ErrorBody
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
	var eb httpapi.ErrorBody
	code := call(t, "POST", a+"/v1/delegations/"+rec.ID+":steer", `{"text": "shorter"}`, &eb)
	if code != 409 {
		t.Errorf("steer through B to D = %d %+v, want 409", code, eb)
	}
	for _, want := range []string{"hop b refused the steer", "hop d does not advertise the steerable mode"} {
		if !strings.Contains(eb.Error.Message, want) {
			t.Errorf("steer through B to D: %q, want it to say %q", eb.Error.Message, want)
		}
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

// TestInterrupt_ResumedAtOnceOverA2A interrupts an orchd task over A2A
// (orchd → steerable C), with a retry of the interrupt sent alongside, and
// resumes it with the very next message, again and again: once orchd
// acknowledged the interrupt and its retry, a2a-go must have let go of
// orchd's execution of the task, so the resume is accepted (not "task
// execution is already in progress") and the task works again. A retry of
// the interrupt once the task works again is answered at once, as a
// duplicate.
func TestInterrupt_ResumedAtOnceOverA2A(t *testing.T) {
	t.Parallel()
	const rounds = 10
	c := testagent.Start(t, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	base := orchdNode(t, "b", "research", registry.Spec{ID: "c", URL: c.URL})
	card, err := (&agentcard.Resolver{}).Resolve(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithCallInterceptors(a2aext.NewActivator(steering.URI)))
	if err != nil {
		t.Fatal(err)
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey"))
	msg.Metadata = map[string]any{a2aserver.SkillMetadataKey: "research"}
	res, err := cl.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("send answered %T", res)
	}
	id := task.ID
	t.Cleanup(func() { _, _ = cl.CancelTask(context.WithoutCancel(t.Context()), &a2a.CancelTaskRequest{ID: id}) })
	waitTask(t, cl, id, a2a.TaskStateWorking)
	interrupt := func(i int) (*a2a.Task, error) {
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(fmt.Sprintf("stop %d", i)))
		m.ID, m.TaskID = fmt.Sprintf("int-%d", i), id
		m.Metadata = map[string]any{steering.ControlKey: string(steering.Interrupt)}
		res, err := cl.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m})
		if err != nil {
			return nil, err
		}
		ack, _ := res.(*a2a.Task)
		if ack == nil {
			return nil, fmt.Errorf("answered %T", res)
		}
		return ack, nil
	}
	for i := range rounds {
		if i > 0 {
			began := time.Now()
			ack, err := interrupt(i - 1)
			r, _ := steering.ReceiptFrom(ack)
			took := time.Since(began)
			if err != nil {
				t.Fatalf("round %d: retry of the last interrupt while the task works again: %v", i, err)
			}
			if !r.Duplicate || ack.Status.State != a2a.TaskStateWorking {
				t.Fatalf("round %d: retry of the last interrupt while the task works again: %s, receipt %+v; want WORKING, a duplicate", i, ack.Status.State, r)
			}
			if took > 2*time.Second {
				t.Fatalf("round %d: retry of the last interrupt while the task works again answered after %v, not at once", i, took)
			}
		}
		acks, errs := make([]*a2a.Task, 2), make([]error, 2)
		var wg sync.WaitGroup
		for k := range acks {
			wg.Go(func() { acks[k], errs[k] = interrupt(i) })
		}
		wg.Wait()
		dups := 0
		for k, ack := range acks {
			if errs[k] != nil {
				t.Fatalf("round %d: interrupt: %v", i, errs[k])
			}
			if ack.Status.State != a2a.TaskStateInputRequired || ack.Metadata[steering.InterruptedKey] != true {
				t.Fatalf("round %d: interrupt acknowledged with %+v", i, ack)
			}
			if r, _ := steering.ReceiptFrom(ack); r.Duplicate {
				dups++
			}
		}
		if dups != 1 {
			t.Errorf("round %d: %d of the interrupt and its retry answered as duplicates, want 1", i, dups)
		}
		resume := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(fmt.Sprintf("go on %d", i)))
		resume.TaskID = id
		res, err = cl.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: resume, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
		if err != nil {
			t.Fatalf("round %d: resume right after the acknowledgement: %v", i, err)
		}
		if got, _ := res.(*a2a.Task); got == nil || got.ID != id {
			t.Fatalf("round %d: resume answered %+v, want task %s", i, res, id)
		}
		waitTask(t, cl, id, a2a.TaskStateWorking)
	}
	if msgs := c.Messages(); len(msgs) != rounds+1 {
		t.Errorf("C ran %d executions, want %d (the first and one per resume)", len(msgs), rounds+1)
	}
	if sigs := c.Signals(); len(sigs) != rounds {
		t.Errorf("C took %d interrupts, want %d (each once)", len(sigs), rounds)
	}
}

// waitTask waits until the A2A task is in state, for up to 10 seconds.
func waitTask(t testing.TB, c *a2aclient.Client, id a2a.TaskID, state a2a.TaskState) {
	t.Helper()
	testwait.Succeeds(t, 10*time.Second, "task "+string(id)+" "+string(state), func() error {
		task, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id})
		if err != nil {
			return err
		}
		if task.Status.State != state {
			return fmt.Errorf("it is %s", task.Status.State)
		}
		return nil
	})
}

// TestSteer_OnlyTheTaskOwnerOnEveryBinding: a steer or an interrupt of
// another tenant's A2A task, over each binding orchd serves, is answered
// as for a task that does not exist, names nothing of the delegation
// behind it, and reaches no agent; the owner's steer is delivered.
func TestSteer_OnlyTheTaskOwnerOnEveryBinding(t *testing.T) {
	t.Parallel()
	c := testagent.Start(t, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	base, _ := grpcDaemon(t, cfg, registry.Spec{ID: "c", URL: c.URL})
	steerable := a2aclient.WithCallInterceptors(a2aext.NewActivator(steering.URI))
	alice := bindingClient(t, base, orchdBindings[0], &http.Client{Transport: bearer{aliceToken}}, steerable)
	res, err := alice.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey")),
		Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("send answered %T", res)
	}
	t.Cleanup(func() {
		_, _ = alice.CancelTask(context.WithoutCancel(t.Context()), &a2a.CancelTaskRequest{ID: task.ID})
	})
	waitTask(t, alice, task.ID, a2a.TaskStateWorking)
	id, _ := taskDelegation(task)

	bobs := map[string]*a2aclient.Client{
		"grpc-1.0": grpcClient(t, base, "1.0", grpc.WithPerRPCCredentials(tokenCredentials(bobToken))),
		"grpc-0.3": grpcClient(t, base, "0.3", grpc.WithPerRPCCredentials(tokenCredentials(bobToken))),
	}
	for _, b := range orchdBindings {
		bobs[b.name] = bindingClient(t, base, b, &http.Client{Transport: bearer{bobToken}}, steerable)
	}
	for name, bob := range bobs {
		for _, control := range []steering.Control{steering.Steer, steering.Interrupt} {
			m := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("mine now"))
			m.Metadata = map[string]any{steering.ControlKey: string(control)}
			_, err := bob.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m})
			if !errors.Is(err, a2a.ErrTaskNotFound) {
				t.Errorf("%s: bob's %s of alice's task: err = %v, want task not found", name, control, err)
				continue
			}
			for _, secret := range []string{id, "WORKING"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("%s: bob's %s of alice's task: err = %v, names %q", name, control, err, secret)
				}
			}
		}
	}
	if sigs := c.Signals(); len(sigs) != 0 {
		t.Fatalf("the agent took %d signals from bob", len(sigs))
	}
	m := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("narrower"))
	m.Metadata = map[string]any{steering.ControlKey: string(steering.Steer)}
	if _, err := alice.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m}); err != nil {
		t.Fatalf("alice's steer: %v", err)
	}
	if sigs := c.TookSignals(t, 1); len(sigs) != 1 || testagent.Text(sigs[0].Message) != "narrower" {
		t.Errorf("the agent took %+v, want alice's steer", sigs)
	}
	if st, err := alice.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID}); err != nil || st.Status.State != a2a.TaskStateWorking {
		t.Errorf("alice's task after bob's interrupts: %+v, %v; want WORKING", st, err)
	}
}
