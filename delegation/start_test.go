package delegation

import (
	"context"
	"errors"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/internal/testagent"
)

// endedFailsStore is an EndedStore whose one write of work ended at once
// fails, as a store that went away would.
type endedFailsStore struct{ *MemoryStore }

func (endedFailsStore) PutEnded(context.Context, Record, []Event) error {
	return errors.New("the store went away")
}

// TestDelegate_FailedWriteLeavesNoDelegation: when the record of work the
// agent ended at once cannot be written, Delegate fails with
// ErrUnavailable and, as its doc says, no delegation exists afterwards:
// none is live, none can be looked up.
func TestDelegate_FailedWriteLeavesNoDelegation(t *testing.T) {
	t.Parallel()
	f := newFixtureStore(t, Config{}, endedFailsStore{NewMemoryStore(0)})
	agent := testagent.Start(t, testagent.Options{Name: "Echo", Skill: "echo"}, testagent.Reply("pong"))
	f.add(t, "echo", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Skill: "echo", Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("ping"))})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("Delegate = %v, %v; want ErrUnavailable", d, err)
	}
	if live := f.engine.liveNow(); len(live) != 0 {
		t.Errorf("%d delegations live after Delegate failed, want none: %s", len(live), live[0].ID())
	}
}
