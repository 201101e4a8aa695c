package delegation

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
)

// caller is an authenticated caller for the limit tests.
func caller(principal, tenant string) policies.Caller {
	return policies.Caller{Principal: principal, Tenant: tenant, Method: "token", Authenticated: true}
}

// sends counts the messages that reached the agent.
func sends(a *testagent.Agent) int {
	n := 0
	for _, m := range a.Calls() {
		if m == "SendMessage" || m == "SendStreamingMessage" {
			n++
		}
	}
	return n
}

// wantLimit fails the test unless err is a refusal by setting.
func wantLimit(t *testing.T, err error, setting string) {
	t.Helper()
	var le *LimitError
	if !errors.Is(err, ErrResourceExhausted) || !errors.As(err, &le) || le.Setting != setting {
		t.Fatalf("err = %v, want a refusal by %s", err, setting)
	}
	if !strings.Contains(err.Error(), setting) {
		t.Errorf("the refusal does not name %s: %q", setting, err)
	}
}

func TestLimits_NodeRefusesBeforeSendingAndFreesAtTheEnd(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true}, testagent.Hang())
	f := newFixture(t, Config{MaxRunning: 2})
	f.add(t, "slow", agent.URL)
	var started []*Delegation
	for range 2 {
		d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow"})
		if err != nil {
			t.Fatal(err)
		}
		started = append(started, d)
	}
	_, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow"})
	wantLimit(t, err, SettingMaxRunning)
	if n := sends(agent); n != 2 {
		t.Errorf("the agent got %d messages, want 2: the refused work reached it", n)
	}
	// A delegation that ends gives its slot back.
	if r, err := f.engine.Cancel(t.Context(), started[0].ID()); err != nil || r.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel: %v, %s", err, r.State)
	}
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow"})
	if err != nil {
		t.Fatalf("after one ended: %v", err)
	}
	waitState(t, d, a2a.TaskStateWorking)
}

func TestLimits_PerCallerRefusesOnlyThatCaller(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true}, testagent.Hang())
	f := newFixture(t, Config{MaxRunning: 10, MaxRunningPerCaller: 1})
	f.add(t, "slow", agent.URL)
	alice, bob := caller("alice", ""), caller("bob", "")
	if _, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow", Caller: alice}); err != nil {
		t.Fatal(err)
	}
	_, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow", Caller: alice})
	wantLimit(t, err, SettingMaxRunningPerCaller)
	if !strings.Contains(err.Error(), "principal token:alice") {
		t.Errorf("the refusal does not name the caller: %q", err)
	}
	if _, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow", Caller: bob}); err != nil {
		t.Errorf("bob, with none running: %v", err)
	}
	// Two principals of one tenant share its limit.
	if _, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow", Caller: caller("carol", "acme")}); err != nil {
		t.Fatal(err)
	}
	_, err = f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow", Caller: caller("dave", "acme")})
	wantLimit(t, err, SettingMaxRunningPerCaller)
	// Work without an authenticated caller is held by the node's limit
	// alone.
	for range 2 {
		if _, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow"}); err != nil {
			t.Errorf("anonymous work: %v", err)
		}
	}
	if n := sends(agent); n != 5 {
		t.Errorf("the agent got %d messages, want 5", n)
	}
}

// TestLimits_ConcurrentStartsTakeNoMoreThanTheLimit starts more work at
// once than the limit holds: exactly the limit is admitted, and every
// slot comes back once the work ends, started or not.
func TestLimits_ConcurrentStartsTakeNoMoreThanTheLimit(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true}, testagent.Hang())
	const limit, tries = 4, 16
	f := newFixture(t, Config{MaxRunning: limit})
	f.add(t, "slow", agent.URL)
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		started []*Delegation
		refused int
	)
	for range tries {
		wg.Go(func() {
			d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				started = append(started, d)
			case errors.Is(err, ErrResourceExhausted):
				refused++
			default:
				t.Errorf("delegate: %v", err)
			}
		})
	}
	wg.Wait()
	if len(started) != limit || refused != tries-limit {
		t.Fatalf("%d started and %d refused, want %d and %d", len(started), refused, limit, tries-limit)
	}
	if n := sends(agent); n != limit {
		t.Errorf("the agent got %d messages, want %d", n, limit)
	}
	for _, d := range started {
		if _, err := f.engine.Cancel(t.Context(), d.ID()); err != nil {
			t.Fatal(err)
		}
	}
	f.engine.running.mu.Lock()
	n := f.engine.running.n
	f.engine.running.mu.Unlock()
	if n != 0 {
		t.Errorf("%d slots held with nothing running", n)
	}
}

