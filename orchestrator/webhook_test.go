package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/natstest"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// pushingAgent is a real a2a-go agent on 127.0.0.1 with push
// notifications (a2a-go's in-memory config store and HTTP sender, private
// networks allowed for loopback). Its tasks work until released, then
// produce an artifact and complete.
type pushingAgent struct {
	*httptest.Server
	configs *push.InMemoryPushConfigStore
	sent    atomic.Int32
	release chan struct{}
	once    sync.Once

	mu      sync.Mutex
	methods []string
	// pushedAt is when the last notification was sent, pushing the
	// notifications being sent; readAt is when the last GetTask came,
	// reading the GetTasks being served.
	pushedAt, readAt time.Time
	pushing, reading int
	pushErrs         []string // why notifications failed, in order
}

func startPushingAgent(t *testing.T) *pushingAgent {
	t.Helper()
	a := &pushingAgent{configs: push.NewInMemoryStore(), release: make(chan struct{})}
	stopped, stop := context.WithCancel(context.Background())
	sender := countingSender{a: a, s: push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: 5 * time.Second, AllowPrivateNetworks: true})}
	h := a2asrv.NewHandler(untilReleased{release: a.release, stopped: stopped}, a2asrv.WithPushNotifications(a.configs, sender))
	mux := http.NewServeMux()
	a.Server = httptest.NewServer(mux)
	t.Cleanup(func() { stop(); a.CloseClientConnections(); a.Close() })
	card := &a2a.AgentCard{Name: "Pusher", Description: "pushes its tasks' events", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(a.URL+"/rpc", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{PushNotifications: true, Streaming: true},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "research", Name: "research", Tags: []string{"research"}}}}
	rpc := a2asrv.NewJSONRPCHandler(h)
	mux.Handle("/rpc", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(b, &m)
		a.mu.Lock()
		a.methods = append(a.methods, m.Method)
		get := m.Method == "GetTask"
		if get {
			a.reading++
			a.readAt = time.Now()
		}
		a.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(b))
		rpc.ServeHTTP(w, r)
		if get {
			a.mu.Lock()
			a.reading--
			a.mu.Unlock()
		}
	}))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	return a
}

func (a *pushingAgent) finish() { a.once.Do(func() { close(a.release) }) }

// String says what the agent was asked and what it pushed: for a
// failure's message.
func (a *pushingAgent) String() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return fmt.Sprintf("called %v; %d notifications sent, failed: %q", a.methods, a.sent.Load(), a.pushErrs)
}

func (a *pushingAgent) calls(method string) int {
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

// read reports whether the agent has sent its task's first two
// notifications (SUBMITTED, WORKING) and orchd has taken them and read
// the task as they asked: no notification is on its way, no GetTask is
// being served, and neither a notification nor a read came for 100 ms
// (orchd may read once more for a notification that came while it read;
// one naming what orchd knows already costs no read).
func (a *pushingAgent) read() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	last := a.pushedAt
	if a.readAt.After(last) {
		last = a.readAt
	}
	return a.sent.Load() >= 2 && a.pushing == 0 && a.reading == 0 && time.Since(last) > 100*time.Millisecond
}

type countingSender struct {
	a *pushingAgent
	s *push.HTTPPushSender
}

func (c countingSender) SendPush(ctx context.Context, cfg *a2a.PushConfig, ev a2a.Event) error {
	c.a.sent.Add(1)
	c.a.mu.Lock()
	c.a.pushing++
	c.a.pushedAt = time.Now()
	c.a.mu.Unlock()
	err := c.s.SendPush(ctx, cfg, ev)
	c.a.mu.Lock()
	c.a.pushing--
	if err != nil {
		c.a.pushErrs = append(c.a.pushErrs, err.Error())
	}
	c.a.mu.Unlock()
	return err
}

type untilReleased struct {
	release <-chan struct{}
	stopped context.Context
}

func (u untilReleased) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		select {
		case <-u.release:
		case <-ctx.Done():
			return
		case <-u.stopped.Done():
			yield(nil, errors.New("agent stopped"))
			return
		}
		if yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("result")), nil) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("done"))), nil)
		}
	}
}

