package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/internal/syncbuf"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/store"
)

// received is one request a webhook got.
type received struct {
	id, token, auth string
	status          int
	event           a2a.Event
}

// webhook is a real receiver on 127.0.0.1 recording what it gets. It
// answers 503 to its first fail requests; with hang set it answers
// nothing until the request ends.
type webhook struct {
	*httptest.Server
	mu   sync.Mutex
	got  []received
	fail int
	hang bool
	// hanging counts the requests a hanging webhook holds.
	hanging atomic.Int32
	// stop releases hanging requests when the test ends, before Close
	// waits for them.
	stop chan struct{}
}

func newWebhook(t *testing.T, fail int, hang bool) *webhook {
	t.Helper()
	w := &webhook{fail: fail, hang: hang, stop: make(chan struct{})}
	w.Server = httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(func() { close(w.stop); w.Close() })
	return w
}

func (w *webhook) serve(rw http.ResponseWriter, r *http.Request) {
	if w.hang {
		w.hanging.Add(1)
		defer w.hanging.Add(-1)
		select {
		case <-r.Context().Done():
		case <-w.stop:
		}
		return
	}
	b, _ := io.ReadAll(r.Body)
	var sr a2a.StreamResponse
	rec := received{id: r.Header.Get(pushIDHeader), token: r.Header.Get("A2A-Notification-Token"), auth: r.Header.Get("Authorization"), status: 200}
	if err := json.Unmarshal(b, &sr); err != nil {
		rec.status = 400
	}
	rec.event = sr.Event
	w.mu.Lock()
	if w.fail > 0 {
		w.fail--
		rec.status = 503
	}
	w.got = append(w.got, rec)
	w.mu.Unlock()
	rw.WriteHeader(rec.status)
}

// delivered returns the requests answered 2xx, in arrival order.
func (w *webhook) delivered() []received {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(w.got), func(r received) bool { return r.status != 200 })
}

func (w *webhook) all() []received {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

// waitState waits until a delivered notification shows state, and
// returns those delivered by then.
func (w *webhook) waitState(t *testing.T, state a2a.TaskState) []received {
	t.Helper()
	return w.waitFor(t, "state "+string(state), func(r received) bool { return stateOf(r.event) == state })
}

// waitFor waits until a delivered notification satisfies ok.
func (w *webhook) waitFor(t *testing.T, what string, ok func(received) bool) []received {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := w.delivered()
		if slices.ContainsFunc(got, ok) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("no notification with %s within 20s; got %s", what, states(got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stateOf is the task state an event carries, "" for artifacts.
func stateOf(ev a2a.Event) a2a.TaskState {
	switch e := ev.(type) {
	case *a2a.Task:
		return e.Status.State
	case *a2a.TaskStatusUpdateEvent:
		return e.Status.State
	}
	return ""
}

func states(rs []received) string {
	var b strings.Builder
	for _, r := range rs {
		switch r.event.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			b.WriteString("artifact ")
		default:
			b.WriteString(string(stateOf(r.event)) + " ")
		}
	}
	return b.String()
}

// loopbackNetworks is the development opt-in that lets webhooks on this
// machine, such as the tests' receivers, take notifications.
var loopbackNetworks = []string{"127.0.0.0/8", "::1/128"}

// pushDaemon starts an orchd with alice and bob in front of a streaming
// worker, retrying push quickly, with webhooks allowed on loopback.
func pushDaemon(t *testing.T, worker string, edit func(*Config)) string {
	t.Helper()
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Agent.Push.AllowNetworks = loopbackNetworks
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker}}
	cfg.Agent.Push.Backoff = Duration(10 * time.Millisecond)
	cfg.Agent.Push.MaxBackoff = Duration(50 * time.Millisecond)
	if edit != nil {
		edit(&cfg)
	}
	return startDaemon(t, cfg)
}

// sendWithPush sends text as a new task with one push config for hook.
func sendWithPush(t *testing.T, c *a2aclient.Client, hook string) (*a2a.Task, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey")),
		Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{ID: "hook", URL: hook, Token: "tok-secret-1",
			Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "cred-secret-1"}}},
	})
	if err != nil {
		return nil, err
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage = %T, want a task", res)
	}
	return task, nil
}

