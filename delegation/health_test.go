package delegation

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testclock"
	"github.com/orchd/orchd/registry"
)

// stoppedAgent is agent b, registered, then stopped and delegated to until
// its breaker opened: three delegations failed with connection refused.
func stoppedAgent(t *testing.T) (*fixture, *testagent.Agent, *testclock.Clock) {
	t.Helper()
	agent := testagent.Start(t, testagent.Options{Name: "B", Skill: "s"}, testagent.Reply("hi"))
	clk := testclock.New(time.Now())
	f := newFixtureWith(t, registry.Config{Now: clk.Now, BreakerAfter: 3, BreakerMinBackoff: 10 * time.Second}, Config{})
	f.add(t, "b", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "hi", Agent: "b"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateCompleted)

	agent.Stop()
	for i := range 3 {
		_, err := f.engine.Delegate(t.Context(), Request{Text: "hi", Agent: "b"})
		var failed *FailedError
		// The first may find the connection kept alive from the delegation
		// before closed (EOF, "server closed idle connection"); the next
		// ones dial.
		if !errors.As(err, &failed) {
			t.Fatalf("delegation %d to the stopped agent: %v, want a FailedError", i+1, err)
		}
		if at := failed.Decision.Attempts; len(at) != 1 || at[0].Error == "" || i > 0 && !strings.Contains(at[0].Error, "connection refused") {
			t.Fatalf("delegation %d to the stopped agent: attempts %+v, want one refused connection", i+1, at)
		}
	}
	a, _ := f.reg.Get("b")
	if a.Healthy || a.Breaker.State != registry.BreakerOpen {
		t.Fatalf("after three refused calls: healthy %v, breaker %+v; want unhealthy and open", a.Healthy, a.Breaker)
	}
	if why := a.UnhealthyReason; !strings.Contains(why, "breaker open: 3 calls failed in a row, last: ") || !strings.Contains(why, "connection refused") {
		t.Fatalf("after three refused calls: unhealthy because %q", why)
	}
	return f, agent, clk
}

// refusedUnhealthy asserts that err refused agent b for its breaker
// before anything was sent.
func assertRefusedUnhealthy(t *testing.T, err error, retry string) {
	t.Helper()
	var refused *RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("err = %v, want *RefusedError", err)
	}
	d := refused.Decision
	if len(d.Attempts) != 0 {
		t.Fatalf("attempts %+v, want none: refused before anything was sent", d.Attempts)
	}
	if len(d.Candidates) != 1 {
		t.Fatalf("candidates %+v, want b alone", d.Candidates)
	}
	if c := d.Candidates[0]; c.Agent != "b" || len(c.Reasons) != 1 {
		t.Fatalf("candidate %+v, want b with one reason", c)
	}
	why := d.Candidates[0].Reasons[0]
	if !strings.HasPrefix(why, "unhealthy: 3 calls failed in a row, last: ") || !strings.Contains(why, "connection refused") ||
		!strings.HasSuffix(why, "; retry after "+retry) {
		t.Errorf("reason = %q", why)
	}
}

