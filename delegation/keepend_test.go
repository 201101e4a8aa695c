package delegation

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/internal/testwait"
)

// endRefusingStore refuses every write of a delegation's end while
// refuse is set, as a store that is down at that moment does, and counts
// the writes it refused. With eventOnly it refuses only the end's event,
// as a store does whose events' stream elects a leader while its
// records' stream has one.
type endRefusingStore struct {
	*MemoryStore
	eventOnly bool
	refuse    atomic.Bool
	refused   atomic.Int32
}

func (s *endRefusingStore) Put(ctx context.Context, r Record) error {
	if r.State.Terminal() && s.refuse.Load() && !s.eventOnly {
		s.refused.Add(1)
		return errors.New("the store is down")
	}
	return s.MemoryStore.Put(ctx, r)
}

func (s *endRefusingStore) Append(ctx context.Context, id string, ev Event) error {
	if ev.State.Terminal() && s.refuse.Load() {
		s.refused.Add(1)
		return errors.New("the store is down")
	}
	return s.MemoryStore.Append(ctx, id, ev)
}

// endRefused runs a delegation to its end on an engine whose store
// refuses the end, and returns once the end was refused a few times, the
// store still showing the delegation running.
func endRefused(t *testing.T, eventOnly bool) (*fixture, *endRefusingStore, *Delegation) {
	t.Helper()
	store := &endRefusingStore{MemoryStore: NewMemoryStore(0), eventOnly: eventOnly}
	store.refuse.Store(true)
	f, _, d := delegateToWorker(t, store, true, 200*time.Millisecond)
	waitState(t, d, a2a.TaskStateCompleted)
	testwait.Until(t, 10*time.Second, "the end to be tried again", func() bool { return store.refused.Load() >= 3 })
	if r, err := store.MemoryStore.Get(t.Context(), d.ID()); err != nil || r.State.Terminal() {
		t.Fatalf("stored while the store refuses the end: %s, %v; want it running", r.State, err)
	}
	return f, store, d
}

// TestKeepEnd_WrittenOnceTheStoreIsBack ends a delegation while the store
// refuses its end: the store goes on showing it running while it refuses,
// and once it takes writes again the end is there, its log whole and the
// delegation no longer running.
//
// When only the end's event is refused, the record is not written ahead
// of its log either: a reader of the store would wait for an end the log
// never gets.
func TestKeepEnd_WrittenOnceTheStoreIsBack(t *testing.T) {
	t.Parallel()
	for _, eventOnly := range []bool{false, true} {
		t.Run(map[bool]string{false: "end refused", true: "end event refused"}[eventOnly], func(t *testing.T) {
			t.Parallel()
			_, store, d := endRefused(t, eventOnly)
			store.refuse.Store(false)
			waitStoredCompleted(t, store.MemoryStore, d.ID())
			if ids, err := store.Running(t.Context()); err != nil || len(ids) != 0 {
				t.Errorf("running in the store once the end is kept: %v, %v", ids, err)
			}
			evs, err := store.MemoryStore.Events(t.Context(), d.ID(), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if ends := logEnds(t, evs); ends != 1 || !evs[len(evs)-1].State.Terminal() {
				t.Errorf("the log holds %d ends, want one, last: %+v", ends, evs)
			}
		})
	}
}

// TestKeepEnd_ClosedBeforeTheStoreIsBack closes the engine while the
// store still refuses a delegation's end: Close does not wait for the
// store, the record still says running, and the next process carries the
// delegation on and keeps the end the agent reports.
func TestKeepEnd_ClosedBeforeTheStoreIsBack(t *testing.T) {
	t.Parallel()
	f, store, d := endRefused(t, false)
	closed := make(chan struct{})
	go func() { f.engine.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waits for a store that refuses the end")
	}
	if r, err := store.MemoryStore.Get(t.Context(), d.ID()); err != nil || r.State.Terminal() {
		t.Fatalf("stored after Close: %s, %v; want it running", r.State, err)
	}
	_, resumed := f.restartFollowing(t, Config{}, store.MemoryStore, d.ID())
	waitState(t, resumed, a2a.TaskStateCompleted)
	waitStoredCompleted(t, store.MemoryStore, d.ID())
}

// waitStoredCompleted waits until store holds delegation id COMPLETED.
func waitStoredCompleted(t *testing.T, store *MemoryStore, id string) {
	t.Helper()
	testwait.Succeeds(t, 10*time.Second, "the end stored", func() error {
		r, err := store.Get(t.Context(), id)
		if err == nil && r.State != a2a.TaskStateCompleted {
			err = errors.New("stored " + string(r.State))
		}
		return err
	})
}
