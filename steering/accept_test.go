package steering_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/steering"
)

// desk is a Steering over a task store holding one WORKING task, t1, for
// tests that hand signals to Accept as the interceptor does, and open the
// task's inbox as its executor does.
type desk struct {
	st    *steering.Steering
	store *taskstore.InMemory
	// ec is the context of an execution of t1 started by no user.
	ec *a2asrv.ExecutorContext
}

// newDesk returns a desk steering with cfg; both modes when cfg sets none.
func newDesk(t *testing.T, cfg steering.Config) *desk {
	t.Helper()
	store := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{})
	task := &a2a.Task{ID: "t1", ContextID: "c1", Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}
	if _, err := store.Create(t.Context(), task); err != nil {
		t.Fatal(err)
	}
	if cfg.Modes == (steering.Modes{}) {
		cfg.Modes = steering.Modes{Steerable: true, Interruptible: true}
	}
	cfg.Tasks = store
	ec := &a2asrv.ExecutorContext{TaskID: "t1", ContextID: "c1", Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("work"))}
	return &desk{st: steering.New(cfg), store: store, ec: ec}
}

// send hands Accept a signal to t1 from user ("" for a call no one
// authenticated) with message id id, the extension activated.
func (d *desk) send(t *testing.T, user string, c steering.Control, text, id string) (*a2a.Task, error) {
	t.Helper()
	ctx, cc := a2asrv.NewCallContext(t.Context(), activated())
	if user != "" {
		cc.User = a2asrv.NewAuthenticatedUser(user, nil)
	}
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	m.ID, m.TaskID = id, "t1"
	return d.st.Accept(ctx, cc, m, c)
}