// An agent whose process died is refused, without being called, after
// three failed calls; it is used again once it is back, found by a call
// after the backoff or by a card refresh.
func TestDelegate_BreakerRefusesAStoppedAgentUntilItIsBack(t *testing.T) {
	t.Parallel()
	t.Run("a call after the backoff", func(t *testing.T) {
		t.Parallel()
		f, agent, clk := stoppedAgent(t)
		_, err := f.engine.Delegate(t.Context(), Request{Text: "hi", Agent: "b"})
		assertRefusedUnhealthy(t, err, "10s")
		dry, err := f.engine.Decide(t.Context(), Request{Text: "hi", Agent: "b"})
		if err != nil {
			t.Fatalf("dry run: %v", err)
		}
		if len(dry.Candidates) != 1 || dry.Candidates[0].Allowed {
			t.Errorf("dry run candidates %+v, want b refused", dry.Candidates)
		}

		agent.Restart(t)
		clk.Advance(4 * time.Second)
		calls := len(agent.Calls())
		_, err = f.engine.Delegate(t.Context(), Request{Text: "hi", Agent: "b"})
		assertRefusedUnhealthy(t, err, "6s")
		if got := len(agent.Calls()); got != calls {
			t.Errorf("the refused delegation called the agent: %d calls, had %d", got, calls)
		}

		clk.Advance(6 * time.Second)
		d, err := f.engine.Delegate(t.Context(), Request{Text: "hi", Agent: "b"})
		if err != nil {
			t.Fatalf("after the backoff: %v", err)
		}
		waitState(t, d, a2a.TaskStateCompleted)
		a, _ := f.reg.Get("b")
		if !a.Healthy {
			t.Errorf("unhealthy after a call succeeded: %s", a.UnhealthyReason)
		}
		reset := cmp.Options{cmpopts.IgnoreUnexported(registry.Breaker{}), cmpopts.IgnoreFields(registry.Breaker{}, "LastError", "RetryAt")}
		if diff := cmp.Diff(registry.Breaker{State: registry.BreakerClosed}, a.Breaker, reset); diff != "" {
			t.Errorf("breaker after a call succeeded (-want +got):\n%s", diff)
		}
	})
	t.Run("a card refresh", func(t *testing.T) {
		t.Parallel()
		f, agent, _ := stoppedAgent(t)
		if _, err := f.reg.Refresh(t.Context(), "b"); err == nil {
			t.Fatal("refreshing the stopped agent's card worked")
		}
		_, err := f.engine.Delegate(t.Context(), Request{Text: "hi", Agent: "b"})
		assertRefusedUnhealthy(t, err, "10s")

		agent.Restart(t)
		a, err := f.reg.Refresh(t.Context(), "b")
		if err != nil {
			t.Fatalf("refresh after restart: %v", err)
		}
		if !a.Healthy || a.Breaker.State != registry.BreakerClosed {
			t.Fatalf("refresh after restart: healthy %v, breaker %+v; want healthy and closed", a.Healthy, a.Breaker)
		}
		d, err := f.engine.Delegate(t.Context(), Request{Text: "hi", Agent: "b"})
		if err != nil {
			t.Fatalf("after the card refresh: %v", err)
		}
		waitState(t, d, a2a.TaskStateCompleted)
	})
}

// With a stopped agent and a live one, delegations stop trying the
// stopped one once its breaker is open.
func TestDelegate_BreakerSkipsTheStoppedCandidate(t *testing.T) {
	t.Parallel()
	b := testagent.Start(t, testagent.Options{Name: "B", Skill: "s"}, testagent.Reply("from b"))
	c := testagent.Start(t, testagent.Options{Name: "C", Skill: "s"}, testagent.Reply("from c"))
	f := newFixtureWith(t, registry.Config{BreakerMinBackoff: time.Hour}, Config{})
	f.add(t, "b", b.URL)
	f.add(t, "c", c.URL)
	b.Stop()
	for i := range 4 {
		d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "s"})
		if err != nil {
			t.Fatalf("delegation %d: %v", i+1, err)
		}
		r := waitState(t, d, a2a.TaskStateCompleted)
		var tried []string
		for _, at := range r.Decision.Attempts {
			tried = append(tried, at.Agent)
		}
		want := "b,c"
		if i == 3 {
			want = "c"
			if why := r.Decision.Candidates[len(r.Decision.Candidates)-1]; why.Agent != "b" || why.Allowed {
				t.Errorf("last candidate %+v, want b refused", why)
			} else if len(why.Reasons) != 1 || !strings.HasPrefix(why.Reasons[0], "unhealthy: 3 calls failed in a row") {
				t.Errorf("b refused for %q, want only: unhealthy: 3 calls failed in a row…", why.Reasons)
			}
		}
		if got := strings.Join(tried, ","); got != want || r.Decision.Chosen != "c" {
			t.Errorf("delegation %d tried %s, chose %s; want %s then c", i+1, got, r.Decision.Chosen, want)
		}
	}
}

