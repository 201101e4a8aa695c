package storetest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
)

// testSeal checks a store's Seal, when it has one: readers see nothing
// of a seal (Events from any point, Wait, ReadMany's last event), sealing
// twice or an empty log changes nothing, and the process that sealed a
// log goes on writing it with Append and PutStep.
func testSeal(t *testing.T, s delegation.Store) {
	ls, ok := s.(delegation.LogSealer)
	if !ok {
		t.Skipf("%T has no seal", s)
	}
	seal := func(id string) {
		t.Helper()
		if err := ls.Seal(ctx(t), id); err != nil {
			t.Fatalf("Seal(%s): %v", id, err)
		}
	}
	events := func(id string, after int64, want []int64) {
		t.Helper()
		got, err := s.Events(ctx(t), id, after, 0)
		if err != nil || !slices.Equal(seqs(got), want) {
			t.Errorf("Events(%s, after %d) = %v, %v; want %v", id, after, seqs(got), err, want)
		}
	}
	put(t, s, record("d1", a2a.TaskStateWorking, 1))
	appendN(t, s, "d1", 1, 3)
	seal("d1")
	seal("d1")
	for after := range int64(4) {
		events("d1", after, span(after+1, 3))
	}
	if err := s.Wait(ctx(t), "d1", 2); err != nil {
		t.Errorf("Wait(after 2) on a sealed log of 3 events: %v", err)
	}
	c, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if err := s.Wait(c, "d1", 3); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait(after 3) on a sealed log of 3 events = %v, want it to wait", err)
	}

	appendN(t, s, "d1", 4, 4)
	if ss, ok := s.(delegation.StepStore); ok {
		if err := ss.PutStep(ctx(t), record("d1", a2a.TaskStateWorking, 1), event(5, "state")); err != nil {
			t.Fatalf("PutStep after the seal: %v", err)
		}
	} else {
		appendN(t, s, "d1", 5, 5)
	}
	seal("d1")
	events("d1", 0, span(1, 5))
	events("d1", 4, span(5, 5))
	if mr, ok := s.(delegation.ManyReader); ok {
		// It may fail, as a cluster's direct reads may not answer yet:
		// the engine then reads one by one.
		reads, err := mr.ReadMany(ctx(t), []string{"d1"})
		if last := reads["d1"].Last; err == nil && last != nil && last.Seq != 5 {
			t.Errorf("ReadMany's last event of a sealed log = %d, want 5 (or none)", last.Seq)
		}
	}

	put(t, s, record("empty", a2a.TaskStateWorking, 2))
	seal("empty")
	events("empty", 0, nil)
	appendN(t, s, "empty", 1, 2)
	events("empty", 0, span(1, 2))

	// A store may seal a log whose last event is large without copying
	// it: it reads the same.
	put(t, s, record("large", a2a.TaskStateWorking, 3))
	appendN(t, s, "large", 1, 2)
	large := event(3, "state")
	large.Error = strings.Repeat("x", 64<<10)
	if err := s.Append(ctx(t), "large", large); err != nil {
		t.Fatal(err)
	}
	seal("large")
	for after := range int64(4) {
		events("large", after, span(after+1, 3))
	}
	if got, err := s.Events(ctx(t), "large", 2, 0); err != nil || len(got) != 1 || got[0].Error != large.Error {
		t.Errorf("Events(large, after 2) = %d events, %v; want the large one", len(got), err)
	}
}