// setState stores t1 in state, as an executor's event would.
func (d *desk) setState(t *testing.T, state a2a.TaskState) {
	t.Helper()
	stored, err := d.store.Get(t.Context(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	task := *stored.Task
	task.Status = a2a.TaskStatus{State: state}
	if _, err := d.store.Update(t.Context(), &taskstore.UpdateRequest{Task: &task, PrevVersion: stored.Version}); err != nil {
		t.Fatal(err)
	}
}

// accepted sends as send does, and returns the receipt of the
// acknowledgement, failing the test when the signal is refused.
func (d *desk) accepted(t *testing.T, user string, c steering.Control, text, id string) steering.Receipt {
	t.Helper()
	ack, err := d.send(t, user, c, text, id)
	return receipt(t, ack, err)
}

// activated are the service parameters of a call that activates the
// extension, among others.
func activated() *a2asrv.ServiceParams {
	return a2asrv.NewServiceParams(map[string][]string{a2a.SvcParamExtensions: {"urn:other, " + steering.URI}})
}

// receipt reads the receipt of an acknowledgement, failing the test when
// there is none.
func receipt(t *testing.T, ack *a2a.Task, err error) steering.Receipt {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	r, ok := steering.ReceiptFrom(ack)
	if !ok {
		t.Fatalf("acknowledgement without a receipt: %+v", ack.Metadata)
	}
	return r
}

func TestInbox_NextWaitsAndTakesInOrder(t *testing.T) {
	t.Parallel()
	d := newDesk(t, steering.Config{})
	inbox := d.st.Open(d.ec)
	defer inbox.Close()
	type next struct {
		sig steering.Signal
		err error
	}
	first := make(chan next, 1)
	go func() {
		sig, err := inbox.Next(t.Context())
		first <- next{sig, err}
	}()
	d.accepted(t, "", steering.Steer, "narrow to 2025", "s-1")
	d.accepted(t, "", steering.Steer, "primary sources", "s-2")
	var got []string
	select {
	case n := <-first:
		if n.err != nil {
			t.Fatalf("Next: %v", n.err)
		}
		got = append(got, n.sig.Message.Parts[0].Text())
	case <-time.After(10 * time.Second):
		t.Fatal("Next did not return a signal delivered while it waited")
	}
	sig, err := inbox.Next(t.Context())
	if err != nil {
		t.Fatalf("second Next: %v", err)
	}
	got = append(got, sig.Message.Parts[0].Text())
	if diff := cmp.Diff([]string{"narrow to 2025", "primary sources"}, got); diff != "" {
		t.Errorf("signals taken (-want +got):\n%s", diff)
	}
	if sig.Seq != 2 {
		t.Errorf("second signal numbered %d, want 2", sig.Seq)
	}

	// With nothing waiting, Next ends with the cause of its context's end.
	stop := errors.New("the work is done")
	ctx, cancel := context.WithCancelCause(t.Context())
	cancel(stop)
	if _, err := inbox.Next(ctx); !errors.Is(err, stop) {
		t.Errorf("Next on an ended context = %v, want %v", err, stop)
	}
}

func TestInbox_CloseHandsBackUntakenSignals(t *testing.T) {
	t.Parallel()
	d := newDesk(t, steering.Config{})
	inbox := d.st.Open(d.ec)
	d.accepted(t, "", steering.Steer, "narrow to 2025", "s-1")

	untaken := inbox.Close()
	if len(untaken) != 1 {
		t.Fatalf("Close handed back %d signals, want the acknowledged steer", len(untaken))
	}
	if sig := untaken[0]; sig.Message.Parts[0].Text() != "narrow to 2025" || sig.Seq != 1 {
		t.Fatalf("Close handed back %q numbered %d, want the steer, 1", sig.Message.Parts[0].Text(), sig.Seq)
	}
	if again := inbox.Close(); len(again) != 0 {
		t.Errorf("a second Close handed back %+v, want nothing", again)
	}
	select {
	case <-inbox.Done():
	default:
		t.Error("Done is not closed after Close")
	}
	if got := inbox.Take(); len(got) != 0 {
		t.Errorf("Take after Close = %+v, want nothing", got)
	}

	// A new signal is refused; a retry of one the closed inbox took is
	// acknowledged again, as a duplicate, and queued nowhere.
	_, err := d.send(t, "", steering.Steer, "use primary sources", "s-2")
	if !errors.Is(err, a2a.ErrUnsupportedOperation) || !strings.Contains(err.Error(), "not taking steering signals") {
		t.Errorf("steer after Close: %v, want it refused as not taken", err)
	}
	r := d.accepted(t, "", steering.Steer, "narrow to 2025", "s-1")
	if !r.Duplicate || r.Seq != 1 {
		t.Errorf("retry after Close: receipt %+v, want a duplicate of 1", r)
	}
}

// TestOpen_NumberingFollowsTheTaskAndItsOwner: an execution that opens the
// inbox of a task whose earlier execution closed one goes on numbering
// and knows the message ids it took, when the same user started it; one
// that another user started starts afresh.
func TestOpen_NumberingFollowsTheTaskAndItsOwner(t *testing.T) {
	t.Parallel()
	d := newDesk(t, steering.Config{})
	first := d.st.Open(d.ec)
	d.accepted(t, "", steering.Steer, "one", "s-1")
	d.accepted(t, "", steering.Steer, "two", "s-2")
	first.Close()

	again := d.st.Open(d.ec)
	if r := d.accepted(t, "", steering.Steer, "three", "s-3"); r.Seq != 3 || r.Duplicate {
		t.Errorf("first signal of the next execution: receipt %+v, want 3", r)
	}
	if r := d.accepted(t, "", steering.Steer, "one", "s-1"); r.Seq != 1 || !r.Duplicate {
		t.Errorf("retry of the first execution's signal: receipt %+v, want a duplicate of 1", r)
	}
	if got := again.Take(); len(got) != 1 {
		t.Errorf("the next execution took %d signals, want 1 (the retry not again)", len(got))
	}
	again.Close()

	bobs := *d.ec
	bobs.User = a2asrv.NewAuthenticatedUser("bob", nil)
	inbox := d.st.Open(&bobs)
	defer inbox.Close()
	if r := d.accepted(t, "bob", steering.Steer, "one", "s-1"); r.Seq != 1 || r.Duplicate {
		t.Errorf("bob's first signal: receipt %+v, want 1, not a duplicate of another user's", r)
	}
	if _, err := d.send(t, "", steering.Steer, "four", "s-4"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("a signal from the earlier owner to bob's execution: %v, want task not found", err)
	}
}

// TestAccept_InterruptSettlesWithinSettleTimeout: an interrupt the
// executor does not act on is acknowledged once SettleTimeout passed, not
// before, and not never.
func TestAccept_InterruptSettlesWithinSettleTimeout(t *testing.T) {
	t.Parallel()
	const settle = 300 * time.Millisecond
	d := newDesk(t, steering.Config{SettleTimeout: settle})
	inbox := d.st.Open(d.ec)
	defer inbox.Close()
	// A context that ends keeps a settle that never gives up from hanging
	// the test: it ends the wait, late, and the check below fails.
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	ctx, cc := a2asrv.NewCallContext(ctx, activated())
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("stop"))
	m.TaskID = "t1"
	began := time.Now()
	ack, err := d.st.Accept(ctx, cc, m, steering.Interrupt)
	took := time.Since(began)
	r := receipt(t, ack, err)
	if took < settle {
		t.Errorf("acknowledged after %v, before the executor stopped or SettleTimeout (%v) passed", took, settle)
	}
	if took > 10*time.Second {
		t.Errorf("acknowledged after %v, long after SettleTimeout (%v)", took, settle)
	}
	if r.Control != steering.Interrupt || r.Seq != 1 {
		t.Errorf("receipt %+v, want interrupt 1", r)
	}
	if ack.Status.State != a2a.TaskStateWorking {
		t.Errorf("acknowledged task is %s, want still WORKING: nothing stopped it", ack.Status.State)
	}
}

// TestAccept_InterruptWithoutExecutorInterceptor: without the executor
// interceptor, an interrupt is acknowledged once the executor closed its
// inbox and the task's new state is stored, and the acknowledgement
// carries that state.
func TestAccept_InterruptWithoutExecutorInterceptor(t *testing.T) {
	t.Parallel()
	d := newDesk(t, steering.Config{SettleTimeout: time.Minute})
	inbox := d.st.Open(d.ec)
	type answer struct {
		ack *a2a.Task
		err error
	}
	acked := make(chan answer, 1)
	go func() {
		ctx, cc := a2asrv.NewCallContext(t.Context(), activated())
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("stop"))
		m.TaskID = "t1"
		ack, err := d.st.Accept(ctx, cc, m, steering.Interrupt)
		acked <- answer{ack, err}
	}()
	// The executor takes the interrupt and closes its inbox; its final
	// event is stored a moment later.
	select {
	case <-inbox.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the interrupt never reached the inbox")
	}
	inbox.Take()
	inbox.Close()
	select {
	case a := <-acked:
		t.Fatalf("acknowledged before the task's new state was stored: %+v, %v", a.ack, a.err)
	case <-time.After(100 * time.Millisecond):
	}
	d.setState(t, a2a.TaskStateInputRequired)
	var a answer
	select {
	case a = <-acked:
	case <-time.After(10 * time.Second):
		t.Fatal("not acknowledged after the task's new state was stored")
	}
	if r := receipt(t, a.ack, a.err); r.Control != steering.Interrupt || r.Seq != 1 {
		t.Errorf("receipt %+v, want interrupt 1", r)
	}
	if a.ack.Status.State != a2a.TaskStateInputRequired {
		t.Errorf("acknowledged task is %s, want the stored INPUT_REQUIRED", a.ack.Status.State)
	}
}