// Only failures that are the agent's doing count toward its breaker.
func TestDelegate_BreakerCountsOnlyTheAgentsFailures(t *testing.T) {
	t.Parallel()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	broken := func(status int) func(t *testing.T) (string, func()) {
		return func(t *testing.T) (string, func()) { return testagent.BrokenStatus(t, "A", "s", status).URL, func() {} }
	}
	stopped := func(t *testing.T) (string, func()) {
		a := testagent.Start(t, testagent.Options{Name: "A", Skill: "s"}, testagent.Reply("x"))
		return a.URL, a.Stop
	}
	// silent agents take the work and never answer.
	silent := func(streaming bool) func(t *testing.T) (string, func()) {
		return func(t *testing.T) (string, func()) {
			a := testagent.Start(t, testagent.Options{Name: "A", Skill: "s", Streaming: streaming},
				func(ctx context.Context, _ *a2asrv.ExecutorContext, _ func(a2a.Event, error) bool) { <-ctx.Done() })
			return a.URL, func() {}
		}
	}
	now := func() Request { return Request{Text: "x", Agent: "b"} }
	soon := func() Request {
		return Request{Text: "x", Agent: "b", Deadline: time.Now().Add(150 * time.Millisecond)}
	}
	quick := Config{CallTimeout: 100 * time.Millisecond}
	tests := []struct {
		name string
		// agent serves a card; after runs once it is registered.
		agent    func(t *testing.T) (url string, after func())
		cfg      Config
		req      func() Request
		ctx      context.Context
		failure  string
		wantOpen bool
	}{
		{"503", broken(http.StatusServiceUnavailable), Config{}, now, t.Context(), "503 Service Unavailable", true},
		{"500", broken(http.StatusInternalServerError), Config{}, now, t.Context(), "500 Internal Server Error", true},
		{"connection refused", stopped, Config{}, now, t.Context(), "connection refused", true},
		{"no answer within callTimeout", silent(false), quick, now, t.Context(), "did not answer within callTimeout", true},
		{"no first event within callTimeout", silent(true), quick, now, t.Context(), "did not answer within callTimeout", true},
		{"404", broken(http.StatusNotFound), Config{}, now, t.Context(), "404 Not Found", false},
		{"429", broken(http.StatusTooManyRequests), Config{}, now, t.Context(), "429 Too Many Requests", false},
		{"canceled by the caller", stopped, Config{}, now, canceled, "context canceled", false},
		{"the chain's deadline came first", silent(false), Config{}, soon, t.Context(), "delegation deadline passed", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixtureWith(t, registry.Config{BreakerMinBackoff: time.Hour}, tt.cfg)
			url, after := tt.agent(t)
			f.add(t, "b", url)
			after()
			for i := range 5 {
				_, err := f.engine.Delegate(tt.ctx, tt.req())
				var failed *FailedError
				if i < 3 && (!errors.As(err, &failed) || !strings.Contains(failed.Decision.Attempts[0].Error, tt.failure)) {
					t.Fatalf("delegation %d: %v, want it to fail with %q", i+1, err, tt.failure)
				}
				if refused := errors.As(err, new(*RefusedError)); refused != (i >= 3 && tt.wantOpen) {
					t.Fatalf("delegation %d: %v", i+1, err)
				}
			}
			a, _ := f.reg.Get("b")
			if open := a.Breaker.State == registry.BreakerOpen; open != tt.wantOpen || a.Healthy == tt.wantOpen {
				t.Errorf("breaker %+v, healthy %v; want open %v", a.Breaker, a.Healthy, tt.wantOpen)
			}
		})
	}
}

