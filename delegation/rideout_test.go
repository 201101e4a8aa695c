package delegation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/internal/syncbuf"
	"github.com/orchd/orchd/internal/testwait"
)

// readRefusingStore fails every read while down is set, as a store whose
// events' stream elects a leader does, and counts the reads it refused.
type readRefusingStore struct {
	*MemoryStore
	down    atomic.Bool
	refused atomic.Int32
}

func (s *readRefusingStore) refuse() error {
	s.refused.Add(1)
	return fmt.Errorf("read the log: %w: no leader", ErrUnavailable)
}

func (s *readRefusingStore) Get(ctx context.Context, id string) (Record, error) {
	if s.down.Load() {
		return Record{}, s.refuse()
	}
	return s.MemoryStore.Get(ctx, id)
}

func (s *readRefusingStore) Events(ctx context.Context, id string, after int64, limit int) ([]Event, error) {
	if s.down.Load() {
		return nil, s.refuse()
	}
	return s.MemoryStore.Events(ctx, id, after, limit)
}

func (s *readRefusingStore) Wait(ctx context.Context, id string, after int64) error {
	if s.down.Load() {
		return s.refuse()
	}
	return s.MemoryStore.Wait(ctx, id, after)
}

// TestRideOut_FollowersWaitForTheStore follows a delegation another
// process holds, so every read goes to the store, while the store fails
// them as unavailable: each follower waits and reads again rather than
// fail, gets the next event once the store answers, and the engine logs
// the outage in two lines for all of them. A follower whose caller goes
// stops waiting at once.
func TestRideOut_FollowersWaitForTheStore(t *testing.T) {
	t.Parallel()
	store := &readRefusingStore{MemoryStore: NewMemoryStore(0)}
	working := Record{ID: "d1", State: a2a.TaskStateWorking, LastEvent: 1, CreatedAt: time.Now()}
	if err := store.Append(t.Context(), "d1", Event{Seq: 1, Kind: "state", State: a2a.TaskStateWorking}); err != nil {
		t.Fatal(err)
	}
	if err := store.Put(t.Context(), working); err != nil {
		t.Fatal(err)
	}
	logs := &syncbuf.Buffer{}
	e := NewEngine(nil, nil, store, Config{}, slog.New(slog.NewTextHandler(logs, nil)))
	t.Cleanup(e.Close)
	store.down.Store(true)

	const followers = 3
	got := make([][]Event, followers)
	errs := make([]error, followers)
	var wg sync.WaitGroup
	for i := range followers {
		wg.Go(func() {
			if errs[i] = e.WaitEvents(t.Context(), "d1", 1); errs[i] == nil {
				got[i], _, errs[i] = e.FollowEvents(t.Context(), "d1", 1, 0)
			}
		})
	}
	gone, leave := context.WithCancel(t.Context())
	left := make(chan error, 1)
	go func() { left <- e.WaitEvents(gone, "d1", 1) }()
	testwait.Until(t, 10*time.Second, "the followers reading again", func() bool { return store.refused.Load() >= 3*followers })
	leave()
	select {
	case err := <-left:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("a follower whose caller went ended with %v, want its context's cause", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("a follower whose caller went still waits for the store")
	}

	completed := Event{Seq: 2, Kind: "state", State: a2a.TaskStateCompleted}
	if err := store.MemoryStore.Append(t.Context(), "d1", completed); err != nil {
		t.Fatal(err)
	}
	working.State, working.LastEvent = a2a.TaskStateCompleted, 2
	if err := store.MemoryStore.Put(t.Context(), working); err != nil {
		t.Fatal(err)
	}
	store.down.Store(false)
	wg.Wait()
	for i := range followers {
		if errs[i] != nil || len(got[i]) != 1 || got[i][0].Seq != 2 {
			t.Errorf("follower %d: %+v, %v; want event 2", i, got[i], errs[i])
		}
	}
	testwait.Until(t, 10*time.Second, "the outage's end in the log", func() bool {
		return strings.Contains(logs.String(), "followers' reads of delegation events go through again")
	})
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "it waits and reads again") {
		t.Errorf("%d failed reads logged:\n%s\nwant the outage's start and end", store.refused.Load(), logs.String())
	}
}