func TestPush_EveryStateChangeArrives(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Work(20*time.Millisecond))
	base := pushDaemon(t, worker.URL, nil)
	hook := newWebhook(t, 0, false)

	// orchd declares push.
	var card struct {
		Capabilities a2a.AgentCapabilities `json:"capabilities"`
	}
	if code := call(t, "GET", base+"/.well-known/agent-card.json", "", &card); code != 200 || !card.Capabilities.PushNotifications {
		t.Errorf("card = %d, pushNotifications %v; want true", code, card.Capabilities.PushNotifications)
	}

	task, err := sendWithPush(t, a2aAs(t, base, aliceToken), hook.URL+"/a2a?k=v")
	if err != nil {
		t.Fatal(err)
	}
	got := hook.waitState(t, a2a.TaskStateCompleted)
	var seen []a2a.TaskState
	artifacts := 0
	for _, r := range got {
		if r.token != "tok-secret-1" || r.auth != "Bearer cred-secret-1" || r.id == "" {
			t.Errorf("notification headers: token %q, authorization %q, id %q", r.token, r.auth, r.id)
		}
		if info := r.event.TaskInfo(); info.TaskID != task.ID {
			t.Errorf("notification for task %q, want %q", info.TaskID, task.ID)
		}
		if _, ok := r.event.(*a2a.TaskArtifactUpdateEvent); ok {
			artifacts++
		}
		if s := stateOf(r.event); s != "" && (len(seen) == 0 || seen[len(seen)-1] != s) {
			seen = append(seen, s)
		}
	}
	if !slices.Contains(seen, a2a.TaskStateWorking) || seen[len(seen)-1] != a2a.TaskStateCompleted {
		t.Errorf("states in delivery order %v; want WORKING, then COMPLETED last", seen)
	}
	if artifacts == 0 {
		t.Errorf("no artifact notification among %s", states(got))
	}
	ids := map[string]bool{}
	for _, r := range got {
		if ids[r.id] {
			t.Errorf("notification id %s delivered twice to a healthy webhook", r.id)
		}
		ids[r.id] = true
	}
}

// TestPush_FlakyWebhookGetsEverything: a webhook failing its first two
// requests still receives every notification, each one it refused
// delivered later with the same id, in order.
func TestPush_FlakyWebhookGetsEverything(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, gatedWork(release))
	base := pushDaemon(t, worker.URL, nil)
	steady, flaky := newWebhook(t, 0, false), newWebhook(t, 2, false)

	alice := a2aAs(t, base, aliceToken)
	// Both webhooks on one task: the steady one says what was sent.
	ctx := t.Context()
	res, err := alice.SendMessage(ctx, &a2a.SendMessageRequest{
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey")),
		Config:  &a2a.SendMessageConfig{ReturnImmediately: true, PushConfig: &a2a.PushConfig{ID: "steady", URL: steady.URL}},
	})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	// The work holds after its first artifact; once the steady webhook
	// has that, the flaky one is added, then the work goes on: from here
	// on both get the same notifications.
	steady.waitFor(t, "the first artifact", func(r received) bool { _, ok := r.event.(*a2a.TaskArtifactUpdateEvent); return ok })
	if _, err := alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "flaky", URL: flaky.URL, Token: "tok-flaky"}); err != nil {
		t.Fatal(err)
	}
	close(release)
	steadyGot := steady.waitState(t, a2a.TaskStateCompleted)
	flakyGot := flaky.waitState(t, a2a.TaskStateCompleted)
	failed := 0
	delivered := map[string]bool{}
	for _, r := range flakyGot {
		delivered[r.id] = true
	}
	for _, r := range flaky.all() {
		if r.status == 503 {
			failed++
			if !delivered[r.id] {
				t.Errorf("notification %s (%s) was refused and never delivered", r.id, states([]received{r}))
			}
		}
	}
	if failed != 2 {
		t.Errorf("the webhook refused %d requests, want 2", failed)
	}
	if len(flakyGot) == 0 || len(flakyGot) > len(steadyGot) {
		t.Errorf("flaky got %s; steady got %s", states(flakyGot), states(steadyGot))
	}
	// What the flaky one got is the steady one's tail, in the same order.
	if tail := steadyGot[len(steadyGot)-len(flakyGot):]; states(tail) != states(flakyGot) {
		t.Errorf("flaky got %s; want the steady one's last ones, %s", states(flakyGot), states(tail))
	}
}

// TestPush_DeadWebhookDoesNotSlowTheDelegation: a webhook that never
// answers costs a delegation nothing.
func TestPush_DeadWebhookDoesNotSlowTheDelegation(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Work(10*time.Millisecond))
	base := pushDaemon(t, worker.URL, func(c *Config) { c.Agent.Push.Timeout = Duration(30 * time.Second) })
	dead := newWebhook(t, 0, true)
	live := newWebhook(t, 0, false)
	alice := a2aAs(t, base, aliceToken)

	// The baseline pushes to a webhook that answers: a send with a push
	// config goes through a2a-go's task machinery either way, which a
	// plain blocking send skips (settledTask), and that costs far more
	// than a second on a loaded machine.
	timed := func(hook string) time.Duration {
		start := time.Now()
		task, err := sendWithPush(t, alice, hook)
		if err != nil {
			t.Fatal(err)
		}
		if task.Status.State != a2a.TaskStateCompleted {
			t.Errorf("task pushed to %s ended %s", hook, task.Status.State)
		}
		return time.Since(start)
	}
	timed(live.URL) // warm up
	withLive := timed(live.URL)
	withDead := timed(dead.URL)
	again := timed(dead.URL) // its lane is busy with the first one's
	t.Logf("delegation: %s with a webhook that answers, %s and %s with a dead webhook", withLive, withDead, again)
	if limit := withLive + time.Second; withDead > limit || again > limit {
		t.Errorf("delegation took %s and %s with a dead webhook, %s with one that answers", withDead, again, withLive)
	}
}

