package steering_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aext"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.uber.org/goleak"

	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/steering"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// worker is a steerable a2a-go executor: it works until a steer says
// "finish" or it is interrupted, and records every steer it took. With
// hold set, it reports each interrupt it takes on interrupted and stops
// only once hold is closed.
type worker struct {
	st   *steering.Steering
	mu   sync.Mutex
	took []steering.Signal

	hold        <-chan struct{}
	interrupted chan<- struct{}
}

func (w *worker) record(s steering.Signal) {
	w.mu.Lock()
	w.took = append(w.took, s)
	w.mu.Unlock()
}

func (w *worker) signals() []steering.Signal {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]steering.Signal(nil), w.took...)
}

func (w *worker) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		inbox := w.st.Open(ec)
		defer inbox.Close()
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-inbox.Ready():
			}
			sigs := inbox.Take()
			for i := 0; i < len(sigs); i++ {
				sig := sigs[i]
				w.record(sig)
				if sig.Control == steering.Interrupt {
					if w.hold != nil {
						w.interrupted <- struct{}{}
						select {
						case <-w.hold:
						case <-ctx.Done():
						}
					}
					// Signals acknowledged meanwhile must be handled too.
					for _, late := range inbox.Close() {
						w.record(late)
					}
					yield(inbox.Interrupted(ec, "stopped as asked"), nil)
					return
				}
				if !yield(steering.Acknowledged(ec, sig), nil) {
					return
				}
				if textOf(sig.Message) == "finish" {
					for _, late := range inbox.Close() {
						w.record(late)
					}
					yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("finished"))), nil)
					return
				}
			}
		}
	}
}

func (w *worker) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func textOf(m *a2a.Message) string {
	var s []string
	for _, p := range m.Parts {
		if t, ok := p.Content.(a2a.Text); ok {
			s = append(s, string(t))
		}
	}
	return strings.Join(s, " ")
}

// agent serves a worker with the given modes on 127.0.0.1, with any extra
// handler options.
func agent(t *testing.T, modes steering.Modes, extra ...a2asrv.RequestHandlerOption) (*worker, *a2a.AgentCard) {
	t.Helper()
	w := &worker{}
	return w, serve(t, w, modes, extra...)
}

// serve serves w, giving it its steering.
func serve(t *testing.T, w *worker, modes steering.Modes, extra ...a2asrv.RequestHandlerOption) *a2a.AgentCard {
	t.Helper()
	return serveWith(t, w, steering.Config{Modes: modes}, extra...)
}

// serveWith is serve with its steering configured as cfg says, besides
// its name, its task store and a settle timeout of 5 s.
func serveWith(t *testing.T, w *worker, cfg steering.Config, extra ...a2asrv.RequestHandlerOption) *a2a.AgentCard {
	t.Helper()
	store := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})
	cfg.Name, cfg.Tasks, cfg.SettleTimeout = "worker", store, 5*time.Second
	st := steering.New(cfg)
	w.st = st
	opts := append(extra, a2asrv.WithTaskStore(store), a2asrv.WithCallInterceptors(st.Interceptor()),
		a2asrv.WithExecutorContextInterceptor(st.ExecutorInterceptor()))
	handler := a2asrv.NewHandler(w, opts...)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.Handle("/rpc", steering.Echo(a2asrv.NewJSONRPCHandler(handler)))
	card := &a2a.AgentCard{Name: "Worker", SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL+"/rpc", a2a.TransportProtocolJSONRPC)},
		Capabilities: a2a.AgentCapabilities{Extensions: []a2a.AgentExtension{st.Extension()}}}
	return card
}