// TestLimits_FailedStartGivesTheSlotBack checks that work no agent
// accepted holds no slot.
func TestLimits_FailedStartGivesTheSlotBack(t *testing.T) {
	t.Parallel()
	broken := testagent.Broken(t, "Broken", "slow")
	f := newFixture(t, Config{MaxRunning: 1})
	f.add(t, "broken", broken.URL)
	for range 2 {
		_, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow"})
		if !errors.As(err, new(*FailedError)) {
			t.Fatalf("err = %v, want the agent's failure, not the limit", err)
		}
	}
}

// TestLimits_ResumedWorkCountsButIsNotRefused restarts with more running
// delegations in the store than the new engine's limit: every one is
// carried on, and they hold the slots new work would take.
func TestLimits_ResumedWorkCountsButIsNotRefused(t *testing.T) {
	t.Parallel()
	store := NewMemoryStore(0)
	agent := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true}, testagent.Hang())
	f := newFixtureStore(t, Config{}, store)
	f.add(t, "slow", agent.URL)
	var ids []string
	for range 2 {
		d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow", Caller: caller("alice", "")})
		if err != nil {
			t.Fatal(err)
		}
		waitState(t, d, a2a.TaskStateWorking)
		ids = append(ids, d.ID())
	}
	e := f.restart(t, Config{MaxRunning: 1, MaxRunningPerCaller: 1}, store)
	for _, id := range ids {
		d, ok := e.Get(id)
		if !ok {
			t.Fatalf("%s was not carried on", id)
		}
		waitState(t, d, a2a.TaskStateWorking)
	}
	before := sends(agent)
	_, err := e.Delegate(t.Context(), Request{Text: "x", Skill: "slow", Caller: caller("bob", "")})
	wantLimit(t, err, SettingMaxRunning)
	if n := sends(agent); n != before {
		t.Errorf("the refused work reached the agent")
	}
	// Each carried-on delegation gives its slot back when it ends.
	for _, id := range ids {
		if _, err := e.Cancel(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Delegate(t.Context(), Request{Text: "x", Skill: "slow", Caller: caller("alice", "")}); err != nil {
		t.Errorf("after the carried-on work ended: %v", err)
	}
}

// TestLimits_OutOfFilesRefusesTheWork delegates, in a process of its own,
// with every file descriptor the process may open taken: the work is
// refused as over open files, not failed, and the agent's breaker is not
// charged with it.
func TestLimits_OutOfFilesRefusesTheWork(t *testing.T) {
	t.Parallel()
	if !lowersOpenFiles {
		t.Skip("no open-files limit to lower on this system")
	}
	agent := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow"}, testagent.Hang())
	out, err := helpers.Command(t, "out-of-files", agent.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("out-of-files: %v\n%s", err, out)
	}
	if n := sends(agent); n != 0 {
		t.Errorf("the agent got %d messages", n)
	}
}

// outOfFilesHelper registers the agent at args[0], lowers the process's
// open-files limit to 128 and fills it, then delegates three times (as
// many failures as open an agent's breaker by default): each must be
// refused as over open files, and the agent must still be admitted.
func outOfFilesHelper(args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, format+"\n", a...)
		return 1
	}
	reg, err := registry.New(registry.Config{AllowNetworks: []string{"127.0.0.0/8"}}, nil)
	if err != nil {
		return fail("registry: %v", err)
	}
	defer reg.Close()
	if _, err := reg.Add(context.Background(), registry.Spec{ID: "slow", URL: args[0]}); err != nil {
		return fail("add the agent: %v", err)
	}
	pol, err := policies.NewEngine(nil, policies.Options{}, nil)
	if err != nil {
		return fail("policies: %v", err)
	}
	transport, err := registry.NewTransport(registry.Config{AllowNetworks: []string{"127.0.0.0/8"}})
	if err != nil {
		return fail("transport: %v", err)
	}
	e := NewEngine(reg, pol, NewMemoryStore(0), Config{HTTPClient: &http.Client{Transport: transport}}, nil)
	defer e.Close()
	if err := lowerOpenFiles(128); err != nil {
		return fail("lower the open files limit: %v", err)
	}
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	for {
		f, err := os.Open(os.DevNull)
		if err != nil {
			if !errors.Is(err, syscall.EMFILE) {
				return fail("fill the open files: %v", err)
			}
			break
		}
		held = append(held, f)
	}
	for range 3 {
		_, err := e.Delegate(context.Background(), Request{Text: "x", Skill: "slow"})
		var le *LimitError
		if !errors.As(err, &le) || le.Setting != SettingOpenFiles || !strings.Contains(err.Error(), "open files") {
			return fail("delegate with no file descriptor left: err = %v, want a refusal naming open files", err)
		}
	}
	if err := reg.Admit("slow"); err != nil {
		return fail("the agent's breaker was charged: %v", err)
	}
	return 0
}