// hangingAt is how many requests the webhooks hold.
func hangingAt(hooks []*webhook) int {
	n := 0
	for _, h := range hooks {
		n += int(h.hanging.Load())
	}
	return n
}

// deadWebhooksDelayNothingElse has alice start 40 quick tasks, each
// pushing to one of dead (webhooks that never answer, each given a
// minute), then caller pushes a quick task of its own to a webhook that
// answers, and times its notifications. Delivery is capped at 16 in
// flight, so that alice's 40 webhooks could take every slot: her share
// (per tenant or per host) is what leaves the others theirs. It returns
// how long the last notification took after the task was sent.
func deadWebhooksDelayNothingElse(t *testing.T, dead []*webhook, caller string, maxHanging int) time.Duration {
	t.Helper()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Work(5*time.Millisecond))
	base := pushDaemon(t, worker.URL, func(c *Config) {
		c.Agent.Push.Timeout = Duration(time.Minute)
		c.Agent.Push.Concurrency = 16
	})
	alice := a2aAs(t, base, aliceToken)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			if _, err := sendWithPush(t, alice, dead[i%len(dead)].URL+"/"+strconv.Itoa(i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	waitUntil(t, "alice's webhooks to hang", func() bool { return hangingAt(dead) >= maxHanging })

	live := newWebhook(t, 0, false)
	start := time.Now()
	if _, err := sendWithPush(t, a2aAs(t, base, caller), live.URL); err != nil {
		t.Fatal(err)
	}
	sent := time.Since(start)
	got := live.waitState(t, a2a.TaskStateCompleted)
	took := time.Since(start)
	t.Logf("%d notifications (%s), the last %s after the send answered (it took %s); %d requests hang at alice's dead webhooks",
		len(got), strings.TrimSpace(states(got)), took-sent, sent, hangingAt(dead))
	if n := hangingAt(dead); n > maxHanging {
		t.Errorf("%d requests hang at alice's dead webhooks, over her share of %d", n, maxHanging)
	}
	return took
}

// TestPush_DeadWebhooksOfOneTenantDelayNoOtherTenant: alice's 40 webhooks
// on 10 hosts hang; bob's quick task's notifications arrive at once, not
// once alice's attempts time out.
func TestPush_DeadWebhooksOfOneTenantDelayNoOtherTenant(t *testing.T) {
	t.Parallel()
	dead := make([]*webhook, 10)
	for i := range dead {
		dead[i] = newWebhook(t, 0, true)
	}
	// alice holds concurrencyPerTenant (8) slots at most.
	if took := deadWebhooksDelayNothingElse(t, dead, bobToken, 8); took > 5*time.Second {
		t.Errorf("bob's notifications took %s behind alice's dead webhooks", took)
	}
}

// TestPush_DeadHostDelaysNoOtherHost: 40 of alice's webhooks on one host
// hang; her own quick task's notifications to another host arrive at
// once.
func TestPush_DeadHostDelaysNoOtherHost(t *testing.T) {
	t.Parallel()
	dead := []*webhook{newWebhook(t, 0, true)}
	// The host holds concurrencyPerHost (4) slots at most.
	if took := deadWebhooksDelayNothingElse(t, dead, aliceToken, 4); took > 5*time.Second {
		t.Errorf("alice's notifications to a live host took %s behind her dead one", took)
	}
}

func TestPush_ConfigsBelongToTheTasksOwner(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Hang())
	base := pushDaemon(t, worker.URL, nil)
	hook := newWebhook(t, 0, false)
	alice, bob := a2aAs(t, base, aliceToken), a2aAs(t, base, bobToken)
	ctx := t.Context()
	res, err := alice.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey")),
		Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	created, err := alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "mine", URL: hook.URL,
		Token: "tok-secret-2", Auth: &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "cred-secret-2"}})
	if err != nil {
		t.Fatal(err)
	}
	if created.Token != "" || created.Auth == nil || created.Auth.Scheme != "Bearer" || created.Auth.Credentials != "" {
		t.Errorf("Create answered %+v; want no token, the scheme only", created)
	}
	got, err := alice.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "mine"})
	if err != nil || got.URL != hook.URL || got.Token != "" || got.Auth.Credentials != "" {
		t.Errorf("alice's Get = %+v, %v", got, err)
	}

	if _, err := bob.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "mine"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's Get = %v; want task not found", err)
	}
	if list, err := bob.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's List = %+v, %v; want task not found", list, err)
	}
	if err := bob.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "mine"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's Delete = %v; want task not found", err)
	}
	if _, err := bob.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, URL: hook.URL}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's Create = %v; want task not found", err)
	}
	list, err := alice.ListTaskPushConfigs(ctx, &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
	if err != nil || len(list) != 1 || list[0].ID != "mine" {
		t.Errorf("alice's List after bob's attempts = %+v, %v", list, err)
	}
	if err := alice.DeleteTaskPushConfig(ctx, &a2a.DeleteTaskPushConfigRequest{TaskID: task.ID, ID: "mine"}); err != nil {
		t.Errorf("alice's Delete = %v", err)
	}
	if _, err := alice.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "mine"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("Get after Delete = %v; want not found", err)
	}
}