// client is a client of the agent with the card, activating the
// extension if asked, with any extra options.
func client(t *testing.T, card *a2a.AgentCard, activate bool, extra ...a2aclient.FactoryOption) *a2aclient.Client {
	t.Helper()
	opts := extra
	if activate {
		opts = append(opts, a2aclient.WithCallInterceptors(a2aext.NewActivator(steering.URI)))
	}
	c, err := a2aclient.NewFromCard(t.Context(), card, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// start begins a task, with push notifications to hook if it is not nil,
// and returns its id once it is WORKING.
func start(t *testing.T, c *a2aclient.Client, hook *a2a.PushConfig) a2a.TaskID {
	t.Helper()
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("research")),
		Config: &a2a.SendMessageConfig{ReturnImmediately: true, PushConfig: hook}})
	if err != nil {
		t.Fatal(err)
	}
	id := res.(*a2a.Task).ID
	waitState(t, c, id, a2a.TaskStateWorking)
	return id
}

// waitState waits until the task is in state.
func waitState(t *testing.T, c *a2aclient.Client, id a2a.TaskID, state a2a.TaskState) *a2a.Task {
	t.Helper()
	var task *a2a.Task
	testwait.Succeeds(t, 10*time.Second, "task "+string(id)+" "+string(state), func() error {
		var err error
		task, err = c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id})
		switch {
		case err != nil:
			return err
		case task.Status.State != state:
			return fmt.Errorf("it is %s", task.Status.State)
		}
		return nil
	})
	return task
}

func signal(t *testing.T, c *a2aclient.Client, id a2a.TaskID, control steering.Control, text, msgID string) (*a2a.Task, error) {
	t.Helper()
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	if msgID != "" {
		m.ID = msgID
	}
	m.TaskID = id
	m.Metadata = map[string]any{steering.ControlKey: string(control), steering.ReferenceKey: "out-7"}
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m})
	if err != nil {
		return nil, err
	}
	return res.(*a2a.Task), nil
}

func TestSteer_DeliveredInOrderOnceAndAcknowledged(t *testing.T) {
	t.Parallel()
	w, card := agent(t, steering.Modes{Steerable: true, Interruptible: true})
	c := client(t, card, true)
	id := start(t, c, nil)

	var acks []*a2a.Task
	for i, text := range []string{"narrow to 2025", "use primary sources", "prefer green"} {
		ack, err := signal(t, c, id, steering.Steer, text, "steer-"+string(rune('a'+i)))
		if err != nil {
			t.Fatal(err)
		}
		acks = append(acks, ack)
	}
	// A retried steer (same message id) is acknowledged with the same
	// receipt and not delivered again.
	dup, err := signal(t, c, id, steering.Steer, "narrow to 2025", "steer-a")
	if err != nil {
		t.Fatal(err)
	}
	for i, ack := range acks {
		r, ok := steering.ReceiptFrom(ack)
		if !ok {
			t.Fatalf("ack %d carries no receipt: %+v", i, ack.Metadata)
		}
		seq := int64(i + 1)
		want := steering.Receipt{Control: steering.Steer, Seq: seq, ReferenceMessageID: "out-7", Hops: []steering.Hop{{Agent: "worker", Seq: seq}}}
		if diff := cmp.Diff(want, r, cmpopts.IgnoreFields(steering.Receipt{}, "MessageID")); diff != "" {
			t.Errorf("receipt %d (-want +got):\n%s", i, diff)
		}
		if ack.Status.State != a2a.TaskStateWorking || textOf(ack.History[len(ack.History)-1]) == "" {
			t.Errorf("ack %d: state %s, history %d", i, ack.Status.State, len(ack.History))
		}
	}
	if r, _ := steering.ReceiptFrom(dup); !r.Duplicate || r.Seq != 1 {
		t.Errorf("retry receipt = %+v", r)
	}
	if _, err := signal(t, c, id, steering.Steer, "finish", "steer-z"); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "the executor taking 4 signals", func() bool { return len(w.signals()) >= 4 })
	got := w.signals()
	if len(got) != 4 {
		t.Fatalf("executor took %d signals, want 4 (3 steers and finish, the retry not again)", len(got))
	}
	for i, s := range got {
		if s.Seq != int64(i+1) {
			t.Errorf("signal %d has seq %d: out of order", i, s.Seq)
		}
	}
	// The steers are in the task's history: each became a status message.
	task := waitState(t, c, id, a2a.TaskStateCompleted)
	var hist []string
	for _, m := range task.History {
		hist = append(hist, textOf(m))
	}
	if !strings.Contains(strings.Join(hist, "|"), "narrow to 2025|use primary sources|prefer green") {
		t.Errorf("history = %q", hist)
	}
}

