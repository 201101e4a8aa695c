package store

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/nats-io/nats.go/jetstream"

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

	for round := range 3 { // each round: a new process finds it two ways at once
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
		if n := seals(t, dels, d.ID()); n != round+1 {
			t.Errorf("after %d takeovers the log holds %d seals, want one each", round+1, n)
		}
	}
}

// seals counts the seals in the log of delegation id.
func seals(t *testing.T, d *Delegations, id string) int {
	t.Helper()
	key, err := delegationKey(id)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for seq := uint64(1); ; {
		m, err := d.events.GetMsg(t.Context(), seq, jetstream.WithGetMsgSubject(d.eventsPf+key))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get(sealHeader) != "" {
			n++
		}
		seq = m.Sequence + 1
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
