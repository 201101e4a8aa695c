package delegation

import (
	"errors"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/internal/testagent"
)

// TestContain_CancelsWhatCannotBeInterrupted contains an agent whose card
// declares no steering: its running work is canceled, after a contained
// event, since it cannot be interrupted; new work and input for it are
// refused until it is released.
func TestContain_CancelsWhatCannotBeInterrupted(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Plain", Skill: "plain", Streaming: true}, testagent.Hang())
	f := newFixture(t, Config{})
	f.add(t, "plain", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "work", Agent: "plain"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)

	c, created, err := f.engine.Contain(t.Context(), "plain", "", "misbehaves", false)
	if err != nil || !created || c.By != "anonymous" || c.Cancel {
		t.Fatalf("Contain = %+v, %v, %v", c, created, err)
	}
	waitState(t, d, a2a.TaskStateCanceled)
	evs, _, _ := d.Events(0)
	i := slices.IndexFunc(evs, func(ev Event) bool { return ev.Kind == KindContained })
	if i < 0 || *evs[i].Containment != c || evs[i].State != a2a.TaskStateWorking || evs[len(evs)-1].State != a2a.TaskStateCanceled {
		t.Errorf("events %+v, want a contained event while working, then canceled", evs)
	}

	// Input for any work whose hop is the agent is refused while it is
	// contained.
	d2 := &Delegation{engine: f.engine, rec: Record{ID: "late", State: a2a.TaskStateWorking, Downstream: Hop{Agent: "plain"}}}
	if !f.engine.reaches(d2, "plain") {
		t.Error("work whose hop is the contained agent does not reach it")
	}
	if err := f.engine.containedFor(d2); !errors.Is(err, ErrContained) {
		t.Errorf("input to work reaching the contained agent: %v, want ErrContained", err)
	}
	if _, err := f.engine.Delegate(t.Context(), Request{Text: "more", Agent: "plain"}); err == nil {
		t.Error("new work for the contained agent was accepted")
	}
	if _, released, err := f.engine.Release(t.Context(), "plain", "ops"); err != nil || !released {
		t.Fatalf("Release = %v, %v", released, err)
	}
	if err := f.engine.containedFor(d2); err != nil {
		t.Errorf("input after the release: %v", err)
	}
}
