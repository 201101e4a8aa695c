package delegation

import (
	"errors"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/internal/testwait"
)

// TestKeepWrites_AQuietDelegationCatchesUp refuses a running
// delegation's events while its agent streams them, then lets the store
// take writes again while the agent stays quiet: the engine writes the
// events and the record again by itself, so the store holds everything
// before the agent's next event; and the log stays whole to the end.
func TestKeepWrites_AQuietDelegationCatchesUp(t *testing.T) {
	t.Parallel()
	store := &appendRefusingStore{MemoryStore: NewMemoryStore(0)}
	store.refuse.Store(true)
	hold := make(chan struct{})
	f, d := streamHeld(t, store, 2, hold)
	if evs, err := store.MemoryStore.Events(t.Context(), d.ID(), 0, 0); err != nil || len(evs) != 0 {
		t.Fatalf("the store took %d events while it refused them (%v)", len(evs), err)
	}
	store.refuse.Store(false)
	want := d.Record().LastEvent
	testwait.Succeeds(t, 10*time.Second, "the quiet delegation's events and record in the store", func() error {
		evs, err := store.MemoryStore.Events(t.Context(), d.ID(), 0, 0)
		if err != nil {
			return err
		}
		rec, err := store.MemoryStore.Get(t.Context(), d.ID())
		switch {
		case err != nil:
			return err
		case int64(len(evs)) != want || rec.LastEvent != want:
			return errors.New("behind the delegation")
		}
		return nil
	})
	close(hold)
	waitState(t, d, a2a.TaskStateCompleted)
	waitStoredCompleted(t, store.MemoryStore, d.ID())
	wholeLog(t, f, d)
}
