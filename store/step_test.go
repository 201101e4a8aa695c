package store

import (
	"fmt"
	"slices"
	"strings"
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

// TestPutStep_OneRoundTripWhileRemembered checks that the steps of
// delegations taking turns, as many running delegations' events do, are
// sent as a pair (an event and a record, nothing read) while the store
// remembers every one of them, however many delegations end in between,
// and that past Hints, when the least recently written is always the one
// forgotten, each step reads and writes more.
func TestPutStep_OneRoundTripWhileRemembered(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		hints, n int
		// ended is how many delegations end between two rounds of steps:
		// each of their records is put once, ended.
		ended int
		// overTheHint: each step sends at least 2.5 messages, reading
		// first; otherwise at most 2.05, the pair's 2 and room for a
		// message of the store's own.
		overTheHint bool
	}{
		{name: "remembered", hints: 64, n: 60},
		{name: "remembered while more end", hints: 64, n: 60, ended: 128},
		{name: "more than remembered", hints: 64, n: 80, overTheHint: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := openTest(t, "", Config{})
			d := delegationsOf(t, s, DelegationsConfig{Hints: tc.hints})
			put := func(r delegation.Record) {
				t.Helper()
				if err := d.Put(t.Context(), r); err != nil {
					t.Fatalf("Put %s: %v", r.ID, err)
				}
			}
			for i := range tc.n {
				put(delegation.Record{ID: fmt.Sprintf("d%d", i), State: a2a.TaskStateWorking})
			}
			const rounds = 3
			var sent uint64
			for seq := int64(1); seq <= rounds; seq++ {
				before := s.JetStream().Conn().Stats().OutMsgs
				for i := range tc.n {
					r := delegation.Record{ID: fmt.Sprintf("d%d", i), State: a2a.TaskStateWorking, LastEvent: seq}
					if err := d.PutStep(t.Context(), r, delegation.Event{Seq: seq, Kind: "status"}); err != nil {
						t.Fatalf("PutStep %s %d: %v", r.ID, seq, err)
					}
				}
				sent += s.JetStream().Conn().Stats().OutMsgs - before
				for i := range tc.ended {
					put(delegation.Record{ID: fmt.Sprintf("e%d-%d", seq, i), State: a2a.TaskStateCompleted})
				}
			}
			per := float64(sent) / float64(rounds*tc.n)
			t.Logf("%d delegations, %d remembered, %d ended between rounds: %.2f messages sent per step", tc.n, tc.hints, tc.ended, per)
			switch {
			case tc.overTheHint && per < 2.5:
				t.Errorf("%.2f messages sent per step, want at least 2.5: the steps read first", per)
			case !tc.overTheHint && per > 2.05:
				t.Errorf("%.2f messages sent per step, want 2, the pair", per)
			}
			for i := range tc.n {
				evs, err := d.Events(t.Context(), fmt.Sprintf("d%d", i), 0, 0)
				if err != nil || len(evs) != rounds {
					t.Fatalf("d%d: %d events, %v; want %d", i, len(evs), err, rounds)
				}
			}
		})
	}
}

// TestDelegations_HintsBounds checks that Hints outside its bounds is
// refused, naming it.
func TestDelegations_HintsBounds(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{})
	for _, hints := range []int{-1, MaxHints + 1} {
		_, err := s.Delegations(t.Context(), DelegationsConfig{Hints: hints})
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("hints %d is not between 1 and %d", hints, MaxHints)) {
			t.Errorf("Hints %d: %v, want it refused", hints, err)
		}
	}
}