func (u untilReleased) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// postNotification posts a notification to url with the token ("" for none) and
// returns the status and the body.
func postNotification(t *testing.T, url, header, token string, body []byte) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set(header, token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// untilState polls the delegation over the API until it is in state.
func untilState(t *testing.T, base, id string, state a2a.TaskState) delegation.Record {
	t.Helper()
	var rec delegation.Record
	testwait.Succeeds(t, 15*time.Second, "delegation "+id+" "+string(state), func() error {
		rec = delegation.Record{}
		if code, _ := callAs(t, aliceToken, "GET", base+"/v1/delegations/"+id, "", &rec); code != 200 || rec.State != state {
			return fmt.Errorf("it is %s (status %d)", rec.State, code)
		}
		return nil
	})
	return rec
}

func TestWebhook_DaemonFollowsByPush(t *testing.T) {
	t.Parallel()
	agent := startPushingAgent(t)
	cfg := loadDefaults(t)
	cfg.Auth = authTokens() // the webhook is not behind the gate
	cfg.Delegation.SilenceTimeout = Duration(time.Minute)
	cfg.Delegation.Follow = delegation.FollowPush // the agent streams too: auto would stream
	cfg.Agents = []registry.Spec{{ID: "pusher", URL: agent.URL}}
	base := startDaemon(t, cfg)

	var rec delegation.Record
	if code, _ := callAs(t, aliceToken, "POST", base+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("POST /v1/delegations = %d", code)
	}
	rec = untilState(t, base, rec.ID, a2a.TaskStateWorking)
	cfgs, err := agent.configs.List(t.Context(), rec.Downstream.TaskID)
	if err != nil || len(cfgs) != 1 {
		t.Fatalf("the agent holds push configs %v, %v; want orchd's webhook", cfgs, err)
	}
	hook, token := cfgs[0].URL, cfgs[0].Token
	if want := base + pathPush + "/" + rec.ID; hook != want || len(token) < 32 {
		t.Errorf("webhook %q with a %d-byte token, want %q with a long random one", hook, len(token), want)
	}
	reads := func() int { return agent.calls("GetTask") }
	testwait.Until(t, 10*time.Second, "the agent's first notifications to be read", agent.read)

	// Forged notifications: refused alike, whether the delegation exists.
	forged, _ := json.Marshal(a2a.StreamResponse{Event: &a2a.TaskStatusUpdateEvent{TaskID: rec.Downstream.TaskID, ContextID: rec.Downstream.ContextID,
		Status: a2a.TaskStatus{State: a2a.TaskStateCompleted}}})
	before := reads()
	var bodies []string
	for _, tc := range []struct{ url, header, token string }{
		{hook, "A2A-Notification-Token", "forged"},
		{hook, "A2A-Notification-Token", ""},
		{hook, "Authorization", "Bearer " + aliceToken}, // a caller's credentials are not the webhook's
		{base + pathPush + "/no-such-delegation", "A2A-Notification-Token", "forged"},
		{base + pathPush + "/no-such-delegation", "A2A-Notification-Token", token},
	} {
		code, body := postNotification(t, tc.url, tc.header, tc.token, forged)
		if code != http.StatusNotFound {
			t.Errorf("%s with %s %q: status %d, want 404", tc.url, tc.header, tc.token, code)
		}
		bodies = append(bodies, body)
	}
	for _, b := range bodies[1:] {
		if b != bodies[0] {
			t.Errorf("refusals differ: %q and %q", bodies[0], b)
		}
	}
	if got := untilState(t, base, rec.ID, a2a.TaskStateWorking); got.Result != nil {
		t.Errorf("a forged notification changed the delegation: %+v", got)
	}
	if n := reads() - before; n != 0 {
		t.Errorf("forged notifications made %d GetTask calls", n)
	}

	// Too large a body (the webhook takes 1 MiB) is refused, and the task
	// read all the same: the token was good.
	big := append([]byte(`{"statusUpdate":{"taskId":"`+string(rec.Downstream.TaskID)+`","status":{"state":"TASK_STATE_WORKING"},"metadata":{"pad":"`), bytes.Repeat([]byte("x"), 1<<20)...)
	big = append(big, `"}}}`...)
	if code, _ := postNotification(t, hook, "X-A2A-Notification-Token", token, big); code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized notification: status %d, want 413", code)
	}
	testwait.Until(t, 10*time.Second, "the task to be read after the oversized notification", func() bool { return reads() > before })

	agent.finish()
	done := untilState(t, base, rec.ID, a2a.TaskStateCompleted)
	if len(done.Artifacts) != 1 {
		t.Errorf("artifacts = %+v", done.Artifacts)
	}
	if n := agent.calls("SendStreamingMessage"); n != 0 {
		t.Errorf("%d streams opened to an agent followed by push", n)
	}
	if n, sent := reads(), int(agent.sent.Load()); n > sent+1 {
		t.Errorf("%d GetTask calls for %d notifications (one oversized): polled beyond verification", n, sent)
	}
}

