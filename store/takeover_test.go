package store

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testengine"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// TestTakeOver_ResumedOnce: a running delegation nobody follows, found at
// once by the engine's look for delegations to carry on and by an
// operation on it, is resumed once: its task is subscribed to once (its
// stream starts with the task, so it is not read besides), not followed
// twice (a process taking a lease it already holds is
// given it again, so only the engine can tell).
func TestTakeOver_ResumedOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out lease expiries (about 10 s)")
	}
	t.Parallel()
	s := openTest(t, "", Config{})
	dels, err := s.Delegations(t.Context(), DelegationsConfig{})
	if err != nil {
		t.Fatal(err)
	}
	leases := leasesOf(t, s, 10*time.Second)
	agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work", Streaming: true}, testagent.Hang())
	parts := testengine.New(t, registry.Spec{ID: "worker", URL: agent.URL})
	engine := func(instance string) *delegation.Engine {
		e := delegation.NewEngine(parts.Registry, parts.Policies, dels, delegation.Config{Self: "a", Instance: instance,
			Leases: leases, Relay: s.Relay(), HTTPClient: parts.HTTPClient}, nil)
		t.Cleanup(e.Close)
		return e
	}
	first := engine("first")
	d, err := first.Delegate(t.Context(), delegation.Request{Skill: "work", Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Succeeds(t, 10*time.Second, "the delegation working", func() error {
		if s := d.Record().State; s != a2a.TaskStateWorking {
			return fmt.Errorf("state %s", s)
		}
		return nil
	})
	first.Close() // gives its lease up; the agent's task runs on
	before := agent.Calls()

	for range 3 { // each round: a new process finds it two ways at once
		second := engine("second")
		done := make(chan error, 1)
		go func() { done <- second.Start(t.Context()) }()
		if _, err := second.Send(t.Context(), d.ID(), a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("more"))); !errors.Is(err, delegation.ErrNotWaiting) {
			t.Fatalf("Send = %v, want ErrNotWaiting from the process that took it over", err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		testwait.Succeeds(t, 10*time.Second, "the task followed again", func() error {
			if calls := agent.Calls()[len(before):]; countOf(calls, "SubscribeToTask") == 0 {
				return fmt.Errorf("the agent's calls since: %v", calls)
			}
			return nil
		})
		second.Close() // waits for its followers, and gives the lease up
		calls := agent.Calls()[len(before):]
		before = agent.Calls()
		for m, want := range map[string]int{"GetTask": 0, "SubscribeToTask": 1} {
			if n := countOf(calls, m); n != want {
				t.Fatalf("the task was carried on with %d %s calls, want %d: %v", n, m, want, calls)
			}
		}
	}
}

func countOf(calls []string, method string) int {
	n := 0
	for c := range slices.Values(calls) {
		if c == method {
			n++
		}
	}
	return n
}