func TestInterrupt_SettlesAndResumes(t *testing.T) {
	t.Parallel()
	_, card := agent(t, steering.Modes{Interruptible: true})
	c := client(t, card, true)
	id := start(t, c, nil)
	ack, err := signal(t, c, id, steering.Interrupt, "stop, the premise changed", "")
	if err != nil {
		t.Fatal(err)
	}
	if ack.Status.State != a2a.TaskStateInputRequired || ack.Metadata[steering.InterruptedKey] != true {
		t.Errorf("interrupt ack: state %s, metadata %v", ack.Status.State, ack.Metadata)
	}
	if r, ok := steering.ReceiptFrom(ack); !ok {
		t.Errorf("interrupt ack carries no receipt: %+v", ack.Metadata)
	} else if r.Control != steering.Interrupt || r.Seq != 1 {
		t.Errorf("interrupt receipt = %+v, want interrupt 1", r)
	}
	// The next ordinary message resumes the same task.
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: &a2a.Message{ID: a2a.NewMessageID(), Role: a2a.MessageRoleUser, TaskID: id,
		Parts: a2a.ContentParts{a2a.NewTextPart("go on with the new premise")}}, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	if res.(*a2a.Task).ID != id {
		t.Errorf("resumed a different task")
	}
	// Numbering continues across the resumption.
	testwait.Succeeds(t, 10*time.Second, "the second interrupt acknowledged", func() error {
		ack, err = signal(t, c, id, steering.Interrupt, "again", "")
		return err
	})
	if r, _ := steering.ReceiptFrom(ack); r.Seq != 2 {
		t.Errorf("second interrupt seq = %d, want 2", r.Seq)
	}
}

// forgotten serves w remembering one closed inbox, starts a task, steers
// it (message id s-1) and interrupts it (i-1), then starts and interrupts
// another task, so the agent forgets the first one's inbox. It returns a
// client of the agent and the first task's id.
func forgotten(t *testing.T, w *worker) (*a2aclient.Client, a2a.TaskID) {
	t.Helper()
	card := serveWith(t, w, steering.Config{Modes: steering.Modes{Steerable: true, Interruptible: true}, Remember: 1})
	c := client(t, card, true)
	id := start(t, c, nil)
	if _, err := signal(t, c, id, steering.Steer, "narrower", "s-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := signal(t, c, id, steering.Interrupt, "stop", "i-1"); err != nil {
		t.Fatal(err)
	}
	other := start(t, c, nil)
	if _, err := signal(t, c, other, steering.Interrupt, "stop too", ""); err != nil {
		t.Fatal(err)
	}
	return c, id
}

// resumeAndSignal answers the interrupted task id, so a new execution
// resumes it, and returns the acknowledgement of the signal, sent again
// until that execution takes it.
func resumeAndSignal(t *testing.T, c *a2aclient.Client, id a2a.TaskID, control steering.Control, text, msgID string) *a2a.Task {
	t.Helper()
	if _, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: &a2a.Message{ID: a2a.NewMessageID(), Role: a2a.MessageRoleUser, TaskID: id,
		Parts: a2a.ContentParts{a2a.NewTextPart("go on")}}, Config: &a2a.SendMessageConfig{ReturnImmediately: true}}); err != nil {
		t.Fatal(err)
	}
	var ack *a2a.Task
	testwait.Succeeds(t, 10*time.Second, "the resumed task's "+string(control)+" acknowledged", func() error {
		var err error
		ack, err = signal(t, c, id, control, text, msgID)
		return err
	})
	return ack
}

