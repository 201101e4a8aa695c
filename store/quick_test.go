package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testwait"
)

// quickRecord is a delegation ended as it started, and its log.
func quickRecord(id string) (delegation.Record, []delegation.Event) {
	at := time.Now().UTC()
	r := delegation.Record{ID: id, State: a2a.TaskStateCompleted, CreatedAt: at, UpdatedAt: at, LastEvent: 2,
		Downstream: delegation.Hop{Agent: "agent"}, Decision: &delegation.Decision{Chosen: "agent"}}
	evs := []delegation.Event{{Seq: 1, Kind: "state", State: a2a.TaskStateCompleted, At: at}, {Seq: 2, Kind: "message", At: at}}
	return r, evs
}

// stored reports whether the record of id is in the bucket, read
// straight from JetStream: not through the store, whose reads wait for
// queued records.
func stored(t testing.TB, d *Delegations, id string) bool {
	t.Helper()
	key, err := delegationKey(id)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = d.kv.Get(ctx, delegationRecordPrefix+key)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return false
	case err != nil:
		t.Fatalf("read %s: %v", id, err)
	}
	return true
}

// TestQuickWrites_WrittenWithinLag checks a queued record is not written
// before QueueEnded returns, and is written within the lag (and a
// margin for a busy machine) with nothing asking for it.
func TestQuickWrites_WrittenWithinLag(t *testing.T) {
	t.Parallel()
	const lag = 200 * time.Millisecond
	d := delegationsOf(t, openTest(t, "", Config{QuickWriteLag: lag.String()}), DelegationsConfig{})
	var ids []string
	for i := range 3 {
		r, evs := quickRecord(fmt.Sprintf("lag-%d", i))
		if err := d.QueueEnded(t.Context(), r, evs); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	queued := time.Now()
	if stored(t, d, ids[0]) {
		t.Fatalf("%s was written before QueueEnded returned: not queued", ids[0])
	}
	testwait.Until(t, lag+5*time.Second, "the queued records written", func() bool {
		for _, id := range ids {
			if !stored(t, d, id) {
				return false
			}
		}
		return true
	})
	t.Logf("written %s after the last was queued (lag %s)", time.Since(queued).Round(time.Millisecond), lag)
}

// TestQuickWrites_Off checks QuickWriteLag "off" writes the record before
// QueueEnded returns.
func TestQuickWrites_Off(t *testing.T) {
	t.Parallel()
	d := delegationsOf(t, openTest(t, "", Config{QuickWriteLag: QuickWritesOff}), DelegationsConfig{})
	r, evs := quickRecord("off")
	if err := d.QueueEnded(t.Context(), r, evs); err != nil {
		t.Fatal(err)
	}
	if !stored(t, d, r.ID) {
		t.Fatal("with quick writes off, QueueEnded returned before the record was written")
	}
}

// TestQuickWrites_CloseWritesQueued checks a graceful stop writes every
// queued record, queued from many goroutines with the longest lag: the
// store opened again on the directory reads them all, with their logs.
func TestQuickWrites_CloseWritesQueued(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := Config{QuickWriteLag: MaxQuickWriteLag.String()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, dir, cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	d := delegationsOf(t, s, DelegationsConfig{quickBatch: 16})
	const workers, each = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				r, evs := quickRecord(fmt.Sprintf("stop-%d-%d", w, i))
				if err := d.QueueEnded(ctx, r, evs); err != nil {
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
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	d = delegationsOf(t, openTest(t, dir, cfg), DelegationsConfig{})
	for w := range workers {
		for i := range each {
			id := fmt.Sprintf("stop-%d-%d", w, i)
			if !stored(t, d, id) {
				t.Errorf("%s: queued before the stop, missing after it", id)
				continue
			}
			if evs, err := d.Events(ctx, id, 0, 0); err != nil || len(evs) != 2 {
				t.Errorf("%s: Events = %d, %v; want its 2", id, len(evs), err)
			}
		}
	}
	if got := listIDs(t, d); len(got) != workers*each {
		t.Errorf("listed %d records, want %d", len(got), workers*each)
	}
}

// listIDs lists every record's id.
func listIDs(t *testing.T, d *Delegations) []string {
	t.Helper()
	var ids []string
	q := delegation.Query{PageSize: delegation.MaxPageSize}
	for {
		p, err := d.List(t.Context(), q)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Records {
			ids = append(ids, r.ID)
		}
		if p.NextPageToken == "" {
			return ids
		}
		q.PageToken = p.NextPageToken
	}
}

// TestQuickWrites_FullQueueWritesAtOnce checks a record that finds the
// queue full, by count or by bytes, is written before QueueEnded
// returns, and the queued ones are written still.
func TestQuickWrites_FullQueueWritesAtOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		cfg    DelegationsConfig
		queued int // of 5
	}{
		{"records", DelegationsConfig{quickQueue: 2}, 2},
		{"bytes", DelegationsConfig{quickQueueBytes: 1}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			d := delegationsOf(t, openTest(t, "", Config{QuickWriteLag: MaxQuickWriteLag.String()}), tc.cfg)
			var ids []string
			for i := range 5 {
				r, evs := quickRecord(fmt.Sprintf("full-%d", i))
				if err := d.QueueEnded(t.Context(), r, evs); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, r.ID)
			}
			for i, id := range ids {
				if got, want := stored(t, d, id), i >= tc.queued; got != want {
					t.Errorf("%s written before the lag: %t, want %t (queue holds %d)", id, got, want, tc.queued)
				}
			}
			testwait.Until(t, 10*time.Second, "the queued records written", func() bool {
				return !slices.ContainsFunc(ids, func(id string) bool { return !stored(t, d, id) })
			})
		})
	}
}

