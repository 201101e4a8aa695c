package delegation

import (
	"errors"
	"strings"
	"testing"

	"github.com/orchd/orchd/internal/testagent"
)

// TestDelegate_WithID: the delegation takes the id given, in its record
// and its store; an id of another shape is refused before anything is
// sent; and the options fold, each thing asked for by the last option
// that asks for it.
func TestDelegate_WithID(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Echo", Skill: "echo"}, testagent.Reply("pong"))
	f := newFixtureStore(t, Config{}, NewMemoryStore(0))
	f.add(t, "echo", agent.URL)

	const id = "0f1e2d3c-4b5a-8968-8776-655443322110"
	d, err := f.engine.Delegate(t.Context(), Request{Text: "ping", Skill: "echo"}, WithID("first"), WithID(id))
	if err != nil {
		t.Fatal(err)
	}
	if d.ID() != id {
		t.Errorf("the delegation is %q, want %q", d.ID(), id)
	}
	if rec, err := f.engine.Lookup(t.Context(), id); err != nil || rec.ID != id || rec.Chain.RootTask != id {
		t.Errorf("lookup: %+v, %v", rec, err)
	}
	for _, bad := range []string{"with space", "slash/in/it", strings.Repeat("a", 65)} {
		_, err := f.engine.Delegate(t.Context(), Request{Text: "ping", Skill: "echo"}, WithID(bad))
		if !errors.Is(err, ErrBadRequest) {
			t.Errorf("WithID(%q): %v, want ErrBadRequest", bad, err)
		}
	}
	if n := len(agent.Messages()); n != 1 {
		t.Errorf("the agent got %d messages, want 1: refused ids send nothing", n)
	}
}