// TestInterrupt_NumberingSurvivesForgetting interrupts a task after a
// steer, then lets the agent forget its inbox (it remembers one, and
// another task's closes after), and resumes it: the next signal is
// numbered after the interrupt, from the number the interrupted status
// stored with the task (SeqKey), not from 1 again.
func TestInterrupt_NumberingSurvivesForgetting(t *testing.T) {
	t.Parallel()
	c, id := forgotten(t, &worker{})
	ack := resumeAndSignal(t, c, id, steering.Interrupt, "stop again", "")
	if r, _ := steering.ReceiptFrom(ack); r.Seq != 3 {
		t.Errorf("the resumed task's first signal is numbered %d, want 3", r.Seq)
	}
}

// TestRetry_KnownOnceForgotten retries a task's signals after the agent
// forgot its inbox (Remember: 1, another task's inbox closed in between):
// while the task waits, and once it resumed. Each retry is answered with
// its first receipt, marked duplicate, and nothing is delivered twice.
func TestRetry_KnownOnceForgotten(t *testing.T) {
	t.Parallel()
	w := &worker{}
	c, id := forgotten(t, w)
	retry := func(when string, control steering.Control, text, msgID string, seq int64) {
		t.Helper()
		ack, err := signal(t, c, id, control, text, msgID)
		if err != nil {
			t.Fatalf("%s, retry of %s: %v", when, msgID, err)
		}
		want := steering.Receipt{Control: control, MessageID: msgID, Seq: seq, ReferenceMessageID: "out-7",
			Hops: []steering.Hop{{Agent: "worker", Seq: seq}}, Duplicate: true}
		if r, _ := steering.ReceiptFrom(ack); !cmp.Equal(r, want) {
			t.Errorf("%s, retry of %s: receipt (-want +got):\n%s", when, msgID, cmp.Diff(want, r))
		}
	}
	retry("while the task waits", steering.Steer, "narrower", "s-1", 1)
	retry("while the task waits", steering.Interrupt, "stop", "i-1", 2)

	ack := resumeAndSignal(t, c, id, steering.Steer, "wider", "s-2")
	if r, _ := steering.ReceiptFrom(ack); r.Seq != 3 || r.Duplicate {
		t.Fatalf("the resumed task's first steer: seq %d, duplicate %t; want 3, false", r.Seq, r.Duplicate)
	}
	retry("once the task resumed", steering.Steer, "narrower", "s-1", 1)
	if _, err := signal(t, c, id, steering.Steer, "finish", "s-3"); err != nil {
		t.Fatal(err)
	}
	waitState(t, c, id, a2a.TaskStateCompleted)

	var took []string
	for _, sig := range w.signals() {
		if sig.Message.TaskID == id {
			took = append(took, sig.Message.ID)
		}
	}
	if want := []string{"s-1", "i-1", "s-2", "s-3"}; !slices.Equal(took, want) {
		t.Errorf("the worker took %q, want %q", took, want)
	}
}

