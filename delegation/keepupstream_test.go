package delegation

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/internal/testagent"
)

// keptFirstStore is an EndedStore whose PutEnded waits, up to 5 seconds,
// for the upstream task to be kept first: it stores only what the engine
// keeps alongside it, never after it.
type keptFirstStore struct {
	*MemoryStore
	kept chan struct{}
}

func (s *keptFirstStore) PutEnded(ctx context.Context, r Record, evs []Event) error {
	select {
	case <-s.kept:
	case <-time.After(5 * time.Second):
		return errors.New("PutEnded ran alone: the upstream task was not being kept alongside")
	}
	for _, ev := range evs {
		if err := s.Append(ctx, r.ID, ev); err != nil {
			return err
		}
	}
	return s.Put(ctx, r)
}

// TestDelegate_KeepUpstreamAlongsideTheRecord: when the agent's first
// answer is a task that ended the work, KeepEndedUpstream's keep is called
// with the ended record and its events while the record is stored (the
// store's write waits for it here), and has returned when Delegate does.
// A message answer, or work that goes on, calls it not at all.
func TestDelegate_KeepUpstreamAlongsideTheRecord(t *testing.T) {
	t.Parallel()
	doneAtOnce := func(_ context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		task := a2a.NewSubmittedTask(ec, ec.Message)
		task.Artifacts = []*a2a.Artifact{{ID: "result", Parts: a2a.ContentParts{a2a.NewTextPart("pong")}}}
		task.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done"))}
		yield(task, nil)
	}
	for _, tc := range []struct {
		name string
		do   testagent.Behaviour
		keep bool
	}{
		{"task ended at once", doneAtOnce, true},
		{"message", testagent.Reply("pong"), false},
		{"work that goes on", testagent.Work(time.Millisecond), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			agent := testagent.Start(t, testagent.Options{Name: "Once", Skill: "once"}, tc.do)
			store := &keptFirstStore{MemoryStore: NewMemoryStore(0), kept: make(chan struct{})}
			if !tc.keep {
				close(store.kept) // nothing is kept alongside: the store need not wait
			}
			f := newFixtureStore(t, Config{}, store)
			f.add(t, "once", agent.URL)
			up := &Upstream{TaskID: "up-1", ContextID: "ctx-1"}
			var mu sync.Mutex
			var calls int
			var got Record
			var evs []Event
			d, err := f.engine.Delegate(t.Context(), Request{Text: "ping", Skill: "once"},
				KeepEndedUpstream(*up, func(_ context.Context, rec Record, events []Event) error {
					mu.Lock()
					defer mu.Unlock()
					calls++
					got, evs = rec, events
					if calls == 1 {
						close(store.kept)
					}
					return nil
				}))
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if !tc.keep {
				if calls != 0 {
					t.Errorf("KeepUpstream called %d times, want none", calls)
				}
				return
			}
			if calls != 1 {
				t.Fatalf("KeepUpstream called %d times by the time Delegate returned, want once", calls)
			}
			if got.ID != d.ID() || got.State != a2a.TaskStateCompleted || got.Upstream == nil || *got.Upstream != *up || len(got.Artifacts) != 1 {
				t.Errorf("KeepUpstream got record %+v", got)
			}
			if len(evs) == 0 || evs[0].Seq != 1 || evs[len(evs)-1].State != a2a.TaskStateCompleted {
				t.Errorf("KeepUpstream got events %+v", evs)
			}
			stored, err := store.Get(t.Context(), d.ID())
			if err != nil || stored.State != a2a.TaskStateCompleted || stored.Upstream == nil || *stored.Upstream != *up {
				t.Errorf("stored record = %+v, %v", stored, err)
			}
		})
	}
}