func TestPush_CreateChecksTheWebhook(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Hang())
	base := pushDaemon(t, worker.URL, func(c *Config) { c.Agent.Push.MaxConfigsPerTask = 2; c.Agent.Push.MaxTokenBytes = 16 })
	alice := a2aAs(t, base, aliceToken)
	ctx := t.Context()
	res, err := alice.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey")),
		Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	tests := []struct {
		name string
		url  string
		tok  string
		want string
	}{
		{"private network", "http://10.20.30.40:9/hook", "", "webhook host 10.20.30.40 is not a public address; list its network in agent.push.allowNetworks to allow it"},
		{"cloud metadata", "http://169.254.169.254/latest", "", "not a public address"},
		{"IPv6 unique local", "http://[fd00::1]/hook", "", "not a public address"},
		{"not http", "file:///etc/passwd", "", `scheme "file"`},
		{"long token", "http://127.0.0.1:9/", strings.Repeat("s", 17), "token is 17 bytes, over the 16 allowed"},
	}
	for _, tt := range tests {
		_, err := alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, URL: tt.url, Token: tt.tok})
		if !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Create = %v; want invalid params saying %q", tt.name, err, tt.want)
		}
		if err != nil && tt.tok != "" && strings.Contains(err.Error(), tt.tok) {
			t.Errorf("%s: the error shows the token", tt.name)
		}
	}
	// Loopback is allowed by pushDaemon's development opt-in.
	for _, id := range []string{"a", "b"} {
		if _, err := alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: id, URL: "http://127.0.0.1:9/" + id}); err != nil {
			t.Errorf("Create %s on loopback: %v", id, err)
		}
	}
	if _, err := alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "c", URL: "http://127.0.0.1:9/c"}); !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), "the task has 2, the most it may have") {
		t.Errorf("third Create = %v; want the per-task limit", err)
	}
	// SendMessage's config goes through the same check.
	_, err = alice.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x")),
		Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: "http://192.168.1.1/hook"}}})
	if err == nil || !strings.Contains(err.Error(), "not a public address") {
		t.Errorf("SendMessage with a private webhook = %v; want refused", err)
	}
}

// TestPush_RefusedInlineConfigKeepsItsSecrets: a config given with the
// message and refused shows its token, its credentials and its URL's
// path, query and user information neither in the caller's error nor in
// orchd's log, whichever check refuses it.
func TestPush_RefusedInlineConfigKeepsItsSecrets(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Work(5*time.Millisecond))
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	cfg.Agent.Push.MaxTokenBytes = 64
	base, logs := loggedDaemon(t, cfg, slog.LevelDebug)
	alice := a2aAs(t, base, aliceToken)
	secrets := []string{"tok-SECRET-9", "cred-SECRET-9", "q-SECRET-9", "path-SECRET-9", "pw-SECRET-9"}
	auth := &a2a.PushAuthInfo{Scheme: "Bearer", Credentials: "cred-SECRET-9"}
	tests := []struct {
		name, url, token, want string
		stream                 bool
	}{
		{"private address", "http://192.168.1.1/path-SECRET-9?k=q-SECRET-9", "tok-SECRET-9", "not a public address", false},
		{"private address, streaming", "http://192.168.1.1/path-SECRET-9?k=q-SECRET-9", "tok-SECRET-9", "not a public address", true},
		{"user information", "http://user:pw-SECRET-9@8.8.8.8/path-SECRET-9", "tok-SECRET-9", "carries user information", false},
		{"token too long", "http://8.8.8.8/path-SECRET-9?k=q-SECRET-9", "tok-SECRET-9" + strings.Repeat("x", 64), "token is 76 bytes", false},
	}
	for _, tt := range tests {
		req := &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey")),
			Config: &a2a.SendMessageConfig{PushConfig: &a2a.PushConfig{URL: tt.url, Token: tt.token,
				Auth: &a2a.PushAuthInfo{Scheme: auth.Scheme, Credentials: auth.Credentials}}}}
		var err error
		if tt.stream {
			for _, e := range alice.SendStreamingMessage(t.Context(), req) {
				if err = e; err != nil {
					break
				}
			}
		} else {
			_, err = alice.SendMessage(t.Context(), req)
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: SendMessage = %v; want refused saying %q", tt.name, err, tt.want)
			continue
		}
		for _, s := range secrets {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: the error shows %s: %v", tt.name, s, err)
			}
		}
	}
	waitUntil(t, "the refusals to be logged", func() bool { return strings.Count(logs.String(), "not a public address") >= 2 })
	for _, s := range secrets {
		if strings.Contains(logs.String(), s) {
			t.Errorf("orchd's log shows %s:\n%s", s, logs)
		}
	}
}

