package store

import (
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
)

// TestPutStep_AfterAnotherWriter checks that a step sent as a pair, by a
// process whose idea of the log is stale (another one took the delegation
// over and appended meanwhile), neither doubles nor overwrites the other's
// event, and that the next step goes on after it.
func TestPutStep_AfterAnotherWriter(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{})
	first := delegationsOf(t, s, DelegationsConfig{})
	second := delegationsOf(t, s, DelegationsConfig{}) // another process's view
	rec := delegation.Record{ID: "d1", State: a2a.TaskStateWorking}
	ev := func(seq int64, kind string) delegation.Event { return delegation.Event{Seq: seq, Kind: kind} }
	step := func(d *Delegations, e delegation.Event) {
		t.Helper()
		r := rec
		r.LastEvent, r.Error = e.Seq, e.Kind // tells the records apart
		if err := d.PutStep(t.Context(), r, e); err != nil {
			t.Fatalf("PutStep %d: %v", e.Seq, err)
		}
	}
	step(first, ev(1, "first"))
	step(first, ev(2, "first"))
	if err := second.Append(t.Context(), "d1", ev(3, "second")); err != nil {
		t.Fatal(err)
	}
	step(first, ev(3, "first, stale"))
	step(first, ev(4, "first"))
	log, err := first.Events(t.Context(), "d1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var seqs []int64
	var kinds []string
	for _, e := range log {
		seqs, kinds = append(seqs, e.Seq), append(kinds, e.Kind)
	}
	if want := []string{"first", "first", "second", "first"}; !slices.Equal(kinds, want) || !slices.Equal(seqs, []int64{1, 2, 3, 4}) {
		t.Errorf("log = %v %v, want seqs 1..4 of %v", seqs, kinds, want)
	}
	got, err := second.Get(t.Context(), "d1")
	if err != nil || got.LastEvent != 4 {
		t.Errorf("record = %+v, %v; want the last step's", got, err)
	}
}