// TestAccept_TaskWithoutInbox: a signal to a task whose executor opened no
// inbox is refused, saying why: it is not WORKING, or its executor takes
// no signals.
func TestAccept_TaskWithoutInbox(t *testing.T) {
	t.Parallel()
	d := newDesk(t, steering.Config{})
	_, err := d.send(t, "", steering.Steer, "narrow", "")
	if !errors.Is(err, a2a.ErrUnsupportedOperation) || !strings.Contains(err.Error(), "is WORKING but its executor is not taking steering signals") {
		t.Errorf("steer to a WORKING task with no inbox: %v", err)
	}
	d.setState(t, a2a.TaskStateCompleted)
	_, err = d.send(t, "", steering.Interrupt, "stop", "")
	if !errors.Is(err, a2a.ErrUnsupportedOperation) || !strings.Contains(err.Error(), "is TASK_STATE_COMPLETED: only a WORKING task") {
		t.Errorf("interrupt of a completed task: %v", err)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	both := steering.Modes{Steerable: true, Interruptible: true}
	for _, tc := range []struct {
		name    string
		params  *a2asrv.ServiceParams
		control steering.Control
		modes   steering.Modes
		task    a2a.TaskID
		want    error // nil for a message taken
		msg     string
	}{
		{"steer", activated(), steering.Steer, both, "t1", nil, ""},
		{"interrupt", activated(), steering.Interrupt, steering.Modes{Interruptible: true}, "t1", nil, ""},
		{"not activated", a2asrv.NewServiceParams(nil), steering.Steer, both, "t1", a2a.ErrUnsupportedOperation, "was not activated"},
		{"another extension activated", a2asrv.NewServiceParams(map[string][]string{a2a.SvcParamExtensions: {"urn:other"}}), steering.Steer, both, "t1",
			a2a.ErrUnsupportedOperation, "was not activated"},
		{"unknown control", activated(), "pause", both, "t1", a2a.ErrInvalidParams, `unknown steering control "pause"`},
		{"steer not advertised", activated(), steering.Steer, steering.Modes{Interruptible: true}, "t1", a2a.ErrUnsupportedOperation, "the steerable mode"},
		{"interrupt not advertised", activated(), steering.Interrupt, steering.Modes{Steerable: true}, "t1", a2a.ErrUnsupportedOperation, "the interruptible mode"},
		{"no task", activated(), steering.Interrupt, both, "", a2a.ErrInvalidParams, "needs the taskId of the task to interrupt"},
	} {
		_, cc := a2asrv.NewCallContext(t.Context(), tc.params)
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x"))
		m.TaskID = tc.task
		err := steering.Check(cc, m, tc.control, tc.modes)
		switch {
		case tc.want == nil && err != nil:
			t.Errorf("%s: %v, want it taken", tc.name, err)
		case tc.want != nil && (!errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.msg)):
			t.Errorf("%s: %v, want %v saying %q", tc.name, err, tc.want, tc.msg)
		}
	}
}