// TestPush_WebhooksArePublicOnlyByDefault: with the embedded defaults,
// which let card fetches reach loopback, a webhook on loopback is refused
// at Create, by address and by name. agent.push.allowHosts lets a name in
// wherever it resolves.
func TestPush_WebhooksArePublicOnlyByDefault(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Hang())
	defaults := loadDefaults(t).Agent.Push
	base := pushDaemon(t, worker.URL, func(c *Config) { c.Agent.Push = defaults })
	alice := a2aAs(t, base, aliceToken)
	res, err := alice.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey")),
		Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"http://127.0.0.1:9/", "http://[::1]:9/", "http://localhost:9/"} {
		_, err := alice.CreateTaskPushConfig(t.Context(), &a2a.PushConfig{TaskID: res.(*a2a.Task).ID, URL: u})
		if !errors.Is(err, a2a.ErrInvalidParams) || !strings.Contains(err.Error(), "not a public address") {
			t.Errorf("Create %s = %v; want refused", u, err)
		}
		if strings.Contains(u, "localhost") && (err == nil || !strings.Contains(err.Error(), "webhook host localhost resolves to ")) {
			t.Errorf("Create %s = %v; want the address it resolves to named", u, err)
		}
	}

	check, err := newPushURLCheck(defaults.AllowNetworks, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if err := check.url(t.Context(), "http://localhost:9/"); err != nil {
		t.Errorf("a host in allowHosts: %v", err)
	}
	if err := check.url(t.Context(), "http://127.0.0.1:9/"); err == nil {
		t.Error("allowHosts let an address in")
	}
}

// TestPush_ConfigsSurviveARestart runs orchd on the embedded store, makes
// a config, restarts orchd on the same state directory and reads it back.
func TestPush_ConfigsSurviveARestart(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Work(5*time.Millisecond))
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.StateDir = t.TempDir()
	cfg.Store.Mode = StoreEmbedded
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	cfg.Agent.Push.AllowNetworks = loopbackNetworks
	cfg.Listen = "127.0.0.1:0"

	run := func() (string, func()) {
		d, err := New(cfg, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		deadline := time.Now().Add(10 * time.Second)
		for d.Addr() == nil {
			if time.Now().After(deadline) {
				t.Fatal("daemon did not bind")
			}
			time.Sleep(5 * time.Millisecond)
		}
		return "http://" + d.Addr().String(), func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	base, stop := run()
	hook := newWebhook(t, 0, false)
	alice := a2aAs(t, base, aliceToken)
	task, err := sendWithPush(t, alice, hook.URL)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	hook.waitState(t, a2a.TaskStateCompleted)
	stop()

	base, stop = run()
	defer stop()
	alice = a2aAs(t, base, aliceToken)
	got, err := alice.GetTaskPushConfig(t.Context(), &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "hook"})
	if err != nil || got.URL != hook.URL || got.Auth == nil || got.Auth.Scheme != "Bearer" {
		t.Fatalf("Get after restart = %+v, %v", got, err)
	}
	list, err := alice.ListTaskPushConfigs(t.Context(), &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
	if err != nil || len(list) != 1 {
		t.Errorf("List after restart = %+v, %v", list, err)
	}
	if _, err := a2aAs(t, base, bobToken).GetTaskPushConfig(t.Context(), &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "hook"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's Get after restart = %v; want task not found", err)
	}
}

// pushOutOn is a sender over a memory config store holding one config of
// alice's for task "t" with url, and the metrics reader it counts into.
func pushOutOn(t *testing.T, cfg PushConfig, url string) (*pushOut, *sdkmetric.ManualReader, *syncbuf.Buffer) {
	t.Helper()
	configs, err := store.NewMemoryPushConfigs(cfg.withDefaults().storeConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cc := a2asrv.NewCallContext(t.Context(), nil)
	cc.User = a2asrv.NewAuthenticatedUser("alice", nil)
	if _, err := configs.Save(ctx, "t", &a2a.PushConfig{ID: "c", URL: url, Token: "tok-secret-3"}); err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	logs := &syncbuf.Buffer{}
	cfg.AllowNetworks = loopbackNetworks
	o, err := newPushOut(cfg, registry.Config{}, configs, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return o, reader, logs
}

// counted is the orchd.push.notifications count with outcome.
func counted(t *testing.T, r *sdkmetric.ManualReader, outcome string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "orchd.push.notifications" {
				for _, dp := range sum.DataPoints {
					if v, _ := dp.Attributes.Value("outcome"); v.AsString() == outcome {
						n += dp.Value
					}
				}
			}
		}
	}
	return n
}

// givenUpLogged reads a text log: the push notifications given up logged
// one by one, and those the summary lines count.
func givenUpLogged(t *testing.T, logs string) (lines, summed int) {
	t.Helper()
	for line := range strings.Lines(logs) {
		switch {
		case strings.Contains(line, `msg="push notification given up"`):
			lines++
		case strings.Contains(line, `msg="push notifications given up and not logged one by one"`):
			m := regexp.MustCompile(` notifications=(\d+) `).FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("a summary without its count: %s", line)
			}
			n, _ := strconv.Atoi(m[1])
			summed += n
		}
	}
	return lines, summed
}

