package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/delegation/storetest"
	"github.com/orchd/orchd/internal/natstest"
	"github.com/orchd/orchd/internal/testwait"
)

// openTest opens an embedded store under dir (a new temporary directory
// when ""), closed when the test ends.
func openTest(t testing.TB, dir string, cfg Config) *Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, dir, cfg, testLogger(t))
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// testLogger logs to the test at warning level and above.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func delegationsOf(t testing.TB, s *Store, cfg DelegationsConfig) *Delegations {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := s.Delegations(ctx, cfg)
	if err != nil {
		t.Fatalf("Delegations: %v", err)
	}
	return d
}

func TestDelegations_Contract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) delegation.Store {
		return delegationsOf(t, openTest(t, "", Config{}), DelegationsConfig{})
	})
}

// TestDelegations_ContractCluster runs the contract suite on a 3-node
// cluster with 3 replicas. Like the other cluster tests it does not run
// in parallel with the package's tests: a cluster's elections are timed,
// and a loaded machine delays them.
func TestDelegations_ContractCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := natstest.NewCluster(t, 3)
	var n atomic.Int64
	storetest.Run(t, func(t *testing.T) delegation.Store {
		ns := fmt.Sprintf("c%d", n.Add(1))
		s, err := Open(t.Context(), "", Config{URL: c.URLs(), Replicas: 3, Namespace: ns}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return delegationsOf(t, s, DelegationsConfig{})
	})
}

// TestDelegations_Expiry checks an ended record, and the events, go after
// the retention on their own, a running record stays, and the index
// entry of the ended record is swept.
func TestDelegations_Expiry(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a 2 s retention")
	}
	t.Parallel()
	s := openTest(t, "", Config{})
	d := delegationsOf(t, s, DelegationsConfig{Retention: 2 * time.Second})
	at := time.Now().UTC()
	for _, r := range []delegation.Record{
		{ID: "ended", State: a2a.TaskStateWorking, CreatedAt: at},
		{ID: "running", State: a2a.TaskStateWorking, CreatedAt: at.Add(time.Second)},
		{ID: "ended", State: a2a.TaskStateCompleted, CreatedAt: at},
	} {
		if err := d.Put(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		if err := d.Append(t.Context(), r.ID, delegation.Event{Seq: 1, Kind: "state"}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	testwait.Until(t, 20*time.Second, "the ended record expires", func() bool {
		_, err := d.Get(t.Context(), "ended")
		return errors.Is(err, delegation.ErrNotFound)
	})
	if took := time.Since(start); took < time.Second {
		t.Errorf("the ended record went after %s, before its retention", took)
	}
	if _, err := d.Get(t.Context(), "running"); err != nil {
		t.Errorf("the running record went too: %v", err)
	}
	p, err := d.List(t.Context(), delegation.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"running"}, idsOf(p.Records)); diff != "" {
		t.Errorf("List after expiry (-want +got):\n%s", diff)
	}
	testwait.Until(t, 20*time.Second, "the events expire", func() bool {
		evs, err := d.Events(t.Context(), "ended", 0, 0)
		return err == nil && len(evs) == 0
	})
	testwait.Until(t, 20*time.Second, "the index entry of the expired record is swept", func() bool {
		info, err := d.index.Info(t.Context())
		return err == nil && info.State.Msgs == 1
	})
	running, err := d.Running(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"running"}, running); diff != "" {
		t.Errorf("Running (-want +got):\n%s", diff)
	}
}

// TestDelegations_RunningStaleKey leaves the r. key of an ended record, as
// a crash between Put's two writes would, and checks Running skips it and
// then removes it.
func TestDelegations_RunningStaleKey(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{})
	d := delegationsOf(t, s, DelegationsConfig{})
	d.staleAfter = 0
	if err := d.Put(t.Context(), delegation.Record{ID: "x", State: a2a.TaskStateCompleted}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.kv.Put(t.Context(), delegationRunningPrefix+"x", nil); err != nil {
		t.Fatal(err)
	}
	running, err := d.Running(t.Context())
	if err != nil || len(running) != 0 {
		t.Fatalf("Running = %v, %v; want none", running, err)
	}
	if _, err := d.kv.Get(t.Context(), delegationRunningPrefix+"x"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the stale key is still there: %v", err)
	}
}

