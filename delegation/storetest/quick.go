package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
)

// testQueueEnded checks a store's QueueEnded, when it has one: records
// queued from several goroutines at once read back at once, whole (Get,
// Events, Wait, List), whether or not they are durable yet; a later Put
// of a queued delegation is not undone by the queued write; and what
// breaks PutEnded's contract is refused as a bad request.
func testQueueEnded(t *testing.T, s delegation.Store) {
	qs, ok := s.(delegation.QuickStore)
	if !ok {
		t.Skipf("%T keeps every record before it returns", s)
	}
	const workers, each = 4, 8
	evs := []delegation.Event{event(1, "state"), event(2, "message")}
	var wg sync.WaitGroup
	errs := make(chan error, workers*each)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("q%d-%d", w, i)
				if err := qs.QueueEnded(ctx(t), record(id, a2a.TaskStateCompleted, w*each+i), evs); err != nil {
					errs <- fmt.Errorf("QueueEnded(%s): %w", id, err)
					return
				}
				got, err := s.Get(ctx(t), id)
				if err != nil || got.State != a2a.TaskStateCompleted {
					errs <- fmt.Errorf("Get(%s) right after QueueEnded = %s, %w", id, got.State, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for w := range workers {
		for i := range each {
			id := fmt.Sprintf("q%d-%d", w, i)
			want := record(id, a2a.TaskStateCompleted, w*each+i)
			if got, err := s.Get(ctx(t), id); err != nil || !sameJSON(t, got, want) {
				t.Errorf("Get(%s) = %+v, %v; want %+v", id, got, err, want)
			}
		}
	}
	if got := listAll(t, s, delegation.Query{}); len(got) != workers*each {
		t.Errorf("List = %d records %v, want %d", len(got), got, workers*each)
	}

	// Read at once after QueueEnded: the log, and a Wait for it.
	r := record("log", a2a.TaskStateCompleted, 100)
	if err := qs.QueueEnded(ctx(t), r, evs); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Events(ctx(t), r.ID, 0, 0); err != nil || !slices.Equal(seqs(got), span(1, 2)) {
		t.Errorf("Events right after QueueEnded = %v, %v; want 1, 2", seqs(got), err)
	}
	r = record("wait", a2a.TaskStateCompleted, 101)
	if err := qs.QueueEnded(ctx(t), r, evs); err != nil {
		t.Fatal(err)
	}
	if err := s.Wait(ctx(t), r.ID, 1); err != nil {
		t.Errorf("Wait(after 1) right after QueueEnded = %v, want at once", err)
	}

	// A Put after QueueEnded of the same delegation (naming its upstream
	// task, say) wins, and the queued log stays.
	r = record("later", a2a.TaskStateCompleted, 102)
	if err := qs.QueueEnded(ctx(t), r, evs); err != nil {
		t.Fatal(err)
	}
	r.Upstream = &delegation.Upstream{TaskID: "up-later"}
	put(t, s, r)
	if got, err := s.Get(ctx(t), r.ID); err != nil || !sameJSON(t, got, r) {
		t.Errorf("Get after QueueEnded and Put = %+v, %v; want the Put's %+v", got, err, r)
	}
	if got, err := s.Events(ctx(t), r.ID, 0, 0); err != nil || !slices.Equal(seqs(got), span(1, 2)) {
		t.Errorf("Events after QueueEnded and Put = %v, %v; want 1, 2", seqs(got), err)
	}

	for _, tc := range []struct {
		name string
		r    delegation.Record
		evs  []delegation.Event
	}{
		{"running record", record("qbad1", a2a.TaskStateWorking, 3), evs},
		{"log not from 1", record("qbad2", a2a.TaskStateCompleted, 3), evs[1:]},
	} {
		if err := qs.QueueEnded(ctx(t), tc.r, tc.evs); !errors.Is(err, delegation.ErrBadRequest) {
			t.Errorf("%s: QueueEnded error = %v, want ErrBadRequest", tc.name, err)
		}
		if _, err := s.Get(ctx(t), tc.r.ID); !errors.Is(err, delegation.ErrNotFound) {
			t.Errorf("%s: a refused QueueEnded stored the record (%v)", tc.name, err)
		}
	}
}