func statusEvent(state a2a.TaskState) a2a.Event {
	return &a2a.TaskStatusUpdateEvent{TaskID: "t", ContextID: "ctx", Status: a2a.TaskStatus{State: state}}
}

// TestPushOut_CloseStopsRetries: close ends the retries of a webhook that
// always fails at once, and every notification left is given up, logged
// and counted, without the token.
func TestPushOut_CloseStopsRetries(t *testing.T) {
	t.Parallel()
	hook := newWebhook(t, 1<<30, false)
	o, reader, logs := pushOutOn(t, PushConfig{Backoff: Duration(time.Hour), MaxBackoff: Duration(time.Hour)}, hook.URL)
	const sent = 5
	for range sent {
		if err := o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: hook.URL}, statusEvent(a2a.TaskStateWorking)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(hook.all()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no attempt within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	o.close()
	// close tries each queued notification once more, for up to
	// pushDrain, and never waits out an hour's backoff.
	if took := time.Since(start); took > pushDrain+2*time.Second {
		t.Errorf("close took %s with retries an hour apart", took)
	}
	if n := counted(t, reader, "given_up"); n != sent {
		t.Errorf("%d given up counted, want %d", n, sent)
	}
	// One line for the webhook's host, a summary for the rest.
	if lines, summed := givenUpLogged(t, logs.String()); lines != 1 || lines+summed != sent {
		t.Errorf("%d given up logged one by one and %d in summaries, want 1 and %d:\n%s", lines, summed, sent-1, logs)
	}
	if strings.Contains(logs.String(), "tok-secret-3") {
		t.Errorf("the log shows the token:\n%s", logs)
	}
	// After close, a notification is given up at once.
	_ = o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: hook.URL}, statusEvent(a2a.TaskStateCompleted))
	if n := counted(t, reader, "given_up"); n != sent+1 {
		t.Errorf("after close: %d given up, want %d", n, sent+1)
	}
}