// After the backoff, of many delegations at once exactly one calls the
// still stopped agent; the others are refused without calling it.
func TestDelegate_BreakerLetsOneCallTryAgain(t *testing.T) {
	t.Parallel()
	f, _, clk := stoppedAgent(t)
	clk.Advance(10 * time.Second)
	const callers = 16
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for range callers {
		wg.Go(func() {
			_, err := f.engine.Delegate(t.Context(), Request{Text: "hi", Agent: "b"})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	tried := 0
	for err := range errs {
		var failed *FailedError
		switch {
		case errors.As(err, &failed):
			// Chosen before the breaker let another call try, or reopened:
			// refused when about to send.
			why := failed.Decision.Attempts[0].Error
			switch {
			case strings.HasPrefix(why, registry.ErrBreakerOpen.Error()+": "):
				if !strings.HasSuffix(why, "; one call is trying it again") && !strings.HasSuffix(why, "; retry after 20s") {
					t.Errorf("attempt refused by the breaker: %q", why)
				}
			case strings.Contains(why, "connection refused"):
				tried++
			default:
				t.Errorf("attempt = %q", why)
			}
		case errors.As(err, new(*RefusedError)):
		default:
			t.Errorf("err = %v", err)
		}
	}
	if tried != 1 {
		t.Errorf("%d delegations called the stopped agent after the backoff, want 1", tried)
	}
	if a, _ := f.reg.Get("b"); a.Breaker.State != registry.BreakerOpen || a.Breaker.Opens != 2 {
		t.Errorf("after the failed try: breaker %+v", a.Breaker)
	}
}

// agentFault is decided on the errors real a2a-go clients return from
// real servers.
func TestAgentFault(t *testing.T) {
	t.Parallel()
	live := testagent.Start(t, testagent.Options{Name: "Live", Skill: "s"}, testagent.Reply("x"))
	boom := testagent.Start(t, testagent.Options{Name: "Boom", Skill: "s"},
		func(_ context.Context, _ *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
			yield(nil, errors.New("boom"))
		})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the server then notices the client leave
		<-r.Context().Done()
	}))
	t.Cleanup(slow.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedURL := "http://" + ln.Addr().String()
	ln.Close()

	client := func(url string) *a2aclient.Client {
		t.Helper()
		c, err := a2aclient.NewFromEndpoints(t.Context(), []*a2a.AgentInterface{a2a.NewAgentInterface(url, a2a.TransportProtocolJSONRPC)})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	send := func(ctx context.Context, c *a2aclient.Client) error {
		_, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x"))})
		return err
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name string
		call func(ctx context.Context) error
		// ctx is the caller's; the call may have a shorter one.
		ctx  context.Context
		want bool
	}{
		{"connection refused", func(ctx context.Context) error { return send(ctx, client(closedURL)) }, t.Context(), true},
		{"HTTP 503", func(ctx context.Context) error { return send(ctx, client(testagent.Broken(t, "B", "s").URL+"/rpc")) }, t.Context(), true},
		{"internal error", func(ctx context.Context) error { return send(ctx, testagent.Client(t, boom.URL)) }, t.Context(), true},
		{"no answer within the call's timeout", func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			return send(ctx, client(slow.URL))
		}, t.Context(), true},
		{"HTTP 404", func(ctx context.Context) error { return send(ctx, client(live.URL+"/nowhere")) }, t.Context(), false},
		{"task not found", func(ctx context.Context) error {
			_, err := testagent.Client(t, live.URL).GetTask(ctx, &a2a.GetTaskRequest{ID: "no-such-task"})
			return err
		}, t.Context(), false},
		{"invalid params", func(ctx context.Context) error {
			_, err := testagent.Client(t, live.URL).SendMessage(ctx, &a2a.SendMessageRequest{Message: &a2a.Message{Role: a2a.MessageRoleUser}})
			return err
		}, t.Context(), false},
		{"canceled by the caller", func(ctx context.Context) error { return send(ctx, client(closedURL)) }, canceled, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.call(tt.ctx)
			if err == nil {
				t.Fatal("the call worked")
			}
			t.Logf("%T: %v", err, err)
			if got := agentFault(tt.ctx, err); got != tt.want {
				t.Errorf("agentFault(%v) = %v, want %v", err, got, tt.want)
			}
		})
	}
}