// TestDelegations_MayRun checks what MayRun lists: every running
// delegation, and one ended whose r. key a crash left, until Ended is
// told of it (and the purge it leaves ages out); a delegation still
// running is kept by Ended.
func TestDelegations_MayRun(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{})
	d := delegationsOf(t, s, DelegationsConfig{})
	d.staleAfter = 0
	for _, r := range []delegation.Record{{ID: "ended", State: a2a.TaskStateCompleted}, {ID: "running", State: a2a.TaskStateWorking},
		{ID: "an id/with a slash", State: a2a.TaskStateWorking}} {
		if err := d.Put(t.Context(), r); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.kv.Put(t.Context(), delegationRunningPrefix+"ended", nil); err != nil {
		t.Fatal(err)
	}
	mayRun := func() []string {
		t.Helper()
		ids, err := d.MayRun(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(slices.Values(ids))
	}
	if diff := cmp.Diff([]string{"an id/with a slash", "ended", "running"}, mayRun()); diff != "" {
		t.Errorf("MayRun (-want +got):\n%s", diff)
	}
	for _, id := range []string{"ended", "running", "never"} {
		if err := d.Ended(t.Context(), id); err != nil {
			t.Fatalf("Ended(%s): %v", id, err)
		}
	}
	// The bucket keeps a purge a second (runningPurgeTTL), and the
	// stream's subjects list it meanwhile.
	testwait.Succeeds(t, 10*time.Second, "MayRun without the ended one", func() error {
		if diff := cmp.Diff([]string{"an id/with a slash", "running"}, mayRun()); diff != "" {
			return fmt.Errorf("MayRun once told (-want +got):\n%s", diff)
		}
		return nil
	})
}

// TestDelegations_PutWritesWhatChanged checks that a record's r. key is
// written once while it runs and removed once when it ends, however many
// times the record is written, and that Running follows it.
func TestDelegations_PutWritesWhatChanged(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{})
	d := delegationsOf(t, s, DelegationsConfig{})
	bucket, err := s.js.Stream(t.Context(), "KV_orchd-delegations")
	if err != nil {
		t.Fatal(err)
	}
	writes := func() uint64 {
		t.Helper()
		info, err := bucket.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	putAs := func(id string, state a2a.TaskState, want uint64) {
		t.Helper()
		before := writes()
		if err := d.Put(t.Context(), delegation.Record{ID: id, State: state}); err != nil {
			t.Fatal(err)
		}
		if got := writes() - before; got != want {
			t.Errorf("Put %s %s wrote %d times to the bucket, want %d", id, state, got, want)
		}
	}
	put := func(state a2a.TaskState, want uint64) {
		t.Helper()
		putAs("x", state, want)
	}
	isRunning := func() bool {
		t.Helper()
		ids, err := d.Running(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return slices.Contains(ids, "x")
	}
	put(a2a.TaskStateSubmitted, 2) // the r. key and the record
	put(a2a.TaskStateWorking, 1)
	put(a2a.TaskStateWorking, 1)
	if !isRunning() {
		t.Error("Running does not list the running record")
	}
	put(a2a.TaskStateCompleted, 2) // the record and the r. key's removal
	put(a2a.TaskStateCompleted, 1)
	if isRunning() {
		t.Error("Running lists the ended record")
	}
	// A record stored ended from the start has no r. key to remove, then
	// or later.
	putAs("z", a2a.TaskStateCompleted, 1)
	putAs("z", a2a.TaskStateCompleted, 1)

	// A store that does not remember the key (another process's, or this
	// one's after a restart) removes it when the record ends.
	other := delegationsOf(t, s, DelegationsConfig{})
	if err := d.Put(t.Context(), delegation.Record{ID: "y", State: a2a.TaskStateWorking}); err != nil {
		t.Fatal(err)
	}
	if err := other.Put(t.Context(), delegation.Record{ID: "y", State: a2a.TaskStateFailed}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.kv.Get(t.Context(), delegationRunningPrefix+"y"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Errorf("the r. key of an ended record is still there: %v", err)
	}
}

// TestDelegations_WriteAfterAnotherWriter has another process write a
// record between two writes of this one, a Put and then a PutStep. Each
// of this one's writes expects the revision it wrote last, is refused,
// and is made again expecting nothing (no lease fences this store): the
// record is this one's, the log whole, and the revision it knows is the
// record's, for its next write to expect.
func TestDelegations_WriteAfterAnotherWriter(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{})
	d, other := delegationsOf(t, s, DelegationsConfig{}), delegationsOf(t, s, DelegationsConfig{})
	rec := func(by string) delegation.Record {
		return delegation.Record{ID: "x", State: a2a.TaskStateWorking, Error: by}
	}
	ev := func(seq int64) delegation.Event {
		return delegation.Event{Seq: seq, Kind: "state", State: a2a.TaskStateWorking}
	}
	check := func(after, want string, events int) {
		t.Helper()
		got, err := d.Get(t.Context(), "x")
		if err != nil {
			t.Fatal(err)
		}
		if got.Error != want {
			t.Errorf("after %s the record is %q's, want %q's", after, got.Error, want)
		}
		if evs, err := d.Events(t.Context(), "x", 0, 0); err != nil || len(evs) != events {
			t.Errorf("after %s the log holds %d events (%v), want %d", after, len(evs), err, events)
		}
		rev, ok := d.hints.recordOf("x")
		e, err := d.kv.Get(t.Context(), delegationRecordPrefix+"x")
		if err != nil {
			t.Fatal(err)
		}
		if !ok || rev != e.Revision() {
			t.Errorf("after %s the revision known is %d (known: %t), the record's %d", after, rev, ok, e.Revision())
		}
	}
	if err := d.Put(t.Context(), rec("d")); err != nil {
		t.Fatal(err)
	}
	if err := d.Append(t.Context(), "x", ev(1)); err != nil {
		t.Fatal(err)
	}
	check("the first writes", "d", 1)

	if err := other.Put(t.Context(), rec("other")); err != nil {
		t.Fatal(err)
	}
	if err := d.Put(t.Context(), rec("d, put")); err != nil {
		t.Fatalf("Put after the other's write: %v", err)
	}
	check("a Put after the other's write", "d, put", 1)

	if err := other.Put(t.Context(), rec("other")); err != nil {
		t.Fatal(err)
	}
	if err := d.PutStep(t.Context(), rec("d, step"), ev(2)); err != nil {
		t.Fatalf("PutStep after the other's write: %v", err)
	}
	check("a PutStep after the other's write", "d, step", 2)
}

func TestDelegations_BadIDs(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{})
	d := delegationsOf(t, s, DelegationsConfig{})
	long := strings.Repeat("a", maxDelegationIDLen+1)
	for _, id := range []string{"", long} {
		if err := d.Put(t.Context(), delegation.Record{ID: id}); !errors.Is(err, delegation.ErrBadRequest) {
			t.Errorf("Put(%.10q) = %v, want ErrBadRequest", id, err)
		}
		if err := d.Append(t.Context(), id, delegation.Event{Seq: 1}); !errors.Is(err, delegation.ErrBadRequest) {
			t.Errorf("Append(%.10q) = %v, want ErrBadRequest", id, err)
		}
		if _, err := d.Get(t.Context(), id); !errors.Is(err, delegation.ErrNotFound) {
			t.Errorf("Get(%.10q) = %v, want ErrNotFound", id, err)
		}
	}
	if err := d.Append(t.Context(), "x", delegation.Event{Seq: 0}); !errors.Is(err, delegation.ErrBadRequest) {
		t.Errorf("Append(seq 0) = %v, want ErrBadRequest", err)
	}
	// Ids that look alike stay apart once escaped.
	for _, id := range []string{"a.b", "a_b", "a b", "=YS5i", "a.b.>"} {
		if err := d.Put(t.Context(), delegation.Record{ID: id, State: a2a.TaskStateWorking}); err != nil {
			t.Fatalf("Put(%q): %v", id, err)
		}
	}
	for _, id := range []string{"a.b", "a_b", "a b", "=YS5i", "a.b.>"} {
		if r, err := d.Get(t.Context(), id); err != nil || r.ID != id {
			t.Errorf("Get(%q) = %q, %v", id, r.ID, err)
		}
	}
}

func TestDelegations_MaxEvents(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{})
	d := delegationsOf(t, s, DelegationsConfig{MaxEvents: 5})
	for seq := int64(1); seq <= 8; seq++ {
		if err := d.Append(t.Context(), "x", delegation.Event{Seq: seq}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		after int64
		limit int
		want  string
	}{
		{0, 0, "4 5 6 7 8"},
		{0, 2, "4 5"},
		{5, 0, "6 7 8"},
		{0, 100, "4 5 6 7 8"},
	} {
		evs, err := d.Events(t.Context(), "x", tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := seqString(evs); got != tc.want {
			t.Errorf("Events(after %d, limit %d) = %s, want %s", tc.after, tc.limit, got, tc.want)
		}
	}
}

func seqString(evs []delegation.Event) string {
	var b strings.Builder
	for i, ev := range evs {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprint(&b, ev.Seq)
	}
	return b.String()
}

// TestDelegations_EventsDeep reads a 10,000-event log, interleaved with
// another, at several depths.
func TestDelegations_EventsDeep(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{})
	d := delegationsOf(t, s, DelegationsConfig{})
	const n = 10_000
	for seq := int64(1); seq <= n; seq++ {
		for _, id := range []string{"deep", "other"} {
			if id == "other" && seq%4 != 0 {
				continue
			}
			if err := d.Append(t.Context(), id, delegation.Event{Seq: seq, Kind: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		after int64
		limit int
		want  string
	}{
		{0, 3, "1 2 3"},
		{1, 2, "2 3"},
		{4999, 3, "5000 5001 5002"},
		{9997, 0, "9998 9999 10000"},
		{9999, 10, "10000"},
		{n, 0, ""},
	} {
		start := time.Now()
		evs, err := d.Events(t.Context(), "deep", tc.after, tc.limit)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if got := seqString(evs); got != tc.want {
			t.Errorf("Events(after %d, limit %d) = %s, want %s", tc.after, tc.limit, got, tc.want)
		}
		for _, ev := range evs {
			if ev.Kind != "deep" {
				t.Errorf("event %d is from log %s", ev.Seq, ev.Kind)
			}
		}
		t.Logf("Events(after %d, limit %d) took %s", tc.after, tc.limit, took)
	}
}

// TestDelegations_ScanLimit checks a filtered listing that reads its
// bound before the page fills returns a token that goes on, and that the
// pages together hold every match.
func TestDelegations_ScanLimit(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{})
	d := delegationsOf(t, s, DelegationsConfig{ScanLimit: 10})
	at := time.Now().UTC()
	var want []string
	for i := range 100 {
		st := a2a.TaskStateCompleted
		if i%25 == 0 {
			st = a2a.TaskStateWorking
			want = append([]string{fmt.Sprint(i)}, want...)
		}
		if err := d.Put(t.Context(), delegation.Record{ID: fmt.Sprint(i), State: st, CreatedAt: at.Add(time.Duration(i))}); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	q := delegation.Query{State: a2a.TaskStateWorking, PageSize: 2}
	pages, short := 0, 0
	for {
		p, err := d.List(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(p.Records) < q.PageSize && p.NextPageToken != "" {
			short++
		}
		got = append(got, idsOf(p.Records)...)
		if p.NextPageToken == "" || pages > 100 {
			break
		}
		q.PageToken = p.NextPageToken
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("listed %v, want %v", got, want)
	}
	if short == 0 {
		t.Errorf("no page stopped at the scan limit (%d pages)", pages)
	}
}

// TestDelegations_ListLarge lists a store of 20,000 ended and 300
// running records: a page reads a bounded amount whatever the store
// holds, and Running reads only the running. BenchmarkDelegations_ListLarge
// measures the same on 100,000.
func TestDelegations_ListLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 20,000 records")
	}
	// Not parallel: the allocations measured are the process's, and a
	// test running beside it would count its own (seen in CI).
	s := openTest(t, "", Config{})
	d := delegationsOf(t, s, DelegationsConfig{})
	const ended, running = 20_000, 300
	fill(t, d, ended, running)
	for _, q := range []delegation.Query{{}, {PageSize: delegation.MaxPageSize}, {State: a2a.TaskStateWorking}, {State: a2a.TaskStateFailed}} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		p, err := d.List(t.Context(), q)
		runtime.ReadMemStats(&after)
		if err != nil {
			t.Fatal(err)
		}
		// The store's records would take over 100 MiB to read; a page
		// of 1,000 takes about 15. A state nobody is in reads up to the
		// scan limit, then stops.
		alloc := after.TotalAlloc - before.TotalAlloc
		if len(p.Records) > 0 && alloc > 32<<20 {
			t.Errorf("List(%+v) allocated %d KiB", q, alloc>>10)
		}
		t.Logf("List(%+v): %d records, %d KiB allocated", q, len(p.Records), alloc>>10)
		// Whichever way the page ended, there is more to read.
		if p.NextPageToken == "" {
			t.Errorf("List(%+v) gave no token over %d records", q, ended+running)
		}
	}
	ids, err := d.Running(t.Context())
	if err != nil || len(ids) != running {
		t.Fatalf("Running = %d ids, %v; want %d", len(ids), err, running)
	}
}

// fill puts ended records and then running ones, from several goroutines.
func fill(t testing.TB, d *Delegations, ended, running int) {
	at := time.Now().UTC()
	const workers = 16
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < ended+running; i += workers {
				st := a2a.TaskStateCompleted
				if i >= ended {
					st = a2a.TaskStateWorking
				}
				r := delegation.Record{ID: fmt.Sprintf("%08d", i), State: st, CreatedAt: at.Add(time.Duration(i)),
					Downstream: delegation.Hop{Agent: "agent", CardDigest: "sha256:0123456789abcdef"}, Error: strings.Repeat("e", 300)}
				if err := d.Put(context.Background(), r); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// TestPutEnded_FoldsASmallLog checks what PutEnded writes for a new
// delegation: a log of up to maxFoldedEvents events goes into the record
// (an index entry and the record, no event stream message), a longer one
// to the event stream; both read back whole.
func TestPutEnded_FoldsASmallLog(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{})
	d := delegationsOf(t, s, DelegationsConfig{})
	writes := func(stream string) uint64 {
		t.Helper()
		st, err := s.js.Stream(t.Context(), stream)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}
	streams := []string{"orchd_DELEGATION_INDEX", "orchd_EVENTS", "KV_orchd-delegations"}
	for _, tc := range []struct {
		name   string
		events int
		want   []uint64 // writes to each of streams
	}{
		{"one event", 1, []uint64{1, 0, 1}},
		{"the most folded", maxFoldedEvents, []uint64{1, 0, 1}},
		{"one more", maxFoldedEvents + 1, []uint64{1, maxFoldedEvents + 1, 1}},
	} {
		var evs []delegation.Event
		for i := range tc.events {
			evs = append(evs, delegation.Event{Seq: int64(i + 1), Kind: "state", State: a2a.TaskStateWorking})
		}
		id := strings.ReplaceAll(tc.name, " ", "-")
		var before []uint64
		for _, st := range streams {
			before = append(before, writes(st))
		}
		if err := d.PutEnded(t.Context(), delegation.Record{ID: id, State: a2a.TaskStateCompleted, LastEvent: int64(tc.events)}, evs); err != nil {
			t.Fatal(err)
		}
		for i, st := range streams {
			if got := writes(st) - before[i]; got != tc.want[i] {
				t.Errorf("%s: %d writes to %s, want %d", tc.name, got, st, tc.want[i])
			}
		}
		got, err := d.Events(t.Context(), id, 0, 0)
		if err != nil {
			t.Fatalf("%s: Events: %v", tc.name, err)
		}
		if diff := cmp.Diff(eventsOf(evs), eventsOf(got)); diff != "" {
			t.Errorf("%s: Events (-written +read):\n%s", tc.name, diff)
		}
	}
}

// FuzzPlainToken checks plainToken against the regular expression it
// stands for: letters, digits, - and _, at least one.
func FuzzPlainToken(f *testing.F) {
	re := regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := plainToken(s), re.MatchString(s); got != want {
			t.Errorf("plainToken(%q) = %t, the expression says %t", s, got, want)
		}
	})
}