// TestPushOut_CloseDelivers: what is still queued when orchd stops, such
// as the final states of the tasks it fails as it stops, is tried once
// more at once, so a webhook that answers gets it.
func TestPushOut_CloseDelivers(t *testing.T) {
	t.Parallel()
	hook := newWebhook(t, 1, false)
	o, reader, _ := pushOutOn(t, PushConfig{Backoff: Duration(time.Hour), MaxBackoff: Duration(time.Hour)}, hook.URL)
	// Three local POSTs take milliseconds, but a machine loaded with the
	// race detector and other tests has taken over pushDrain for them.
	o.drain = 10 * time.Second
	states := []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateFailed}
	for _, st := range states {
		if err := o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: hook.URL}, statusEvent(st)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(hook.all()) == 0 { // the first attempt failed: an hour's backoff
		if time.Now().After(deadline) {
			t.Fatal("no attempt within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	o.close()
	if took := time.Since(start); took > o.drain {
		t.Errorf("close took %s, over its drain of %s", took, o.drain)
	}
	got := hook.delivered()
	if len(got) != len(states) {
		t.Fatalf("%d delivered, want %d", len(got), len(states))
	}
	for i, r := range got {
		if st := r.event.(*a2a.TaskStatusUpdateEvent).Status.State; st != states[i] {
			t.Errorf("notification %d is %s, want %s", i, st, states[i])
		}
	}
	if n := counted(t, reader, "given_up"); n != 0 {
		t.Errorf("%d given up", n)
	}
}

// TestPushOut_CloseRetriesAnAttemptInFlight: a notification whose attempt
// is still waiting for the webhook when orchd starts to stop, and then
// fails, gets its one last try too.
func TestPushOut_CloseRetriesAnAttemptInFlight(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if calls.Add(1) == 1 {
			close(arrived)
			<-release // answered once close has begun
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(hook.Close)
	o, reader, _ := pushOutOn(t, PushConfig{Backoff: Duration(time.Hour), MaxBackoff: Duration(time.Hour)}, hook.URL)
	o.drain = 10 * time.Second
	if err := o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: hook.URL}, statusEvent(a2a.TaskStateFailed)); err != nil {
		t.Fatal(err)
	}
	<-arrived
	closed := make(chan struct{})
	go func() { defer close(closed); o.close() }()
	for !o.isDraining() {
		time.Sleep(time.Millisecond)
	}
	close(release)
	<-closed
	if n := calls.Load(); n != 2 {
		t.Errorf("the webhook was called %d times, want the failed attempt and one last try", n)
	}
	if n := counted(t, reader, "delivered"); n != 1 {
		t.Errorf("%d delivered, want 1", n)
	}
	if n := counted(t, reader, "given_up"); n != 0 {
		t.Errorf("%d given up", n)
	}
}

// TestPushOut_Bounds: past the per-config queue bound notifications are
// given up at once and SendPush never waits; a failing webhook gets
// MaxAttempts tries of a notification, then it is given up.
func TestPushOut_Bounds(t *testing.T) {
	t.Parallel()
	t.Run("queue", func(t *testing.T) {
		t.Parallel()
		dead := newWebhook(t, 0, true)
		o, reader, _ := pushOutOn(t, PushConfig{QueuePerConfig: 3}, dead.URL)
		defer o.close()
		start := time.Now()
		for range 10 {
			_ = o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: dead.URL}, statusEvent(a2a.TaskStateWorking))
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("10 SendPush to a dead webhook took %s", took)
		}
		// The first is in flight, two wait behind it: seven have no room.
		if n := counted(t, reader, "given_up"); n != 7 {
			t.Errorf("%d given up at once, want 7", n)
		}
	})
	t.Run("tenant queue", func(t *testing.T) {
		t.Parallel()
		dead := newWebhook(t, 0, true)
		o, reader, _ := pushOutOn(t, PushConfig{QueuePerTenant: 5}, dead.URL)
		defer o.close()
		acme := auth.WithPrincipal(t.Context(), &auth.Principal{ID: "alice", Tenant: "acme"})
		globex := auth.WithPrincipal(t.Context(), &auth.Principal{ID: "bob", Tenant: "globex"})
		for range 10 {
			_ = o.SendPush(acme, &a2a.PushConfig{ID: "c", TaskID: "t", URL: dead.URL}, statusEvent(a2a.TaskStateWorking))
		}
		if n := counted(t, reader, "given_up"); n != 5 {
			t.Errorf("%d of acme's 10 given up, want 5 over its share of the queue", n)
		}
		for range 3 {
			_ = o.SendPush(globex, &a2a.PushConfig{ID: "c", TaskID: "t", URL: dead.URL}, statusEvent(a2a.TaskStateWorking))
		}
		if n := counted(t, reader, "given_up"); n != 5 {
			t.Errorf("%d given up after globex's 3, want still 5: acme's share is not globex's", n)
		}
	})
	t.Run("attempts", func(t *testing.T) {
		t.Parallel()
		failing := newWebhook(t, 1<<30, false)
		o, reader, _ := pushOutOn(t, PushConfig{MaxAttempts: 3, Backoff: Duration(time.Millisecond)}, failing.URL)
		defer o.close()
		_ = o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: failing.URL}, statusEvent(a2a.TaskStateWorking))
		deadline := time.Now().Add(10 * time.Second)
		for counted(t, reader, "given_up") < 1 {
			if time.Now().After(deadline) {
				t.Fatal("not given up within 10s")
			}
			time.Sleep(5 * time.Millisecond)
		}
		got := failing.all()
		if len(got) != 3 || got[0].id != got[2].id {
			t.Errorf("the webhook saw %d attempts, want 3 of one notification id", len(got))
		}
	})
}