// TestQuickWrites_ReadAsksForWrite checks a read of a queued record
// returns it only once it is written, asking for the write at once
// rather than waiting the lag (the longest here).
func TestQuickWrites_ReadAsksForWrite(t *testing.T) {
	t.Parallel()
	d := delegationsOf(t, openTest(t, "", Config{QuickWriteLag: MaxQuickWriteLag.String()}), DelegationsConfig{})
	r, evs := quickRecord("read")
	if err := d.QueueEnded(t.Context(), r, evs); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := d.Get(t.Context(), r.ID); err != nil {
		t.Fatalf("Get of a queued record: %v", err)
	}
	if !stored(t, d, r.ID) {
		t.Fatal("Get returned a queued record not yet written")
	}
	t.Logf("Get took %s (lag %s)", time.Since(start).Round(time.Millisecond), MaxQuickWriteLag)
}

// TestQuickWrites_Concurrent queues, reads and lists records from many
// goroutines while the committer writes small groups.
func TestQuickWrites_Concurrent(t *testing.T) {
	t.Parallel()
	d := delegationsOf(t, openTest(t, "", Config{QuickWriteLag: "5ms"}), DelegationsConfig{quickBatch: 4, quickQueue: 16})
	const workers, each = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				r, evs := quickRecord(fmt.Sprintf("c-%d-%d", w, i))
				if err := d.QueueEnded(t.Context(), r, evs); err != nil {
					errs <- err
					return
				}
				if i%3 == 0 {
					if _, err := d.Get(t.Context(), r.ID); err != nil {
						errs <- fmt.Errorf("Get(%s): %w", r.ID, err)
						return
					}
				}
				if i%7 == 0 {
					if _, err := d.List(t.Context(), delegation.Query{PageSize: 5}); err != nil {
						errs <- fmt.Errorf("List: %w", err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := listIDs(t, d); len(got) != workers*each {
		t.Errorf("listed %d records, want %d", len(got), workers*each)
	}
	if n := d.quick.n.Load(); n != 0 {
		t.Errorf("%d records still pending after every read", n)
	}
}