// TestInterrupt_AcknowledgedOnceReleased holds a2a-go after it stored the
// interrupted state but before it released the execution (it is sending
// the push notification of that state): the interrupt must not be
// acknowledged meanwhile, and once it is, a message sent at once resumes
// the task.
func TestInterrupt_AcknowledgedOnceReleased(t *testing.T) {
	t.Parallel()
	held, release := make(chan struct{}), make(chan struct{})
	var holdOnce, releaseOnce sync.Once
	letGo := func() { releaseOnce.Do(func() { close(release) }) }
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil || !bytes.Contains(body, []byte(a2a.TaskStateInputRequired)) {
			return
		}
		holdOnce.Do(func() {
			close(held)
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
	}))
	t.Cleanup(hook.Close)
	_, card := agent(t, steering.Modes{Interruptible: true},
		a2asrv.WithPushNotifications(push.NewInMemoryStore(), push.NewHTTPPushSender(&push.HTTPSenderConfig{AllowPrivateNetworks: true, Timeout: 10 * time.Second})))
	t.Cleanup(letGo) // before the servers close, which wait for held requests
	c := client(t, card, true)
	id := start(t, c, &a2a.PushConfig{URL: hook.URL})

	type answer struct {
		ack *a2a.Task
		err error
	}
	acked := make(chan answer, 1)
	go func() {
		ack, err := signal(t, c, id, steering.Interrupt, "stop", "")
		acked <- answer{ack, err}
	}()
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("no push notification of the interrupted state")
	}
	select {
	case a := <-acked:
		t.Fatalf("interrupt answered while a2a-go still held the execution (error %v)", a.err)
	case <-time.After(100 * time.Millisecond):
	}
	letGo()
	var a answer
	select {
	case a = <-acked:
	case <-time.After(5 * time.Second):
		t.Fatal("interrupt not acknowledged after a2a-go released the execution")
	}
	if a.err != nil {
		t.Fatal(a.err)
	}
	if a.ack.Status.State != a2a.TaskStateInputRequired || a.ack.Metadata[steering.InterruptedKey] != true {
		t.Errorf("interrupt ack: state %s, metadata %v", a.ack.Status.State, a.ack.Metadata)
	}
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: &a2a.Message{ID: a2a.NewMessageID(), Role: a2a.MessageRoleUser, TaskID: id,
		Parts: a2a.ContentParts{a2a.NewTextPart("go on")}}, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatalf("resume right after the acknowledgement: %v", err)
	}
	if res.(*a2a.Task).ID != id {
		t.Errorf("resumed a different task")
	}
	if _, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: id}); err != nil {
		t.Fatal(err)
	}
}

// TestInterrupt_RetryAcknowledgedOnceSettled retries an interrupt (same
// message id) while the executor that took it is still stopping, and again
// after the task settled: each retry is acknowledged as a duplicate of the
// first, like it only once the task settled, and the interrupt is
// delivered once; the next message resumes the task.
func TestInterrupt_RetryAcknowledgedOnceSettled(t *testing.T) {
	t.Parallel()
	hold, interrupted := make(chan struct{}), make(chan struct{}, 1)
	var once sync.Once
	letGo := func() { once.Do(func() { close(hold) }) }
	w := &worker{hold: hold, interrupted: interrupted}
	card := serve(t, w, steering.Modes{Interruptible: true})
	t.Cleanup(letGo) // before the server closes, which waits for the held executor
	c := client(t, card, true)
	id := start(t, c, nil)

	type answer struct {
		ack *a2a.Task
		err error
	}
	send := func() <-chan answer {
		ch := make(chan answer, 1)
		go func() {
			ack, err := signal(t, c, id, steering.Interrupt, "stop", "int-1")
			ch <- answer{ack, err}
		}()
		return ch
	}
	first := send()
	select {
	case <-interrupted:
	case <-time.After(5 * time.Second):
		t.Fatal("the executor did not take the interrupt")
	}
	retry := send()
	select {
	case a := <-retry:
		t.Fatalf("retry answered while the executor was still stopping: %v, error %v", a.ack, a.err)
	case a := <-first:
		t.Fatalf("interrupt answered while the executor was still stopping: %v, error %v", a.ack, a.err)
	case <-time.After(100 * time.Millisecond):
	}
	letGo()
	for name, ch := range map[string]<-chan answer{"interrupt": first, "retry": retry} {
		var a answer
		select {
		case a = <-ch:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s not acknowledged", name)
		}
		if a.err != nil {
			t.Fatalf("%s: %v", name, a.err)
		}
		if a.ack.Status.State != a2a.TaskStateInputRequired || a.ack.Metadata[steering.InterruptedKey] != true {
			t.Errorf("%s ack: state %s, metadata %v; want input required, interrupted", name, a.ack.Status.State, a.ack.Metadata)
		}
		if r, _ := steering.ReceiptFrom(a.ack); r.Seq != 1 || r.Duplicate != (name == "retry") {
			t.Errorf("%s ack: receipt %+v, want 1, a duplicate only for the retry", name, r)
		}
	}
	// A retry after the task settled is a duplicate too, not a refusal.
	late, err := signal(t, c, id, steering.Interrupt, "stop", "int-1")
	if err != nil {
		t.Fatalf("retry after the task settled: %v", err)
	}
	if late.Status.State != a2a.TaskStateInputRequired {
		t.Errorf("late retry ack: state %s, want input required", late.Status.State)
	}
	if r, _ := steering.ReceiptFrom(late); !r.Duplicate || r.Seq != 1 {
		t.Errorf("late retry ack: receipt %+v, want a duplicate of 1", r)
	}
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: &a2a.Message{ID: a2a.NewMessageID(), Role: a2a.MessageRoleUser, TaskID: id,
		Parts: a2a.ContentParts{a2a.NewTextPart("go on")}}, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatalf("resume right after the acknowledgements: %v", err)
	}
	if res.(*a2a.Task).ID != id {
		t.Errorf("resumed a different task")
	}
	// Once the task works again, a retry of the old interrupt is answered
	// at once, and does not stop the new execution.
	waitState(t, c, id, a2a.TaskStateWorking)
	began := time.Now()
	old, err := signal(t, c, id, steering.Interrupt, "stop", "int-1")
	if err != nil {
		t.Fatalf("retry while the task works again: %v", err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Errorf("retry while the task works again answered after %v, want at once", took)
	}
	if old.Status.State != a2a.TaskStateWorking {
		t.Errorf("retry while the task works again: state %s, want it still working", old.Status.State)
	}
	if r, _ := steering.ReceiptFrom(old); !r.Duplicate || r.Seq != 1 {
		t.Errorf("retry while the task works again: receipt %+v, want a duplicate of 1", r)
	}
	if got := w.signals(); len(got) != 1 {
		t.Errorf("executor took %d signals, want the interrupt once", len(got))
	}
	if _, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: id}); err != nil {
		t.Fatal(err)
	}
}

