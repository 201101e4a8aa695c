package delegation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// pushAgent is a real a2a-go agent on 127.0.0.1 that sends push
// notifications: a2asrv.WithPushNotifications over a2a-go's in-memory
// config store and its HTTP sender (private networks allowed, as on
// loopback they must be). Its tasks work until released, then produce an
// artifact and complete. It records the JSON-RPC methods it is called
// with.
type pushAgent struct {
	*httptest.Server
	configs *push.InMemoryPushConfigStore
	// drop loses the notifications while set, as a network would.
	drop atomic.Bool
	sent atomic.Int32

	mu      sync.Mutex
	methods []string
	release chan struct{}
	// gate, while not nil, holds each GetTask until it is closed;
	// reading counts the GetTasks being served, mostReading the most at
	// once.
	gate                 chan struct{}
	reading, mostReading int
}

// startPushAgent serves a push agent until the test ends; streaming says
// whether its card declares streaming too.
func startPushAgent(t testing.TB, streaming bool) *pushAgent {
	t.Helper()
	return startAgentDeclaringPush(t, streaming, true)
}

// startAgentDeclaringPush is startPushAgent, with push notifications
// served only when serves is set: an agent that declares them and refuses
// them otherwise.
func startAgentDeclaringPush(t testing.TB, streaming, serves bool) *pushAgent {
	t.Helper()
	a := &pushAgent{configs: push.NewInMemoryStore(), release: make(chan struct{})}
	stopped, stop := context.WithCancel(context.Background())
	sender := &droppingSender{a: a, http: push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: 5 * time.Second, AllowPrivateNetworks: true})}
	var opts []a2asrv.RequestHandlerOption
	if serves {
		opts = append(opts, a2asrv.WithPushNotifications(a.configs, sender))
	}
	h := a2asrv.NewHandler(&releasedWork{a: a, stopped: stopped}, opts...)
	mux := http.NewServeMux()
	a.Server = httptest.NewServer(mux)
	t.Cleanup(func() { stop(); a.CloseClientConnections(); a.Close() })
	card := &a2a.AgentCard{Name: "Pusher", Description: "pushes", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(a.URL+"/rpc", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{PushNotifications: true, Streaming: streaming},
		Skills:              []a2a.AgentSkill{{ID: "push", Name: "push", Tags: []string{}}}}
	rpc := a2asrv.NewJSONRPCHandler(h)
	mux.Handle("/rpc", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(b, &m)
		read := m.Method == "GetTask"
		a.mu.Lock()
		a.methods = append(a.methods, m.Method)
		gate := a.gate
		if read {
			a.reading++
			a.mostReading = max(a.mostReading, a.reading)
		}
		a.mu.Unlock()
		if read && gate != nil {
			<-gate
		}
		r.Body = io.NopCloser(bytes.NewReader(b))
		rpc.ServeHTTP(w, r)
		if read {
			a.mu.Lock()
			a.reading--
			a.mu.Unlock()
		}
	}))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	return a
}

// finish lets every task, running or to come, complete.
func (a *pushAgent) finish() {
	a.mu.Lock()
	defer a.mu.Unlock()
	select {
	case <-a.release:
	default:
		close(a.release)
	}
}

func (a *pushAgent) calls(method string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, m := range a.methods {
		if m == method {
			n++
		}
	}
	return n
}

// holdReads holds every GetTask the agent is sent from now on until the
// returned release is called (at the latest when the test ends), and
// counts afresh the most it holds at once.
func (a *pushAgent) holdReads(t testing.TB) (release func()) {
	gate := make(chan struct{})
	a.mu.Lock()
	a.gate, a.mostReading = gate, 0
	a.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release)
	return release
}

// token returns the webhook token orchd registered for the task.
func (a *pushAgent) token(t testing.TB, task a2a.TaskID) (string, string) {
	t.Helper()
	cfgs, err := a.configs.List(t.Context(), task)
	if err != nil || len(cfgs) != 1 {
		t.Fatalf("push configs of %s = %v, %v; want one", task, cfgs, err)
	}
	return cfgs[0].URL, cfgs[0].Token
}

type droppingSender struct {
	a    *pushAgent
	http *push.HTTPPushSender
}

