package orchestrator

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testcmp"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/internal/webhooktest"
	"github.com/orchd/orchd/registry"
)

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
	hook := webhooktest.Start(t, 0, false)

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
	got := hook.WaitState(t, a2a.TaskStateCompleted)
	var seen []a2a.TaskState
	artifacts := 0
	for _, r := range got {
		if diff := cmp.Diff(webhooktest.Received{Token: "tok-secret-1", Auth: "Bearer cred-secret-1"}, r, testcmp.Only[webhooktest.Received]("Token", "Auth")); diff != "" {
			t.Errorf("notification headers (-want +got):\n%s", diff)
		}
		if r.ID == "" {
			t.Errorf("notification without an id")
		}
		if info := r.Event.TaskInfo(); info.TaskID != task.ID {
			t.Errorf("notification for task %q, want %q", info.TaskID, task.ID)
		}
		if _, ok := r.Event.(*a2a.TaskArtifactUpdateEvent); ok {
			artifacts++
		}
		if s := webhooktest.StateOf(r.Event); s != "" && (len(seen) == 0 || seen[len(seen)-1] != s) {
			seen = append(seen, s)
		}
	}
	if !slices.Contains(seen, a2a.TaskStateWorking) || seen[len(seen)-1] != a2a.TaskStateCompleted {
		t.Errorf("states in delivery order %v; want WORKING, then COMPLETED last", seen)
	}
	if artifacts == 0 {
		t.Errorf("no artifact notification among %s", webhooktest.States(got))
	}
	ids := map[string]bool{}
	for _, r := range got {
		if ids[r.ID] {
			t.Errorf("notification id %s delivered twice to a healthy webhook", r.ID)
		}
		ids[r.ID] = true
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
	steady, flaky := webhooktest.Start(t, 0, false), webhooktest.Start(t, 2, false)

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
	steady.WaitFor(t, "the first artifact", func(r webhooktest.Received) bool { _, ok := r.Event.(*a2a.TaskArtifactUpdateEvent); return ok })
	if _, err := alice.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: task.ID, ID: "flaky", URL: flaky.URL, Token: "tok-flaky"}); err != nil {
		t.Fatal(err)
	}
	close(release)
	steadyGot := steady.WaitState(t, a2a.TaskStateCompleted)
	flakyGot := flaky.WaitState(t, a2a.TaskStateCompleted)
	failed := 0
	delivered := map[string]bool{}
	for _, r := range flakyGot {
		delivered[r.ID] = true
	}
	for _, r := range flaky.All() {
		if r.Status == 503 {
			failed++
			if !delivered[r.ID] {
				t.Errorf("notification %s (%s) was refused and never delivered", r.ID, webhooktest.States([]webhooktest.Received{r}))
			}
		}
	}
	if failed != 2 {
		t.Errorf("the webhook refused %d requests, want 2", failed)
	}
	if len(flakyGot) == 0 || len(flakyGot) > len(steadyGot) {
		t.Errorf("flaky got %s; steady got %s", webhooktest.States(flakyGot), webhooktest.States(steadyGot))
	}
	// What the flaky one got is the steady one's tail, in the same order.
	if tail := steadyGot[len(steadyGot)-len(flakyGot):]; webhooktest.States(tail) != webhooktest.States(flakyGot) {
		t.Errorf("flaky got %s; want the steady one's last ones, %s", webhooktest.States(flakyGot), webhooktest.States(tail))
	}
}

// TestPush_DeadWebhookDoesNotSlowTheDelegation: a webhook that never
// answers costs a delegation nothing. Each attempt to reach it is given
// ten minutes, far beyond the 30 s a send may take here, so a delegation
// that waited for a delivery, or for room to deliver, would not end: two
// in a row complete, the second while the webhook holds a notification
// of the first, which it still holds after. Nothing is timed, so a busy
// machine cannot fail it.
func TestPush_DeadWebhookDoesNotSlowTheDelegation(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Work(10*time.Millisecond))
	base := pushDaemon(t, worker.URL, func(c *Config) { c.Agent.Push.Timeout = Duration(10 * time.Minute) })
	dead := webhooktest.Start(t, 0, true)
	alice := a2aAs(t, base, aliceToken)
	send := func(which string) {
		t.Helper()
		task, err := sendWithPush(t, alice, dead.URL)
		if err != nil {
			t.Fatalf("the %s task, pushed to a dead webhook: %v", which, err)
		}
		if task.Status.State != a2a.TaskStateCompleted {
			t.Errorf("the %s task, pushed to a dead webhook, ended %s", which, task.Status.State)
		}
	}
	send("first")
	testwait.Until(t, 10*time.Second, "the dead webhook holding a notification", func() bool { return dead.Hanging.Load() > 0 })
	send("second")
	if dead.Hanging.Load() == 0 {
		t.Error("the dead webhook let go of its notifications before the second task was checked: it may have waited for them")
	}
}