func TestSteer_Refusals(t *testing.T) {
	t.Parallel()
	_, card := agent(t, steering.Modes{Interruptible: true})
	c := client(t, card, true)
	id := start(t, c, nil)
	tests := []struct {
		name    string
		c       *a2aclient.Client
		task    a2a.TaskID
		control steering.Control
		want    error
		msg     string
	}{
		{"not activated", client(t, card, false), id, steering.Steer, a2a.ErrUnsupportedOperation, "was not activated"},
		{"mode not advertised", c, id, steering.Steer, a2a.ErrUnsupportedOperation, "does not advertise the steerable mode"},
		{"unknown control", c, id, "pause", a2a.ErrInvalidParams, `unknown steering control "pause"`},
		{"unknown task", c, "nope", steering.Interrupt, a2a.ErrTaskNotFound, "not found"},
	}
	for _, tt := range tests {
		_, err := signal(t, tt.c, tt.task, tt.control, "x", "")
		if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: err = %v, want %v containing %q", tt.name, err, tt.want, tt.msg)
		}
	}
	// A finished task cannot be interrupted.
	if _, err := signal(t, c, id, steering.Interrupt, "stop", ""); err != nil {
		t.Fatal(err)
	}
	cancelInterrupted(t, c, id)
	if _, err := signal(t, c, id, steering.Interrupt, "stop", ""); !errors.Is(err, a2a.ErrUnsupportedOperation) || !strings.Contains(err.Error(), "TASK_STATE_CANCELED") {
		t.Errorf("interrupt of a canceled task: err = %v", err)
	}
}

// userHeader names the caller to the agents of TestSignal_OnlyFromTheTaskOwner,
// as an authenticating middleware would.
const userHeader = "X-Test-User"

// namedUser makes the user userHeader names the call's user.
type namedUser struct {
	a2asrv.PassthroughCallInterceptor
}

func (namedUser) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	if v, ok := cc.ServiceParams().Get(userHeader); ok && len(v) > 0 {
		cc.User = a2asrv.NewAuthenticatedUser(v[0], nil)
	}
	return ctx, nil, nil
}