func (s *droppingSender) SendPush(ctx context.Context, cfg *a2a.PushConfig, ev a2a.Event) error {
	if s.a.drop.Load() {
		return nil
	}
	s.a.sent.Add(1)
	return s.http.SendPush(ctx, cfg, ev)
}

// releasedWork works on each task until the agent releases it.
type releasedWork struct {
	a       *pushAgent
	stopped context.Context
}

func (w *releasedWork) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		w.a.mu.Lock()
		release := w.a.release
		w.a.mu.Unlock()
		select {
		case <-release:
		case <-ctx.Done():
			return
		case <-w.stopped.Done():
			yield(nil, errors.New("agent stopped"))
			return
		}
		if !yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("result")), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("done"))), nil)
	}
}

func (w *releasedWork) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// webhook serves Engine.Notify over real HTTP for the engine it holds,
// as orchd's daemon does, and counts the notifications it took.
type webhook struct {
	*httptest.Server
	engine atomic.Pointer[Engine]
	took   atomic.Int32
}

func startWebhook(t testing.TB) *webhook {
	t.Helper()
	w := &webhook{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /push/{id}", func(rw http.ResponseWriter, r *http.Request) {
		err := w.engine.Load().Notify(r.Context(), r.PathValue("id"), r.Header.Get("A2A-Notification-Token"), r.Body, 1<<20)
		switch {
		case err == nil:
			w.took.Add(1)
			rw.WriteHeader(http.StatusNoContent)
		case errors.Is(err, ErrPushRefused):
			http.Error(rw, "not found", http.StatusNotFound)
		case errors.Is(err, ErrPushRate):
			http.Error(rw, "slow down", http.StatusTooManyRequests)
		case errors.Is(err, ErrPushTooLarge):
			http.Error(rw, "too large", http.StatusRequestEntityTooLarge)
		case errors.Is(err, ErrBadRequest):
			http.Error(rw, err.Error(), http.StatusBadRequest)
		default:
			http.Error(rw, err.Error(), http.StatusServiceUnavailable)
		}
	})
	w.Server = httptest.NewServer(mux)
	t.Cleanup(w.Close)
	return w
}

// pushFixture is an engine following a push agent, with its webhook.
type pushFixture struct {
	*fixture
	agent *pushAgent
	hook  *webhook
}

func newPushFixture(t testing.TB, cfg Config, streaming bool) *pushFixture {
	t.Helper()
	agent := startPushAgent(t, streaming)
	hook := startWebhook(t)
	cfg.PushURL = hook.URL + "/push/"
	f := newFixture(t, cfg)
	hook.engine.Store(f.engine)
	f.add(t, "pusher", agent.URL)
	return &pushFixture{fixture: f, agent: agent, hook: hook}
}

