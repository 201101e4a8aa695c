package delegation

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
)

// appendRefusingStore refuses every event while refuse is set, as a store
// that is down does, and takes the records.
type appendRefusingStore struct {
	*MemoryStore
	refuse atomic.Bool
}

func (s *appendRefusingStore) Append(ctx context.Context, id string, ev Event) error {
	if s.refuse.Load() {
		return errors.New("the store is down")
	}
	return s.MemoryStore.Append(ctx, id, ev)
}

// streamHeld starts a delegation to an agent that streams one artifact in
// chunks chunks and then waits for hold to close before it completes,
// and returns once every chunk is logged.
func streamHeld(t *testing.T, store Store, chunks int, hold <-chan struct{}) (*fixture, *Delegation) {
	t.Helper()
	agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", Streaming: true}, testagent.Stream(1, chunks, 16, hold))
	f := newFixtureStore(t, Config{}, store)
	f.add(t, "writer", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "write", Skill: "write"})
	if err != nil {
		t.Fatal(err)
	}
	waitRecord(t, d, "every chunk logged", func(r Record) bool {
		return len(r.Artifacts) == 1 && len(r.Artifacts[0].Parts) == chunks
	})
	return f, d
}

// wholeLog reads the delegation's log through the engine and checks that
// it runs from 1 to the record's last event without a gap.
func wholeLog(t *testing.T, f *fixture, d *Delegation) []Event {
	t.Helper()
	evs, _, err := f.engine.Events(t.Context(), d.ID(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	last := d.Record().LastEvent
	if int64(len(evs)) != last {
		t.Fatalf("the log read through the engine has %d events, the record's last is %d", len(evs), last)
	}
	logEnds(t, evs)
	return evs
}

// TestLiveEvents_MemoryKeepsTheLatest streams 100 chunks: the delegation
// keeps only its latest DefaultLiveEvents events in memory, and the log
// read through the engine is whole, its older events from the store.
func TestLiveEvents_MemoryKeepsTheLatest(t *testing.T) {
	t.Parallel()
	const chunks = 100
	hold := make(chan struct{})
	f, d := streamHeld(t, NewMemoryStore(0), chunks, hold)
	live, _, _ := d.Events(0)
	if len(live) == 0 || len(live) > DefaultLiveEvents || live[0].Seq == 1 {
		t.Errorf("memory holds %d events from seq %d; want at most %d, the latest", len(live), live[0].Seq, DefaultLiveEvents)
	}
	if evs := wholeLog(t, f, d); len(evs) < chunks {
		t.Errorf("the log has %d events for %d chunks", len(evs), chunks)
	}
	close(hold)
	waitState(t, d, a2a.TaskStateCompleted)
	wholeLog(t, f, d)
}

// TestLiveEvents_UnsavedStayInMemory streams 100 chunks while the store
// refuses every event: memory keeps them all, so the log read through
// the engine stays whole, and once the store takes events again the next
// write stores them and memory goes back to the latest few.
func TestLiveEvents_UnsavedStayInMemory(t *testing.T) {
	t.Parallel()
	const chunks = 100
	store := &appendRefusingStore{MemoryStore: NewMemoryStore(0)}
	store.refuse.Store(true)
	hold := make(chan struct{})
	f, d := streamHeld(t, store, chunks, hold)
	if live, _, _ := d.Events(0); len(live) < chunks || live[0].Seq != 1 {
		t.Errorf("memory holds %d events while the store refuses them all; want the whole log", len(live))
	}
	wholeLog(t, f, d)
	if stored, err := store.MemoryStore.Events(t.Context(), d.ID(), 0, 0); err != nil || len(stored) != 0 {
		t.Fatalf("the store holds %d events, %v; the test needs it to refuse them", len(stored), err)
	}
	store.refuse.Store(false)
	close(hold)
	waitState(t, d, a2a.TaskStateCompleted)
	evs := wholeLog(t, f, d)
	testwait.Until(t, 10*time.Second, "the store holding the whole log", func() bool {
		stored, err := store.MemoryStore.Events(t.Context(), d.ID(), 0, 0)
		return err == nil && len(stored) == len(evs)
	})
	if live, _, _ := d.Events(0); len(live) > DefaultLiveEvents {
		t.Errorf("memory holds %d events once the store has them; want at most %d", len(live), DefaultLiveEvents)
	}
}

// eventDiscardingStore keeps records but no events, so that a benchmark
// of the engine's memory does not count the store's copy of the logs.
type eventDiscardingStore struct{ *MemoryStore }

func (eventDiscardingStore) Append(context.Context, string, Event) error { return nil }

// BenchmarkLiveEvents measures what a running delegation holds in memory
// once its agent, in a process of its own, has streamed 200 status
// messages of 200 bytes: with the default LiveEvents, and keeping the
// whole log in memory (LiveEvents = MaxEvents, as before LiveEvents).
//
//	go test ./delegation -run '^$' -bench LiveEvents -benchtime 1x
func BenchmarkLiveEvents(b *testing.B) {
	const n, says = 100, 200
	for _, tc := range []struct {
		name string
		live int
	}{{"latest-16", 0}, {"whole-log", DefaultMaxEvents}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				url := agentProcess(b, "chatty-agent", strconv.Itoa(says))
				f := newFixtureStore(b, Config{LiveEvents: tc.live, SilenceTimeout: 10 * time.Minute}, eventDiscardingStore{NewMemoryStore(0)})
				f.add(b, "chatty", url)
				before := inUse()
				ds := delegateAll(b, f, n, func() Request { return Request{Text: "talk", Skill: "chat"} })
				for _, d := range ds {
					waitRecord(b, d, "every status message", func(r Record) bool { return r.LastEvent > says })
				}
				per := float64(inUse()-before) / n
				b.ReportMetric(per/1024, "KiB/delegation")
				f.engine.Close()
			}
		})
	}
}