// asUser is a client option sending userHeader.
func asUser(name string) a2aclient.FactoryOption {
	return a2aclient.WithCallInterceptors(a2aext.NewActivator(steering.URI), userParam(name))
}

// userParam sends userHeader with every call.
type userParam string

func (u userParam) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	req.ServiceParams.Append(userHeader, string(u))
	return ctx, nil, nil
}

func (userParam) After(context.Context, *a2aclient.Response) error { return nil }

// TestSignal_OnlyFromTheTaskOwner: a steer or interrupt from a user other
// than the one whose call started the task is answered as for a task that
// does not exist, and reaches nothing, while the task runs and after its
// execution took a signal; the owner's signals are delivered.
func TestSignal_OnlyFromTheTaskOwner(t *testing.T) {
	t.Parallel()
	w, card := agent(t, steering.Modes{Steerable: true, Interruptible: true}, a2asrv.WithCallInterceptors(namedUser{}))
	alice, bob := client(t, card, false, asUser("alice")), client(t, card, false, asUser("bob"))
	id := start(t, alice, nil)
	for _, c := range []steering.Control{steering.Steer, steering.Interrupt} {
		_, err := signal(t, bob, id, c, "mine now", "bob-"+string(c))
		if !errors.Is(err, a2a.ErrTaskNotFound) || strings.Contains(err.Error(), "WORKING") {
			t.Errorf("bob's %s of alice's task: err = %v, want task not found", c, err)
		}
	}
	if _, err := signal(t, alice, id, steering.Steer, "narrower", "alice-1"); err != nil {
		t.Fatalf("alice's steer: %v", err)
	}
	// A retry of alice's message id by bob learns nothing of its receipt.
	if ack, err := signal(t, bob, id, steering.Steer, "narrower", "alice-1"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's retry of alice's steer = %+v, %v; want task not found", ack, err)
	}
	if _, err := signal(t, alice, id, steering.Interrupt, "stop", "alice-2"); err != nil {
		t.Fatalf("alice's interrupt: %v", err)
	}
	if ack, err := signal(t, bob, id, steering.Interrupt, "stop", "alice-2"); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's retry of alice's interrupt after it settled = %+v, %v; want task not found", ack, err)
	}
	var got []string
	for _, s := range w.signals() {
		got = append(got, textOf(s.Message))
	}
	if !slices.Equal(got, []string{"narrower", "stop"}) {
		t.Errorf("the task took %q, want alice's two signals only", got)
	}
	cancelInterrupted(t, alice, id)
}

// cancelInterrupted cancels a task whose interrupt was just acknowledged.
// The acknowledgement comes once a2a-go let go of the execution, which
// makes a message resume the task at once; but a2a-go forgets the
// execution a moment later, and a cancel landing in between joins the
// ending execution and fails ("queue is closed", or "task cannot be
// canceled" in INPUT_REQUIRED). So the cancel is retried until it is
// taken.
func cancelInterrupted(t *testing.T, c *a2aclient.Client, id a2a.TaskID) {
	t.Helper()
	testwait.Succeeds(t, 10*time.Second, "cancel after the interrupt settled", func() error {
		task, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: id})
		if err != nil {
			return err
		}
		if task.Status.State != a2a.TaskStateCanceled {
			t.Fatalf("cancel: task %s", task.Status.State)
		}
		return nil
	})
}

func TestEcho(t *testing.T) {
	t.Parallel()
	h := steering.Echo(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	for _, tc := range []struct{ header, value, want string }{
		{"A2A-Extensions", "urn:x, " + steering.URI, steering.URI},
		{"X-A2A-Extensions", steering.URI, steering.URI},
		{"A2A-Extensions", "urn:x", ""},
	} {
		req := httptest.NewRequest("POST", "/rpc", nil)
		req.Header.Set(tc.header, tc.value)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get("A2A-Extensions"); got != tc.want {
			t.Errorf("%s: %q echoed %q, want %q", tc.header, tc.value, got, tc.want)
		}
	}
}