func (f *pushFixture) delegate(t testing.TB) *Delegation {
	t.Helper()
	d, err := f.engine.Delegate(t.Context(), Request{Text: "work", Skill: "push"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// post sends a notification to the webhook as an agent would.
func post(t testing.TB, url, token string, body []byte) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("A2A-Notification-Token", token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode
}

// completedClaim is a notification saying the task completed.
func completedClaim(t testing.TB, task a2a.TaskID, contextID string) []byte {
	t.Helper()
	return statusNotification(t, task, contextID,
		a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("forged"))})
}

// statusNotification is a notification saying the task's status is st.
func statusNotification(t testing.TB, task a2a.TaskID, contextID string, st a2a.TaskStatus) []byte {
	t.Helper()
	b, err := json.Marshal(a2a.StreamResponse{Event: &a2a.TaskStatusUpdateEvent{TaskID: task, ContextID: contextID, Status: st}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// working waits until d works and the agent's first notifications were
// read (quiet), and returns its record then and its webhook's URL and
// token.
func (f *pushFixture) working(t testing.TB, d *Delegation) (r Record, url, token string) {
	t.Helper()
	r = waitState(t, d, a2a.TaskStateWorking)
	url, token = f.agent.token(t, r.Downstream.TaskID)
	f.quiet(t, d)
	return d.Record(), url, token
}

// quiet waits until the agent has sent the notifications of a task at
// work (SUBMITTED and WORKING), and they were taken and the task read
// after them.
func (f *pushFixture) quiet(t testing.TB, d *Delegation) {
	t.Helper()
	testwait.Until(t, 10*time.Second, "the agent's notifications and their reads", func() bool {
		if sent := f.agent.sent.Load(); sent < 2 || f.hook.took.Load() < sent {
			return false
		}
		h := f.engine.push.get(d.ID())
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.f != nil && !h.f.running && !h.pending
	})
}

func TestPush_FollowsWithoutPolling(t *testing.T) {
	t.Parallel()
	for _, streaming := range []bool{false, true} {
		t.Run(map[bool]string{false: "agent-polls", true: "agent-streams-too"}[streaming], func(t *testing.T) {
			t.Parallel()
			// Asked for: auto would stream to the agent that streams.
			f := newPushFixture(t, Config{SilenceTimeout: time.Minute, Follow: FollowPush}, streaming)
			d := f.delegate(t)
			waitState(t, d, a2a.TaskStateWorking)
			f.agent.finish()
			r := waitState(t, d, a2a.TaskStateCompleted)
			if messageText(r.Result) != "done" || len(r.Artifacts) != 1 {
				t.Errorf("record = %+v", r)
			}
			// Every GetTask read the task after a notification: none was
			// a poll. The webhook counts one once Notify returned, which
			// may be after the read it started.
			testwait.Until(t, 10*time.Second, "every notification sent to be counted", func() bool { return f.hook.took.Load() >= f.agent.sent.Load() })
			if got, took := f.agent.calls("GetTask"), int(f.hook.took.Load()); got == 0 || got > took {
				t.Errorf("GetTask calls = %d with %d notifications taken; want 1..%d", got, took, took)
			}
			if n := f.agent.calls("SendStreamingMessage"); n != 0 {
				t.Errorf("SendStreamingMessage calls = %d, want none with push", n)
			}
			stored, err := f.engine.store.Get(t.Context(), d.ID())
			if err != nil {
				t.Fatal(err)
			}
			if p := stored.Progress; p == nil || p.Follow != FollowPush || len(p.PushToken) != 64 {
				t.Fatalf("stored progress = %+v; want follow push with a token hash", p)
			}
			_, token := f.agent.token(t, r.Downstream.TaskID)
			if strings.Contains(stored.Progress.PushToken, token) {
				t.Error("the record keeps the token itself")
			}
		})
	}
}

func TestPush_ForgedNotificationIsRefused(t *testing.T) {
	t.Parallel()
	f := newPushFixture(t, Config{SilenceTimeout: time.Minute}, false)
	d := f.delegate(t)
	r, url, _ := f.working(t, d)
	before, events := f.agent.calls("GetTask"), r.LastEvent
	claim := completedClaim(t, r.Downstream.TaskID, r.Downstream.ContextID)
	for _, tc := range []struct{ name, url, token string }{
		{"bad token", url, "not-the-token"},
		{"no token", url, ""},
		{"long token", url, strings.Repeat("x", MaxPushToken+1)},
		{"unknown delegation", f.hook.URL + "/push/no-such-delegation", "not-the-token"},
	} {
		if code := post(t, tc.url, tc.token, claim); code != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", tc.name, code)
		}
	}
	if got := d.Record(); got.State != a2a.TaskStateWorking || got.LastEvent != events {
		t.Errorf("after forged notifications: %s with %d events, want WORKING with %d", got.State, got.LastEvent, events)
	}
	if n := f.agent.calls("GetTask"); n != before {
		t.Errorf("forged notifications made %d GetTask calls", n-before)
	}
	f.agent.finish()
	waitState(t, d, a2a.TaskStateCompleted)
}

func TestPush_ClaimTheAgentDoesNotMakeIsNotBelieved(t *testing.T) {
	t.Parallel()
	f := newPushFixture(t, Config{SilenceTimeout: time.Minute}, false)
	d := f.delegate(t)
	r, url, token := f.working(t, d) // the agent's own notifications are read first
	before := f.agent.calls("GetTask")
	if code := post(t, url, token, completedClaim(t, r.Downstream.TaskID, r.Downstream.ContextID)); code != http.StatusNoContent {
		t.Fatalf("status %d, want 204", code)
	}
	testwait.Until(t, 10*time.Second, "the claim's read", func() bool { return f.agent.calls("GetTask") > before })
	f.quiet(t, d)
	if got := d.Record(); got.State != a2a.TaskStateWorking || got.Result != nil {
		t.Errorf("after the claim: %s, result %v; want WORKING, as the agent has it", got.State, got.Result)
	}
	// A notification naming another task is refused and read nothing.
	n := f.agent.calls("GetTask")
	if code := post(t, url, token, completedClaim(t, "other-task", r.Downstream.ContextID)); code != http.StatusBadRequest {
		t.Errorf("another task: status %d, want 400", code)
	}
	if code := post(t, url, token, []byte(`{"nonsense":1}`)); code != http.StatusBadRequest {
		t.Errorf("no event: status %d, want 400", code)
	}
	if got := f.agent.calls("GetTask"); got != n {
		t.Errorf("refused notifications made %d GetTask calls", got-n)
	}
	f.agent.finish()
	waitState(t, d, a2a.TaskStateCompleted)
}

// TestPush_StatusReadCostsNoRead notifies the status the follower read
// last, then a newer one: the first is answered and costs no read of the
// task, the second is read, and the agent's own first notification (its
// task as orchd had it from the answer) was not read either.
func TestPush_StatusReadCostsNoRead(t *testing.T) {
	t.Parallel()
	f := newPushFixture(t, Config{SilenceTimeout: time.Minute}, false)
	d := f.delegate(t)
	r, url, token := f.working(t, d)
	if got, took := f.agent.calls("GetTask"), int(f.hook.took.Load()); got >= took {
		t.Errorf("%d reads for the agent's %d first notifications; want the SUBMITTED task, known from its answer, not read", got, took)
	}
	task, err := d.getTask(t.Context(), r.Downstream.TaskID)
	if err != nil {
		t.Fatal(err)
	}
	f.quiet(t, d)
	before := f.agent.calls("GetTask")
	notifyStatus := func(st a2a.TaskStatus) {
		t.Helper()
		if code := post(t, url, token, statusNotification(t, task.ID, task.ContextID, st)); code != http.StatusNoContent {
			t.Fatalf("status %d, want 204", code)
		}
	}
	notifyStatus(task.Status) // as last read: nothing to read
	later := time.Now()
	notifyStatus(a2a.TaskStatus{State: a2a.TaskStateWorking, Timestamp: &later})
	testwait.Until(t, 10*time.Second, "the newer status's read", func() bool { return f.agent.calls("GetTask") > before })
	f.quiet(t, d)
	if n := f.agent.calls("GetTask") - before; n != 1 {
		t.Errorf("%d reads for a notification of the status read last and one of a newer; want 1", n)
	}
	f.agent.finish()
	waitState(t, d, a2a.TaskStateCompleted)
}

// TestPush_AnsweredWhileTheDelegationWrites holds the delegation's lock,
// as a write to a slow store does, and sends a notification: it is
// answered at once, and the task is read once the lock is free. An agent
// that sends its notifications in line with its work (a2a-go does) would
// otherwise wait for orchd's store, or give the notification up.
func TestPush_AnsweredWhileTheDelegationWrites(t *testing.T) {
	t.Parallel()
	f := newPushFixture(t, Config{SilenceTimeout: time.Minute}, false)
	d := f.delegate(t)
	r, url, token := f.working(t, d)
	before := f.agent.calls("GetTask")
	claim := completedClaim(t, r.Downstream.TaskID, r.Downstream.ContextID)
	answered := make(chan int, 1)
	d.mu.Lock()
	go func() { // not post: it may fail the test, which only the test's goroutine may
		code := 0
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(claim))
		req.Header.Set("A2A-Notification-Token", token)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			code = res.StatusCode
		}
		answered <- code
	}()
	select {
	case code := <-answered:
		d.mu.Unlock()
		if code != http.StatusNoContent {
			t.Fatalf("status %d, want 204", code)
		}
	case <-time.After(10 * time.Second):
		d.mu.Unlock()
		t.Fatalf("the notification was not answered while the delegation's lock was held; then: %d", <-answered)
	}
	testwait.Until(t, 10*time.Second, "the notification's read", func() bool { return f.agent.calls("GetTask") > before })
	f.agent.finish()
	waitState(t, d, a2a.TaskStateCompleted)
}

// TestPush_ReadsOfOneAgentAreBounded notifies more delegations to one
// agent than maxTaskReads while the agent holds every read: no more than
// maxTaskReads reads reach it at once, the rest wait their turn, and once
// the agent answers every notification has had its read.
func TestPush_ReadsOfOneAgentAreBounded(t *testing.T) {
	t.Parallel()
	f := newPushFixture(t, Config{SilenceTimeout: time.Minute, Follow: FollowPush}, false)
	n := maxTaskReads + 16
	ds := make([]*Delegation, n)
	for i := range ds {
		ds[i] = f.delegate(t)
	}
	type hook struct{ url, token string }
	hooks := make([]hook, n)
	for i, d := range ds {
		_, hooks[i].url, hooks[i].token = f.working(t, d)
	}
	before := f.agent.calls("GetTask")
	release := f.agent.holdReads(t)
	for i, d := range ds {
		r := d.Record()
		if code := post(t, hooks[i].url, hooks[i].token, completedClaim(t, r.Downstream.TaskID, r.Downstream.ContextID)); code != http.StatusNoContent {
			t.Fatalf("notification %d: status %d, want 204", i, code)
		}
	}
	reading := func() (now, most int) {
		f.agent.mu.Lock()
		defer f.agent.mu.Unlock()
		return f.agent.reading, f.agent.mostReading
	}
	testwait.Until(t, 10*time.Second, "the agent to hold the reads it was sent", func() bool { now, _ := reading(); return now >= maxTaskReads })
	f.engine.reads.mu.Lock()
	q := f.engine.reads.agents["pusher"]
	workers, waiting := q.workers, len(q.waiting)
	f.engine.reads.mu.Unlock()
	if _, most := reading(); most != maxTaskReads || workers != maxTaskReads || waiting != n-maxTaskReads {
		t.Errorf("%d reads at the agent at most, %d workers, %d waiting; want %d, %d, %d", most, workers, waiting, maxTaskReads, maxTaskReads, n-maxTaskReads)
	}
	// A delegation whose read waits its turn is canceled without waiting
	// for the reads ahead of it.
	last := ds[n-1]
	canceled := make(chan error, 1)
	go func() { _, err := f.engine.Cancel(t.Context(), last.ID()); canceled <- err }()
	select {
	case err := <-canceled:
		if err != nil {
			t.Errorf("cancel of a delegation whose read waits: %v", err)
		}
	case <-time.After(10 * time.Second):
		release()
		t.Fatalf("the cancel of a delegation whose read waits waited for the reads ahead of it; then: %v", <-canceled)
	}
	ds = ds[:n-1]
	release()
	testwait.Until(t, 10*time.Second, "every notification's read", func() bool { return f.agent.calls("GetTask")-before >= n-1 })
	if _, most := reading(); most > maxTaskReads {
		t.Errorf("%d reads at the agent at once, want at most %d", most, maxTaskReads)
	}
	for _, d := range ds {
		f.quiet(t, d)
		if got := d.Record(); got.State != a2a.TaskStateWorking {
			t.Errorf("%s after the claim: %s, want WORKING, as the agent has it", d.ID(), got.State)
		}
	}
	testwait.Until(t, 10*time.Second, "the read queue to be gone", func() bool {
		f.engine.reads.mu.Lock()
		defer f.engine.reads.mu.Unlock()
		return len(f.engine.reads.agents) == 0
	})
	f.agent.finish()
	for _, d := range ds {
		waitState(t, d, a2a.TaskStateCompleted)
	}
}

func TestPush_LostNotificationsAreCaughtBySafetyRead(t *testing.T) {
	t.Parallel()
	f := newPushFixture(t, Config{SilenceTimeout: 200 * time.Millisecond}, false)
	d := f.delegate(t)
	waitState(t, d, a2a.TaskStateWorking)
	f.agent.drop.Store(true)
	f.agent.finish()
	r := waitState(t, d, a2a.TaskStateCompleted)
	if len(r.Artifacts) != 1 {
		t.Errorf("artifacts = %+v", r.Artifacts)
	}
}

func TestPush_CancelAndDeadline(t *testing.T) {
	t.Parallel()
	f := newPushFixture(t, Config{SilenceTimeout: time.Minute}, false)
	d := f.delegate(t)
	waitState(t, d, a2a.TaskStateWorking)
	if _, err := f.engine.Cancel(t.Context(), d.ID()); err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateCanceled)

	dl, err := f.engine.Delegate(t.Context(), Request{Text: "work", Skill: "push", Deadline: time.Now().Add(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	r := waitState(t, dl, a2a.TaskStateFailed)
	if !strings.Contains(r.Error, "deadline") {
		t.Errorf("error = %q, want the deadline", r.Error)
	}
	testwait.Until(t, 10*time.Second, "the webhooks of ended delegations to go", func() bool {
		f.engine.push.mu.Lock()
		defer f.engine.push.mu.Unlock()
		return len(f.engine.push.hooks) == 0
	})
}

func TestPush_CarriedOnAfterRestart(t *testing.T) {
	t.Parallel()
	store := NewMemoryStore(0)
	agent := startPushAgent(t, false)
	hook := startWebhook(t)
	cfg := Config{PushURL: hook.URL + "/push/", SilenceTimeout: time.Minute}
	first := newFixtureStore(t, cfg, store)
	hook.engine.Store(first.engine)
	first.add(t, "pusher", agent.URL)
	d, err := first.engine.Delegate(t.Context(), Request{Text: "work", Skill: "push"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	testwait.Until(t, 10*time.Second, "the agent's notifications", func() bool { sent := agent.sent.Load(); return sent >= 2 && hook.took.Load() >= sent })
	first.engine.Close()

	second := newFixtureStore(t, cfg, store)
	second.add(t, "pusher", agent.URL)
	hook.engine.Store(second.engine)
	if err := second.engine.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	resumed, ok := second.engine.Get(d.ID())
	if !ok {
		t.Fatal("the delegation was not carried on")
	}
	testwait.Until(t, 10*time.Second, "the resumed follower", func() bool { return second.engine.push.get(d.ID()) != nil })
	reads := agent.calls("GetTask")
	agent.finish()
	waitState(t, resumed, a2a.TaskStateCompleted)
	if got := agent.calls("GetTask") - reads; got > int(agent.sent.Load()) {
		t.Errorf("%d GetTask calls after the restart, more than the notifications", got)
	}
}

func TestPush_RateIsBounded(t *testing.T) {
	t.Parallel()
	// The flood leaves no room for the agent's own notifications for a
	// while: the safety read finds the task completed.
	f := newPushFixture(t, Config{SilenceTimeout: 300 * time.Millisecond}, false)
	d := f.delegate(t)
	r, url, token := f.working(t, d)
	before := f.agent.calls("GetTask")
	body := completedClaim(t, r.Downstream.TaskID, r.Downstream.ContextID)
	took0 := f.hook.took.Load()
	var limited atomic.Int32
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 4 * PushBurst / 16 {
				if post(t, url, token, body) == http.StatusTooManyRequests {
					limited.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if limited.Load() == 0 {
		t.Errorf("no notification of %d sent at once was refused for the rate", 4*PushBurst)
	}
	// Reads are folded: a notification that comes while the task is read
	// makes one more read, however many come.
	f.quiet(t, d)
	taken := int(f.hook.took.Load() - took0)
	if n := f.agent.calls("GetTask") - before; n == 0 || 2*n > taken {
		t.Errorf("%d GetTask calls for %d notifications taken; want at most half as many", n, taken)
	}
	if got := d.Record().State; got != a2a.TaskStateWorking {
		t.Errorf("state %s, want WORKING", got)
	}
	f.agent.finish()
	waitState(t, d, a2a.TaskStateCompleted)
}

func TestPush_AgentRefusingPushIsFollowedAnotherWay(t *testing.T) {
	t.Parallel()
	for _, streaming := range []bool{false, true} {
		agent := startAgentDeclaringPush(t, streaming, false)
		hook := startWebhook(t)
		f := newFixture(t, Config{PushURL: hook.URL + "/push/", Follow: FollowPush})
		hook.engine.Store(f.engine)
		f.add(t, "pusher", agent.URL)
		d, err := f.engine.Delegate(t.Context(), Request{Text: "work", Skill: "push"})
		if err != nil {
			t.Fatalf("streaming %v: %v", streaming, err)
		}
		agent.finish()
		waitState(t, d, a2a.TaskStateCompleted)
		d.mu.Lock()
		mode, hash := d.prog.Follow, d.prog.PushToken
		d.mu.Unlock()
		want := map[bool]string{false: FollowPoll, true: FollowStream}[streaming]
		if mode != want || hash != "" {
			t.Errorf("streaming %v: followed by %q (token hash %q), want %q and none", streaming, mode, hash, want)
		}
		if n := agent.calls("SendMessage"); n != 2-map[bool]int{false: 0, true: 1}[streaming] {
			t.Errorf("streaming %v: %d SendMessage calls, want one refused, then one without push unless it streams", streaming, n)
		}
	}
}

func TestChooseFollow(t *testing.T) {
	t.Parallel()
	loop := []*a2a.AgentInterface{{URL: "http://127.0.0.1:9/rpc"}}
	remote := []*a2a.AgentInterface{{URL: "https://agent.example/rpc"}}
	for _, tc := range []struct {
		name, follow, url   string
		push, stream        bool
		ifaces              []*a2a.AgentInterface
		want                string
		wantStreamingRecord bool
	}{
		{"auto streams over push", FollowAuto, "http://127.0.0.1:1/a2a/push/", true, true, loop, FollowStream, true},
		{"auto pushes without a stream", FollowAuto, "http://127.0.0.1:1/a2a/push/", true, false, loop, FollowPush, false},
		{"push asked", FollowPush, "http://127.0.0.1:1/a2a/push/", true, true, loop, FollowPush, false},
		{"auto streams without push", FollowAuto, "http://127.0.0.1:1/a2a/push/", false, true, loop, FollowStream, true},
		{"auto polls", FollowAuto, "http://127.0.0.1:1/a2a/push/", false, false, loop, FollowPoll, false},
		{"no webhook", FollowAuto, "", true, true, loop, FollowStream, true},
		{"loopback webhook, remote agent", FollowAuto, "http://127.0.0.1:1/a2a/push/", true, false, remote, FollowPoll, false},
		{"public webhook, remote agent", FollowAuto, "https://orchd.example/a2a/push/", true, false, remote, FollowPush, false},
		{"poll asked", FollowPoll, "http://127.0.0.1:1/a2a/push/", true, true, loop, FollowPoll, false},
		{"stream asked", FollowStream, "http://127.0.0.1:1/a2a/push/", true, true, loop, FollowStream, true},
		{"stream asked, cannot", FollowStream, "http://127.0.0.1:1/a2a/push/", true, false, loop, FollowPush, false},
		{"push asked, cannot", FollowPush, "http://127.0.0.1:1/a2a/push/", false, true, loop, FollowStream, true},
	} {
		e := NewEngine(nil, nil, NewMemoryStore(0), Config{Follow: tc.follow, PushURL: tc.url}, nil)
		d := &Delegation{engine: e}
		d.chooseFollow(&registry.Agent{Profile: &capability.Profile{ID: "agent"}}, &a2a.AgentCard{SupportedInterfaces: tc.ifaces, Capabilities: a2a.AgentCapabilities{PushNotifications: tc.push, Streaming: tc.stream}})
		if d.prog.Follow != tc.want || d.prog.Streaming != tc.wantStreamingRecord {
			t.Errorf("%s: follow %q streaming %v, want %q %v", tc.name, d.prog.Follow, d.prog.Streaming, tc.want, tc.wantStreamingRecord)
		}
		e.Close()
	}
}

func FuzzParseNotification(f *testing.F) {
	f.Add([]byte(`{"statusUpdate":{"taskId":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}`))
	f.Add([]byte(`{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_COMPLETED"}}}`))
	f.Add([]byte(`{"artifactUpdate":{"taskId":"t1","contextId":"c1","artifact":{"artifactId":"a","parts":[{"text":"x"}]}}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := ParseNotification(b)
		if err != nil {
			if !errors.Is(err, ErrBadRequest) || id != "" {
				t.Fatalf("ParseNotification(%q) = %q, %v; want ErrBadRequest and no task", b, id, err)
			}
			return
		}
		if id == "" {
			t.Fatalf("ParseNotification(%q) named no task without an error", b)
		}
	})
}