func TestControlOf(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		metadata map[string]any
		want     steering.Control
		ok       bool
	}{
		{"ordinary message", nil, "", false},
		{"other metadata", map[string]any{"k": "steer"}, "", false},
		{"steer", map[string]any{steering.ControlKey: "steer"}, steering.Steer, true},
		{"interrupt", map[string]any{steering.ControlKey: "interrupt"}, steering.Interrupt, true},
		// A control that is not a string is still a control, one Check
		// refuses as unknown.
		{"not a string", map[string]any{steering.ControlKey: 1}, "", true},
	} {
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x"))
		m.Metadata = tc.metadata
		if c, ok := steering.ControlOf(m); c != tc.want || ok != tc.ok {
			t.Errorf("%s: ControlOf = %q, %v; want %q, %v", tc.name, c, ok, tc.want, tc.ok)
		}
	}
	if c, ok := steering.ControlOf(nil); c != "" || ok {
		t.Errorf("ControlOf(nil) = %q, %v", c, ok)
	}
}

func TestModes(t *testing.T) {
	t.Parallel()
	for _, m := range []steering.Modes{{}, {Steerable: true}, {Interruptible: true}, {Steerable: true, Interruptible: true}} {
		if got := m.Allows(steering.Steer); got != m.Steerable {
			t.Errorf("%+v allows a steer: %v", m, got)
		}
		if got := m.Allows(steering.Interrupt); got != m.Interruptible {
			t.Errorf("%+v allows an interrupt: %v", m, got)
		}
		if m.Allows("pause") {
			t.Errorf("%+v allows an unknown control", m)
		}
		ext := m.Extension()
		want := map[string]any{"steerable": m.Steerable, "interruptible": m.Interruptible}
		if ext.URI != steering.URI || !cmp.Equal(ext.Params, want) {
			t.Errorf("%+v declared as %s %v, want %s %v", m, ext.URI, ext.Params, steering.URI, want)
		}
	}
}

func TestAcknowledgement_LeavesTheTaskAlone(t *testing.T) {
	t.Parallel()
	task := &a2a.Task{ID: "t1", History: []*a2a.Message{a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("work"))},
		Metadata: map[string]any{"k": "v"}}
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("narrow"))
	r := steering.Receipt{Control: steering.Steer, MessageID: m.ID, Seq: 4, ReferenceMessageID: "out-1",
		Hops: []steering.Hop{{Agent: "a", Seq: 4}, {Agent: "b", Seq: 2}}, Duplicate: true}
	ack := steering.Acknowledgement(task, m, r)
	if len(task.History) != 1 || len(task.Metadata) != 1 {
		t.Errorf("the task given changed: history %d, metadata %v", len(task.History), task.Metadata)
	}
	if n := len(ack.History); n != 2 || ack.History[n-1] != m {
		t.Errorf("acknowledgement's history ends %+v, want the signal", ack.History[n-1])
	}
	if ack.Metadata["k"] != "v" {
		t.Errorf("acknowledgement lost the task's metadata: %v", ack.Metadata)
	}
	back, ok := steering.ReceiptFrom(ack)
	if !ok {
		t.Fatal("no receipt in the acknowledgement")
	}
	if diff := cmp.Diff(r, back); diff != "" {
		t.Errorf("receipt read back (-put +read):\n%s", diff)
	}
}