// TestPushOut_GivenUpLogIsBounded: a dead webhook whose notifications are
// given up by the hundred, and thirty more hosts, cost ten WARN lines and
// one summary per period, which counts every one of the others; the
// summary comes when the period ends, and the next period logs afresh.
func TestPushOut_GivenUpLogIsBounded(t *testing.T) {
	t.Parallel()
	dead := newWebhook(t, 0, true)
	// One notification fills the queue; the others are given up at once.
	o, reader, logs := pushOutOn(t, PushConfig{QueueSize: 1}, dead.URL)
	o.gaveUp.period = time.Hour // the summary comes at close
	o.drain = 10 * time.Millisecond
	send := func(url string) {
		_ = o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: url}, statusEvent(a2a.TaskStateWorking))
	}
	for range 501 {
		send(dead.URL)
	}
	for i := range 30 {
		send("http://127.0.0.1:" + strconv.Itoa(10000+i) + "/hook")
	}
	if lines, _ := givenUpLogged(t, logs.String()); lines != pushLogLines {
		t.Errorf("%d given up logged one by one during the period, want %d", lines, pushLogLines)
	}
	o.close()
	// The one in flight is given up at close too: 531 in all.
	lines, summed := givenUpLogged(t, logs.String())
	if n := counted(t, reader, "given_up"); lines != pushLogLines || int64(lines+summed) != n || n != 531 {
		t.Errorf("%d logged one by one, %d in the summary, %d counted; want %d, and 531 in all:\n%s", lines, summed, n, pushLogLines, logs)
	}
	if !strings.Contains(logs.String(), "hosts=\""+dead.Listener.Addr().String()+" (") {
		t.Errorf("the summary does not name the dead webhook's host first:\n%s", logs)
	}

	// A period that ends writes its summary by itself.
	o, _, logs = pushOutOn(t, PushConfig{QueueSize: 1}, dead.URL)
	defer o.close()
	o.gaveUp.period = 50 * time.Millisecond
	o.drain = 10 * time.Millisecond
	for range 101 {
		_ = o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: dead.URL}, statusEvent(a2a.TaskStateWorking))
	}
	waitUntil(t, "the period's summary", func() bool { _, summed := givenUpLogged(t, logs.String()); return summed == 99 })
	_ = o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: dead.URL}, statusEvent(a2a.TaskStateWorking))
	if lines, _ := givenUpLogged(t, logs.String()); lines != 2 {
		t.Errorf("%d logged one by one after a new period began, want 2:\n%s", lines, logs)
	}
}

// TestPushOut_NoRedirects: a webhook answering a redirect is not
// followed, so the token goes nowhere else, and the notification is given
// up without retries.
func TestPushOut_NoRedirects(t *testing.T) {
	t.Parallel()
	elsewhere := newWebhook(t, 0, false)
	redirect := httptest.NewServer(http.RedirectHandler(elsewhere.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	o, reader, logs := pushOutOn(t, PushConfig{Backoff: Duration(time.Millisecond)}, redirect.URL)
	defer o.close()
	_ = o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: redirect.URL}, statusEvent(a2a.TaskStateWorking))
	deadline := time.Now().Add(10 * time.Second)
	for counted(t, reader, "given_up") < 1 {
		if time.Now().After(deadline) {
			t.Fatalf("not given up within 10s:\n%s", logs)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(elsewhere.all()); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
	if !strings.Contains(logs.String(), "answered 307, which no retry changes") {
		t.Errorf("log does not say why:\n%s", logs)
	}
}

// FuzzPushURLCheck checks webhook URLs whose host is an address (names
// would need DNS): a refusal wraps ErrInvalidParams and shows neither the
// URL's path nor its query; an address the guard allows is never refused.
func FuzzPushURLCheck(f *testing.F) {
	f.Add("http://10.20.30.40:9/hook?token=secret")
	f.Add("https://[fd00::1]/a")
	f.Add("http://127.0.0.1/x")
	f.Add("https://8.8.8.8/")
	f.Add("http://[::ffff:192.168.0.1]/p")
	c, err := newPushURLCheck([]string{"127.0.0.0/8"}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		ip, err := netip.ParseAddr(u.Hostname())
		if err != nil {
			return // a name: resolving it is not this test's business
		}
		err = c.url(context.Background(), raw)
		if err == nil {
			return
		}
		if !errors.Is(err, a2a.ErrInvalidParams) {
			t.Fatalf("url(%q) = %v; want ErrInvalidParams", raw, err)
		}
		for _, part := range []string{u.RawQuery, u.Path} {
			if len(part) > 3 && strings.Contains(err.Error(), part) {
				t.Fatalf("url(%q) = %v: shows %q", raw, err, part)
			}
		}
		if ip = ip.Unmap().WithZone(""); ip.IsLoopback() && ip.Is4() {
			t.Fatalf("url(%q) refused an allowed address: %v", raw, err)
		}
	})
}