func TestWebhook_Config(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, follow, pushURL, wantErr string
	}{
		{"defaults", "", "", ""},
		{"push", "push", "https://orchd.example", ""},
		{"poll", "poll", "", ""},
		{"unknown follow", "sometimes", "", "delegation.follow"},
		{"relative push URL", "auto", "/a2a", "delegation.pushURL"},
		{"push URL with a query", "auto", "https://orchd.example/?x=1", "delegation.pushURL"},
	} {
		cfg := loadDefaults(t)
		cfg.Delegation.Follow, cfg.Delegation.PushURL = tc.follow, tc.pushURL
		err := cfg.validate()
		if (err == nil) != (tc.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: validate = %v, want an error naming %q", tc.name, err, tc.wantErr)
		}
	}
	if got := a2aserver.PushPrefix("", "http://127.0.0.1:8080/"); got != "http://127.0.0.1:8080/a2a/push/" {
		t.Errorf("PushPrefix from the base = %q", got)
	}
	if got := a2aserver.PushPrefix("https://orchd.example", "http://127.0.0.1:8080"); got != "https://orchd.example/a2a/push/" {
		t.Errorf("PushPrefix configured = %q", got)
	}
}

// TestWebhook_AnyReplicaTakesTheNotification runs two replicas of one
// orchd on a NATS server: a notification the agent sends to the replica
// that does not follow the delegation is checked against the stored hash
// and passed to the one that does, which reads the task.
func TestWebhook_AnyReplicaTakesTheNotification(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a NATS server and two daemons")
	}
	t.Parallel()
	nats := natstest.NewCluster(t, 3)
	agent := startPushingAgent(t)
	var bases []string
	for range 2 {
		cfg := loadDefaults(t)
		cfg.StateDir = t.TempDir()
		cfg.Store.URL = nats.URLs()
		// A 3-node cluster in this process places a bucket slowly when
		// the machine is loaded: each store call may take 20 s, not 5.
		cfg.Store.Timeout = Duration(20 * time.Second)
		// Far beyond the waits below, so no safety read stands in for a
		// notification.
		cfg.Delegation.SilenceTimeout = Duration(10 * time.Minute)
		cfg.Delegation.Follow = delegation.FollowPush
		cfg.Agents = []registry.Spec{{ID: "pusher", URL: agent.URL}}
		bases = append(bases, startDaemon(t, cfg))
	}
	owner, other := bases[0], bases[1]
	// Each step below takes a few store calls, and a loaded machine
	// has made one take seconds.
	const within = time.Minute
	// A replica whose store was slow to save its configured agent serves
	// with the agent pending, and retries in the background.
	testwait.Until(t, within, "the agent registered on the owner", func() bool {
		var a struct{}
		return callNoFail(owner+"/v1/agents/pusher", &a) == 200
	})
	var rec delegation.Record
	if code := call(t, "POST", owner+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("POST /v1/delegations = %d", code)
	}
	testwait.Until(t, within, "the delegation to work", func() bool {
		var r delegation.Record
		return callNoFail(owner+"/v1/delegations/"+rec.ID, &r) == 200 && r.State == a2a.TaskStateWorking && r.Downstream.TaskID != ""
	})
	if code := call(t, "GET", owner+"/v1/delegations/"+rec.ID, "", &rec); code != 200 {
		t.Fatalf("GET delegation = %d", code)
	}
	cfgs, err := agent.configs.List(t.Context(), rec.Downstream.TaskID)
	if err != nil || len(cfgs) != 1 {
		t.Fatalf("push configs %v, %v", cfgs, err)
	}
	token := cfgs[0].Token
	testwait.Until(t, within, "the agent's first notifications to be read", agent.read)
	before := agent.calls("GetTask")
	body, _ := json.Marshal(a2a.StreamResponse{Event: &a2a.TaskStatusUpdateEvent{TaskID: rec.Downstream.TaskID, ContextID: rec.Downstream.ContextID,
		Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}})
	hook := other + pathPush + "/" + rec.ID
	if code, _ := postNotification(t, hook, "A2A-Notification-Token", "forged", body); code != http.StatusNotFound {
		t.Errorf("forged notification to the other replica: %d, want 404", code)
	}
	if code, b := postNotification(t, hook, "A2A-Notification-Token", token, body); code != http.StatusNoContent {
		t.Fatalf("notification to the other replica: %d %s, want 204", code, b)
	}
	testwait.Until(t, within, "the owner to read the task", func() bool { return agent.calls("GetTask") > before })
	agent.finish()
	testwait.Succeeds(t, within, "the delegation to complete, read through the other replica", func() error {
		var r, o delegation.Record
		code := callNoFail(other+"/v1/delegations/"+rec.ID, &r)
		if code == 200 && r.State == a2a.TaskStateCompleted {
			return nil
		}
		ocode := callNoFail(owner+"/v1/delegations/"+rec.ID, &o)
		return fmt.Errorf("the other replica answers %d %s, the owner %d %s; the agent was %v", code, r.State, ocode, o.State, agent)
	})
}
