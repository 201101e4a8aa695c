package delegation

import (
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/internal/testagent"
)

// TestWaitEvents_FollowsTheLogOnceForgotten: a reader waiting for a
// delegation's next event while this process follows it goes on waiting
// on the store once the process stops following it (its lease lost:
// another process follows it and writes its log), and is woken by the
// event that process logs.
func TestWaitEvents_FollowsTheLogOnceForgotten(t *testing.T) {
	t.Parallel()
	store := NewMemoryStore(0)
	f := newFixtureStore(t, Config{}, store)
	agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work", Streaming: true}, testagent.Hang())
	f.add(t, "worker", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Skill: "work", Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	rec := waitState(t, d, a2a.TaskStateWorking)
	waited := make(chan error, 1)
	go func() { waited <- f.engine.WaitEvents(t.Context(), d.ID(), rec.LastEvent) }()
	time.Sleep(50 * time.Millisecond) // the reader waits on the live delegation
	d.stop()
	f.engine.forget(d.ID())
	select {
	case err := <-waited:
		t.Fatalf("WaitEvents returned %v before any event", err)
	case <-time.After(50 * time.Millisecond):
	}
	next := Event{Seq: rec.LastEvent + 1, Kind: "state", State: a2a.TaskStateWorking, At: time.Now()}
	if err := store.Append(t.Context(), d.ID(), next); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("WaitEvents = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the reader was not woken by the event another process logged")
	}
}
