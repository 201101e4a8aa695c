package mcpserver

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/steering"
)

// countingStore is a memory store counting the reads describe makes.
type countingStore struct {
	*delegation.MemoryStore
	reads atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, id string) (delegation.Record, error) {
	s.reads.Add(1)
	return s.MemoryStore.Get(ctx, id)
}

func (s *countingStore) Events(ctx context.Context, id string, after int64, limit int) ([]delegation.Event, error) {
	s.reads.Add(1)
	return s.MemoryStore.Events(ctx, id, after, limit)
}

// storedFront is a front whose engine keeps its delegations in a counting
// store and runs none itself: every delegation it describes is read from
// the store, as one another process ran, or one ended long ago.
func storedFront(t *testing.T) (*Server, *countingStore) {
	t.Helper()
	st := &countingStore{MemoryStore: delegation.NewMemoryStore(0)}
	eng := delegation.NewEngine(nil, nil, st, delegation.Config{Self: "orchd"}, nil)
	t.Cleanup(eng.Close)
	s, err := New(Config{StateKeys: [][]byte{make([]byte, 32)}}, Deps{Engine: eng})
	if err != nil {
		t.Fatal(err)
	}
	return s, st
}

// record stores rec and appends evs to its log, numbered from seq 1 on
// after those already there; it returns rec with LastEvent set.
func record(t *testing.T, st *countingStore, rec delegation.Record, from int64, evs ...delegation.Event) delegation.Record {
	t.Helper()
	for i, ev := range evs {
		ev.Seq = from + int64(i)
		if err := st.Append(t.Context(), rec.ID, ev); err != nil {
			t.Fatal(err)
		}
		rec.LastEvent = ev.Seq
	}
	if err := st.Put(t.Context(), rec); err != nil {
		t.Fatal(err)
	}
	return rec
}

func agentSays(text string) *a2a.Message {
	return a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(text))
}

func receipt(seq int64) steering.Receipt {
	return steering.Receipt{Control: steering.Steer, MessageID: "m" + string(rune('0'+seq)), Seq: seq,
		Hops: []steering.Hop{{Agent: "orchd", Seq: seq}, {Agent: "agent", Seq: seq}}}
}

// TestDescribe_EndedDelegationReadOnce checks that describing a
// delegation that ended reads its log and steering state from the store
// once, answering the same after, and again once the record has another
// last event (a receipt given as the work ended comes with one); a
// delegation still running is read each time.
func TestDescribe_EndedDelegationReadOnce(t *testing.T) {
	s, st := storedFront(t)
	now := time.Now()
	rec := delegation.Record{ID: "ended", State: a2a.TaskStateCompleted, CreatedAt: now, UpdatedAt: now,
		Downstream: delegation.Hop{Agent: "agent"}, Result: agentSays("1998"),
		Progress: &delegation.Progress{Steerable: true, Receipts: []steering.Receipt{receipt(1)}}}
	rec = record(t, st, rec, 1,
		delegation.Event{Kind: "state", State: a2a.TaskStateWorking},
		delegation.Event{Kind: "state", State: a2a.TaskStateInputRequired, Message: agentSays("which year?")},
		delegation.Event{Kind: "message", State: a2a.TaskStateInputRequired, Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("1998"))},
		delegation.Event{Kind: "state", State: a2a.TaskStateCompleted, Message: agentSays("1998")},
	)
	want := Status{Delegation: "ended", State: "completed", Agent: "agent", Message: "1998", Seq: 4, Steerable: true,
		Requests: []Request{{ID: "input-2", Kind: "input", State: "resolved", Message: "which year?", Resolution: "answered", ResolvedAt: 3}},
		Receipts: []steering.Receipt{receipt(1)}}
	ctx := t.Context()
	if diff := cmp.Diff(want, s.describe(ctx, rec)); diff != "" {
		t.Fatalf("first describe (-want +got):\n%s", diff)
	}
	if st.reads.Load() == 0 {
		t.Fatal("the first describe read nothing from the store")
	}
	before := st.reads.Load()
	for range 3 {
		if diff := cmp.Diff(want, s.describe(ctx, rec)); diff != "" {
			t.Fatalf("describe again (-want +got):\n%s", diff)
		}
	}
	if n := st.reads.Load() - before; n != 0 {
		t.Errorf("describing the ended delegation again read the store %d times, want none", n)
	}

	// A steer acknowledged as the work ended: a receipt and its event.
	rec.Progress.Receipts = append(rec.Progress.Receipts, receipt(2))
	rec = record(t, st, rec, 5, delegation.Event{Kind: "steer", State: a2a.TaskStateCompleted})
	want.Seq, want.Receipts = 5, []steering.Receipt{receipt(1), receipt(2)}
	if diff := cmp.Diff(want, s.describe(ctx, rec)); diff != "" {
		t.Errorf("after a late receipt (-want +got):\n%s", diff)
	}

	// A running delegation is read each time.
	run := delegation.Record{ID: "running", State: a2a.TaskStateWorking, CreatedAt: now, UpdatedAt: now,
		Downstream: delegation.Hop{Agent: "agent"}, Progress: &delegation.Progress{}}
	run = record(t, st, run, 1, delegation.Event{Kind: "state", State: a2a.TaskStateWorking, Message: agentSays("reading")})
	if got := s.describe(ctx, run); got.Message != "reading" || len(got.Requests) != 0 {
		t.Fatalf("running: %+v", got)
	}
	run.State = a2a.TaskStateInputRequired
	run = record(t, st, run, 2, delegation.Event{Kind: "state", State: a2a.TaskStateInputRequired, Message: agentSays("which year?")})
	if got := s.describe(ctx, run); got.Message != "which year?" || len(got.Requests) != 1 || got.Requests[0].State != "blocked" {
		t.Errorf("running, asking: %+v", got)
	}
}
