package delegation

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

func TestMemoryStore_BoundedKeepsRunning(t *testing.T) {
	t.Parallel()
	s := NewMemoryStore(3)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(id string, st a2a.TaskState, i int) {
		if err := s.Put(t.Context(), Record{ID: id, State: st, CreatedAt: at.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	put("running", a2a.TaskStateWorking, 0)
	put("done-1", a2a.TaskStateCompleted, 1)
	put("done-2", a2a.TaskStateFailed, 2)
	put("done-3", a2a.TaskStateCompleted, 3)
	put("done-4", a2a.TaskStateCompleted, 4)
	page, _ := s.List(t.Context(), Query{PageSize: MaxPageSize})
	all := page.Records
	var ids []string
	for _, r := range all {
		ids = append(ids, r.ID)
	}
	if len(all) != 3 || ids[0] != "done-4" || ids[2] != "running" {
		t.Errorf("kept %v; want the newest ended and the running one", ids)
	}
	if _, err := s.Get(t.Context(), "done-1"); err == nil {
		t.Error("the oldest ended record was kept")
	}
	// Updating a kept record does not count twice.
	put("running", a2a.TaskStateCompleted, 0)
	if page, _ := s.List(t.Context(), Query{State: a2a.TaskStateCompleted}); len(page.Records) != 3 {
		t.Errorf("completed = %d", len(all))
	}
}

// TestMemoryStore_Eviction replays Puts into a store bounded to 3 records
// and checks which records it keeps. Records are forgotten in the order
// they ended; running ones are never forgotten.
func TestMemoryStore_Eviction(t *testing.T) {
	t.Parallel()
	const (
		run  = a2a.TaskStateWorking
		wait = a2a.TaskStateInputRequired
		done = a2a.TaskStateCompleted
		fail = a2a.TaskStateFailed
	)
	type put struct {
		id    string
		state a2a.TaskState
	}
	for _, tc := range []struct {
		name string
		puts []put
		want []string // ids kept, sorted
	}{
		{"under the bound nothing goes",
			[]put{{"a", done}, {"b", run}, {"c", fail}},
			[]string{"a", "b", "c"}},
		{"the oldest ended goes first",
			[]put{{"a", done}, {"b", done}, {"c", done}, {"d", done}, {"e", fail}},
			[]string{"c", "d", "e"}},
		{"running records stay over the bound",
			[]put{{"a", run}, {"b", wait}, {"c", run}, {"d", run}, {"e", a2a.TaskStateSubmitted}},
			[]string{"a", "b", "c", "d", "e"}},
		{"running records are skipped, ended ones behind them go",
			[]put{{"a", run}, {"b", run}, {"c", done}, {"d", done}, {"e", done}},
			[]string{"a", "b", "e"}},
		{"a record that ends later becomes evictable",
			[]put{{"a", run}, {"b", run}, {"c", run}, {"d", run}, {"a", done}, {"e", run}},
			[]string{"b", "c", "d", "e"}},
		{"records go in the order they ended, not the order they started",
			// a started first but ended last: its result is the freshest.
			[]put{{"a", run}, {"b", done}, {"c", done}, {"a", done}, {"d", done}},
			[]string{"a", "c", "d"}},
		{"updating an ended record keeps its place",
			[]put{{"a", done}, {"b", done}, {"c", done}, {"a", done}, {"d", done}},
			[]string{"b", "c", "d"}},
		{"an ended record put back to running is kept",
			[]put{{"a", done}, {"b", done}, {"c", done}, {"a", run}, {"d", done}, {"e", done}},
			[]string{"a", "d", "e"}},
		{"an ended record put back to running becomes evictable again when it ends",
			[]put{{"a", done}, {"b", done}, {"c", done}, {"a", run}, {"d", done}, {"a", fail}, {"e", done}},
			[]string{"a", "d", "e"}},
		{"the store shrinks back to its bound as running records end",
			[]put{{"a", run}, {"b", run}, {"c", run}, {"d", run}, {"e", run}, {"a", done}, {"b", done}, {"c", done}, {"f", done}},
			[]string{"d", "e", "f"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := NewMemoryStore(3)
			at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			for i, p := range tc.puts {
				if err := s.Put(t.Context(), Record{ID: p.id, State: p.state, CreatedAt: at.Add(time.Duration(i) * time.Second)}); err != nil {
					t.Fatal(err)
				}
			}
			page, err := s.List(t.Context(), Query{PageSize: MaxPageSize})
			all := page.Records
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, r := range all {
				got = append(got, r.ID)
				if g, err := s.Get(t.Context(), r.ID); err != nil || g.ID != r.ID {
					t.Errorf("Get(%q) = %+v, %v; List has it", r.ID, g, err)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("kept %q, want %q", got, tc.want)
			}
		})
	}
}

// fullStore returns a store bounded to size and holding size records,
// the first running of them still running and the rest ended, and the
// ids it can be fed with afterwards.
func fullStore(tb testing.TB, size, running, more int) (*MemoryStore, []string) {
	tb.Helper()
	s := NewMemoryStore(size)
	for i := range size {
		st := a2a.TaskStateCompleted
		if i < running {
			st = a2a.TaskStateWorking
		}
		if err := s.Put(tb.Context(), Record{ID: fmt.Sprintf("old-%07d", i), State: st}); err != nil {
			tb.Fatal(err)
		}
	}
	ids := make([]string, more)
	for i := range ids {
		ids[i] = fmt.Sprintf("new-%07d", i)
	}
	return s, ids
}

// delegate stores what one delegation stores in its life, in short: a new
// running record, then the same record ended.
func delegate(tb testing.TB, s *MemoryStore, id string) {
	if err := s.Put(tb.Context(), Record{ID: id, State: a2a.TaskStateWorking}); err != nil {
		tb.Fatal(err)
	}
	if err := s.Put(tb.Context(), Record{ID: id, State: a2a.TaskStateCompleted}); err != nil {
		tb.Fatal(err)
	}
}

// TestMemoryStore_PutCostIsFlat checks that a delegation stored into a
// full store costs about as much at 100,000 records as at 1,000: making
// room forgets one record, it does not walk or copy the others. (The
// records of running delegations at the front of the store are skipped
// once, not on every Put.)
func TestMemoryStore_PutCostIsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("timing test")
	}
	const n, rounds = 2_000, 5
	perDelegation := func(size int) time.Duration {
		s, ids := fullStore(t, size, size/10, n*rounds)
		best := time.Duration(1<<63 - 1)
		for r := range rounds {
			start := time.Now()
			for _, id := range ids[r*n : (r+1)*n] {
				delegate(t, s, id)
			}
			best = min(best, time.Since(start)/n)
		}
		return best
	}
	small, large := perDelegation(1_000), perDelegation(100_000)
	t.Logf("per delegation: %v at 1,000 records, %v at 100,000", small, large)
	if large > 20*small {
		t.Errorf("a delegation into a full store of 100,000 records costs %v, %.0f× the %v at 1,000; want about the same", large, float64(large)/float64(small), small)
	}
}

// BenchmarkStorePut stores delegations (a running record, then the same
// record ended) into a MemoryStore already full of 10,000 records, so
// every delegation makes room by forgetting the oldest ended one. In
// running-10pct the oldest 1,000 records belong to delegations still
// running, which eviction must step over. direct-map is the floor: a
// plain map insert and delete per delegation.
//
//	go test ./delegation -run '^$' -bench StorePut -benchmem
func BenchmarkStorePut(b *testing.B) {
	const size = DefaultMemoryRecords
	b.Run("direct-map", func(b *testing.B) {
		m := make(map[string]Record, size)
		old := make([]string, size)
		for i := range old {
			old[i] = fmt.Sprintf("old-%07d", i)
			m[old[i]] = Record{ID: old[i], State: a2a.TaskStateCompleted}
		}
		_, ids := fullStore(b, 1, 0, b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for i, id := range ids {
			m[id] = Record{ID: id, State: a2a.TaskStateWorking}
			m[id] = Record{ID: id, State: a2a.TaskStateCompleted}
			delete(m, old[i%size])
			old[i%size] = id
		}
	})
	for _, tc := range []struct {
		name    string
		running int
	}{{"ended-10000", 0}, {"running-10pct-10000", size / 10}} {
		b.Run(tc.name, func(b *testing.B) {
			s, ids := fullStore(b, size, tc.running, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for _, id := range ids {
				delegate(b, s, id)
			}
			if got := len(s.records); got != size {
				b.Fatalf("the store holds %d records, want %d", got, size)
			}
		})
	}
}