// hangingAt is how many requests the webhooks hold.
func hangingAt(hooks []*webhooktest.Webhook) int {
	n := 0
	for _, h := range hooks {
		n += int(h.Hanging.Load())
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
func deadWebhooksDelayNothingElse(t *testing.T, dead []*webhooktest.Webhook, caller string, maxHanging int) time.Duration {
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
	testwait.Until(t, 10*time.Second, "alice's webhooks to hang", func() bool { return hangingAt(dead) >= maxHanging })

	live := webhooktest.Start(t, 0, false)
	start := time.Now()
	if _, err := sendWithPush(t, a2aAs(t, base, caller), live.URL); err != nil {
		t.Fatal(err)
	}
	sent := time.Since(start)
	got := live.WaitState(t, a2a.TaskStateCompleted)
	took := time.Since(start)
	t.Logf("%d notifications (%s), the last %s after the send answered (it took %s); %d requests hang at alice's dead webhooks",
		len(got), strings.TrimSpace(webhooktest.States(got)), took-sent, sent, hangingAt(dead))
	if n := hangingAt(dead); n > maxHanging {
		t.Errorf("%d requests hang at alice's dead webhooks, over her share of %d", n, maxHanging)
	}
	return took
}

// TestPush_DeadWebhooksOfOneTenantDelayNoOtherTenant: alice's 40 webhooks
// on 10 hosts hang; bob's quick task's notifications arrive at once, not
// once alice's attempts time out.
func TestPush_DeadWebhooksOfOneTenantDelayNoOtherTenant(t *testing.T) {
	if testing.Short() {
		t.Skip("takes ~2 s: fills push delivery with 40 notifications to dead webhooks")
	}
	t.Parallel()
	dead := make([]*webhooktest.Webhook, 10)
	for i := range dead {
		dead[i] = webhooktest.Start(t, 0, true)
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
	if testing.Short() {
		t.Skip("takes ~2 s: fills push delivery with 40 notifications to a dead host")
	}
	t.Parallel()
	dead := []*webhooktest.Webhook{webhooktest.Start(t, 0, true)}
	// The host holds concurrencyPerHost (4) slots at most.
	if took := deadWebhooksDelayNothingElse(t, dead, aliceToken, 4); took > 5*time.Second {
		t.Errorf("alice's notifications to a live host took %s behind her dead one", took)
	}
}

func TestPush_ConfigsBelongToTheTasksOwner(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Hang())
	base := pushDaemon(t, worker.URL, nil)
	hook := webhooktest.Start(t, 0, false)
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
	// Secrets are never answered: no token, the scheme only.
	secretless := cmp.Options{testcmp.Only[a2a.PushConfig]("URL", "Token", "Auth"), testcmp.Only[a2a.PushAuthInfo]("Scheme", "Credentials")}
	want := &a2a.PushConfig{URL: hook.URL, Auth: &a2a.PushAuthInfo{Scheme: "Bearer"}}
	if diff := cmp.Diff(want, created, secretless); diff != "" {
		t.Errorf("Create answered (-want +got):\n%s", diff)
	}
	got, err := alice.GetTaskPushConfig(ctx, &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "mine"})
	if err != nil {
		t.Fatalf("alice's Get: %v", err)
	}
	if diff := cmp.Diff(want, got, secretless); diff != "" {
		t.Errorf("alice's Get (-want +got):\n%s", diff)
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
	if err != nil {
		t.Errorf("alice's List after bob's attempts: %v", err)
	} else if len(list) != 1 || list[0].ID != "mine" {
		t.Errorf("alice's List after bob's attempts = %+v, want hers alone", list)
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
	testwait.Until(t, 10*time.Second, "the refusals to be logged", func() bool { return strings.Count(logs.String(), "not a public address") >= 2 })
	for _, s := range secrets {
		if strings.Contains(logs.String(), s) {
			t.Errorf("orchd's log shows %s:\n%s", s, logs)
		}
	}
}

// TestPush_WebhooksArePublicOnlyByDefault: with the embedded defaults,
// which let card fetches reach loopback, a webhook on loopback is refused
// at Create, by address and by name (a2aserver's TestPushURLCheck_AllowHosts
// checks that agent.push.allowHosts lets a name in wherever it resolves).
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
		testwait.Until(t, 10*time.Second, "the daemon binding its port", func() bool { return d.Addr() != nil })
		return "http://" + d.Addr().String(), func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		}
	}
	base, stop := run()
	hook := webhooktest.Start(t, 0, false)
	alice := a2aAs(t, base, aliceToken)
	task, err := sendWithPush(t, alice, hook.URL)
	if err != nil {
		stop()
		t.Fatal(err)
	}
	hook.WaitState(t, a2a.TaskStateCompleted)
	stop()

	base, stop = run()
	defer stop()
	alice = a2aAs(t, base, aliceToken)
	got, err := alice.GetTaskPushConfig(t.Context(), &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "hook"})
	if err != nil {
		t.Fatalf("Get after restart: %v", err)
	}
	if diff := cmp.Diff(&a2a.PushConfig{URL: hook.URL, Auth: &a2a.PushAuthInfo{Scheme: "Bearer"}}, got,
		testcmp.Only[a2a.PushConfig]("URL", "Auth"), testcmp.Only[a2a.PushAuthInfo]("Scheme")); diff != "" {
		t.Fatalf("Get after restart (-want +got):\n%s", diff)
	}
	list, err := alice.ListTaskPushConfigs(t.Context(), &a2a.ListTaskPushConfigRequest{TaskID: task.ID})
	if err != nil || len(list) != 1 {
		t.Errorf("List after restart = %+v, %v", list, err)
	}
	if _, err := a2aAs(t, base, bobToken).GetTaskPushConfig(t.Context(), &a2a.GetTaskPushConfigRequest{TaskID: task.ID, ID: "hook"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's Get after restart = %v; want task not found", err)
	}
}
