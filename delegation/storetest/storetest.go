// Package storetest checks an implementation of delegation.Store against
// the contract its doc comments state: records put and got, listed newest
// first with filters and paging, event logs appended, read and waited on,
// the running delegations tracked, and ended delegations and single steps
// kept in one go by stores that can (delegation.EndedStore,
// delegation.StepStore). Every implementation runs the same suite, so the
// memory store and the durable ones answer alike.
package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
)

// opTimeout bounds every call the suite makes on a store.
const opTimeout = 10 * time.Second

// Run runs the contract suite. open returns a new, empty store for each
// subtest; it owns the store's clean-up (t.Cleanup). Subtests run in
// parallel.
func Run(t *testing.T, open func(t *testing.T) delegation.Store) {
	for _, tc := range []struct {
		name string
		test func(t *testing.T, s delegation.Store)
	}{
		{"PutGet", testPutGet},
		{"GetNotFound", testGetNotFound},
		{"ListOrderAndFilter", testListOrderAndFilter},
		{"ListPaging", testListPaging},
		{"ListBadQuery", testListBadQuery},
		{"ListEmpty", testListEmpty},
		{"ListKeepsCreationOrder", testListKeepsCreationOrder},
		{"AppendEvents", testAppendEvents},
		{"AppendRetriedKeepsFirst", testAppendRetriedKeepsFirst},
		{"EventsSeparateLogs", testEventsSeparateLogs},
		{"WaitAtOnce", testWaitAtOnce},
		{"WaitWakesOnAppend", testWaitWakesOnAppend},
		{"WaitHonoursContext", testWaitHonoursContext},
		{"Running", testRunning},
		{"Concurrent", testConcurrent},
		{"PutEnded", testPutEnded},
		{"EndedLogReadAsAnyOther", testEndedLogReadAsAnyOther},
		{"PutStep", testPutStep},
		{"Seal", testSeal},
		{"QueueEnded", testQueueEnded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.test(t, open(t))
		})
	}
}

// ctx returns a context bounding one call.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), opTimeout)
	t.Cleanup(cancel)
	return c
}

// epoch is when the suite's records start.
var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// record returns a record with every field the store must keep, created
// i minutes after epoch.
func record(id string, state a2a.TaskState, i int) delegation.Record {
	at := epoch.Add(time.Duration(i) * time.Minute)
	return delegation.Record{
		ID: id, State: state,
		Downstream: delegation.Hop{Agent: "agent-" + id, CardDigest: "sha256:" + id, TaskID: a2a.TaskID("task-" + id), ContextID: "ctx-" + id},
		Chain:      delegation.Chain{Path: []string{"orchd-a"}, Depth: 1, MaxDepth: 4},
		Decision:   &delegation.Decision{Chosen: "agent-" + id},
		Error:      "",
		LastEvent:  int64(i),
		CreatedAt:  at, UpdatedAt: at.Add(time.Second),
		Progress: &delegation.Progress{Streaming: true, SteerSeq: int64(i)},
	}
}

func put(t *testing.T, s delegation.Store, rs ...delegation.Record) {
	t.Helper()
	for _, r := range rs {
		if err := s.Put(ctx(t), r); err != nil {
			t.Fatalf("Put(%s): %v", r.ID, err)
		}
	}
}

// sameJSON reports whether a and b encode alike: what a store that
// serializes records can promise.
func sameJSON(t *testing.T, a, b any) bool {
	t.Helper()
	ja, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	jb, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(ja) == string(jb)
}

func testPutGet(t *testing.T, s delegation.Store) {
	for _, tc := range []struct {
		name  string
		puts  []delegation.Record
		id    string
		want  delegation.Record
		state a2a.TaskState
	}{
		{"running", []delegation.Record{record("a", a2a.TaskStateWorking, 1)}, "a", record("a", a2a.TaskStateWorking, 1), ""},
		{"ended", []delegation.Record{record("b", a2a.TaskStateCompleted, 2)}, "b", record("b", a2a.TaskStateCompleted, 2), ""},
		{"replaced", []delegation.Record{record("c", a2a.TaskStateSubmitted, 3), record("c", a2a.TaskStateFailed, 3)}, "c", record("c", a2a.TaskStateFailed, 3), ""},
		{"id that is not a UUID", []delegation.Record{record("x/y z.é", a2a.TaskStateWorking, 4)}, "x/y z.é", record("x/y z.é", a2a.TaskStateWorking, 4), ""},
	} {
		put(t, s, tc.puts...)
		got, err := s.Get(ctx(t), tc.id)
		if err != nil {
			t.Fatalf("%s: Get: %v", tc.name, err)
		}
		if !sameJSON(t, got, tc.want) {
			t.Errorf("%s: Get = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func testGetNotFound(t *testing.T, s delegation.Store) {
	put(t, s, record("known", a2a.TaskStateWorking, 1))
	for _, id := range []string{"unknown", "", "known2"} {
		if _, err := s.Get(ctx(t), id); !errors.Is(err, delegation.ErrNotFound) {
			t.Errorf("Get(%q) error = %v, want ErrNotFound", id, err)
		}
	}
}

// listAll pages through a listing, checking every page's bound, and
// returns the ids in order.
func listAll(t *testing.T, s delegation.Store, q delegation.Query) []string {
	t.Helper()
	size := q.PageSize
	if size == 0 {
		size = delegation.DefaultPageSize
	}
	var ids []string
	for range 1000 {
		p, err := s.List(ctx(t), q)
		if err != nil {
			t.Fatalf("List(%+v): %v", q, err)
		}
		if len(p.Records) > size {
			t.Fatalf("List(%+v) returned %d records, over the page size %d", q, len(p.Records), size)
		}
		for _, r := range p.Records {
			ids = append(ids, r.ID)
		}
		if p.NextPageToken == "" {
			return ids
		}
		q.PageToken = p.NextPageToken
	}
	t.Fatalf("List(%+v) did not end within 1000 pages", q)
	return nil
}

// listFixture is seven records, created a minute apart in order a to g.
func listFixture(t *testing.T, s delegation.Store) {
	states := []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateFailed,
		a2a.TaskStateCompleted, a2a.TaskStateInputRequired, a2a.TaskStateCompleted, a2a.TaskStateWorking}
	for i, st := range states {
		put(t, s, record(string(rune('a'+i)), st, i))
	}
}

func testListOrderAndFilter(t *testing.T, s delegation.Store) {
	listFixture(t, s)
	for _, tc := range []struct {
		name string
		q    delegation.Query
		want []string
	}{
		{"all, newest first", delegation.Query{}, []string{"g", "f", "e", "d", "c", "b", "a"}},
		{"largest page", delegation.Query{PageSize: delegation.MaxPageSize}, []string{"g", "f", "e", "d", "c", "b", "a"}},
		{"completed", delegation.Query{State: a2a.TaskStateCompleted}, []string{"f", "d", "b"}},
		{"working", delegation.Query{State: a2a.TaskStateWorking}, []string{"g", "a"}},
		{"failed", delegation.Query{State: a2a.TaskStateFailed}, []string{"c"}},
		{"a state nobody is in", delegation.Query{State: a2a.TaskStateCanceled}, nil},
	} {
		if got := listAll(t, s, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%s: listed %v, want %v", tc.name, got, tc.want)
		}
	}
}

func testListPaging(t *testing.T, s delegation.Store) {
	listFixture(t, s)
	for _, tc := range []struct {
		name string
		q    delegation.Query
		want []string
	}{
		{"pages of 1", delegation.Query{PageSize: 1}, []string{"g", "f", "e", "d", "c", "b", "a"}},
		{"pages of 2", delegation.Query{PageSize: 2}, []string{"g", "f", "e", "d", "c", "b", "a"}},
		{"pages of 7", delegation.Query{PageSize: 7}, []string{"g", "f", "e", "d", "c", "b", "a"}},
		{"completed, pages of 2", delegation.Query{State: a2a.TaskStateCompleted, PageSize: 2}, []string{"f", "d", "b"}},
	} {
		if got := listAll(t, s, tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%s: listed %v, want %v", tc.name, got, tc.want)
		}
	}
	// A full first page says there is more; the listing goes on where it
	// left off.
	p, err := s.List(ctx(t), delegation.Query{PageSize: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := ids(p.Records); !slices.Equal(got, []string{"g", "f", "e"}) || p.NextPageToken == "" {
		t.Fatalf("first page = %v, token %q; want g f e and a token", got, p.NextPageToken)
	}
	// A page that ends the listing exactly has no token.
	p, err = s.List(ctx(t), delegation.Query{PageSize: 7})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 7 || p.NextPageToken != "" {
		t.Errorf("page of 7 holding every record: %d records, token %q; want 7 and no token", len(p.Records), p.NextPageToken)
	}
}

func ids(rs []delegation.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func testListBadQuery(t *testing.T, s delegation.Store) {
	listFixture(t, s)
	for _, tc := range []struct {
		name     string
		q        delegation.Query
		badToken bool
	}{
		{"negative page size", delegation.Query{PageSize: -1}, false},
		{"page size over the maximum", delegation.Query{PageSize: delegation.MaxPageSize + 1}, false},
		{"token not base64", delegation.Query{PageToken: "%%%not a token%%%"}, true},
		{"token of another kind", delegation.Query{PageToken: "aGVsbG8"}, true},
	} {
		_, err := s.List(ctx(t), tc.q)
		if !errors.Is(err, delegation.ErrBadRequest) {
			t.Errorf("%s: error = %v, want ErrBadRequest", tc.name, err)
		}
		if tc.badToken && !errors.Is(err, delegation.ErrBadPageToken) {
			t.Errorf("%s: error = %v, want ErrBadPageToken", tc.name, err)
		}
	}
}

func testListEmpty(t *testing.T, s delegation.Store) {
	p, err := s.List(ctx(t), delegation.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 0 || p.NextPageToken != "" {
		t.Errorf("empty store listed %v, token %q", ids(p.Records), p.NextPageToken)
	}
}

// testListKeepsCreationOrder checks a record put again (its state
// changed) keeps its place, and is listed under its new state.
func testListKeepsCreationOrder(t *testing.T, s delegation.Store) {
	listFixture(t, s)
	put(t, s, record("a", a2a.TaskStateCompleted, 0), record("d", a2a.TaskStateWorking, 3))
	if got, want := listAll(t, s, delegation.Query{PageSize: 3}), []string{"g", "f", "e", "d", "c", "b", "a"}; !slices.Equal(got, want) {
		t.Errorf("after updates listed %v, want %v", got, want)
	}
	if got, want := listAll(t, s, delegation.Query{State: a2a.TaskStateCompleted}), []string{"f", "b", "a"}; !slices.Equal(got, want) {
		t.Errorf("completed after updates: %v, want %v", got, want)
	}
	r, err := s.Get(ctx(t), "a")
	if err != nil || r.State != a2a.TaskStateCompleted {
		t.Errorf("Get(a) = %v, %v; want the completed record", r.State, err)
	}
}

// event returns event seq of a log, with fields the store must keep.
func event(seq int64, kind string) delegation.Event {
	return delegation.Event{Seq: seq, At: epoch.Add(time.Duration(seq) * time.Second), Kind: kind,
		State: a2a.TaskStateWorking, Error: fmt.Sprintf("note %d", seq), Metadata: map[string]any{"n": float64(seq)}}
}

func appendN(t *testing.T, s delegation.Store, id string, from, to int64) {
	t.Helper()
	for seq := from; seq <= to; seq++ {
		if err := s.Append(ctx(t), id, event(seq, "state")); err != nil {
			t.Fatalf("Append(%s, %d): %v", id, seq, err)
		}
	}
}

func seqs(evs []delegation.Event) []int64 {
	var out []int64
	for _, ev := range evs {
		out = append(out, ev.Seq)
	}
	return out
}

func span(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

func testAppendEvents(t *testing.T, s delegation.Store) {
	appendN(t, s, "d1", 1, 10)
	for _, tc := range []struct {
		id    string
		after int64
		limit int
		want  []int64
	}{
		{"d1", 0, 0, span(1, 10)},
		{"d1", 0, 3, span(1, 3)},
		{"d1", 3, 0, span(4, 10)},
		{"d1", 3, 2, []int64{4, 5}},
		{"d1", 9, 0, []int64{10}},
		{"d1", 9, 5, []int64{10}},
		{"d1", 10, 0, nil},
		{"d1", 15, 0, nil},
		{"d1", -1, 2, []int64{1, 2}},
		{"no-such-log", 0, 0, nil},
	} {
		evs, err := s.Events(ctx(t), tc.id, tc.after, tc.limit)
		if err != nil {
			t.Fatalf("Events(%s, %d, %d): %v", tc.id, tc.after, tc.limit, err)
		}
		if got := seqs(evs); !slices.Equal(got, tc.want) {
			t.Errorf("Events(%s, after %d, limit %d) = %v, want %v", tc.id, tc.after, tc.limit, got, tc.want)
		}
	}
	evs, err := s.Events(ctx(t), "d1", 4, 1)
	if err != nil || len(evs) != 1 {
		t.Fatalf("Events(d1, 4, 1) = %v, %v", evs, err)
	}
	if !sameJSON(t, evs[0], event(5, "state")) {
		t.Errorf("event 5 = %+v, want %+v", evs[0], event(5, "state"))
	}
}

func testAppendRetriedKeepsFirst(t *testing.T, s delegation.Store) {
	appendN(t, s, "d1", 1, 3)
	for _, seq := range []int64{3, 2, 1, 3} {
		if err := s.Append(ctx(t), "d1", event(seq, "retried")); err != nil {
			t.Fatalf("retried Append(%d): %v", seq, err)
		}
	}
	appendN(t, s, "d1", 4, 4)
	evs, err := s.Events(ctx(t), "d1", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := seqs(evs); !slices.Equal(got, span(1, 4)) {
		t.Fatalf("log = %v, want 1..4 once each", got)
	}
	for _, ev := range evs {
		if ev.Kind != "state" {
			t.Errorf("event %d is the retried %q, want the first", ev.Seq, ev.Kind)
		}
	}
}

func testEventsSeparateLogs(t *testing.T, s delegation.Store) {
	// Interleaved appends, so one log's events sit between another's.
	for seq := int64(1); seq <= 20; seq++ {
		for _, id := range []string{"x", "y", "z"} {
			if seq > 10 && id == "z" {
				continue
			}
			if err := s.Append(ctx(t), id, event(seq, id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		id    string
		after int64
		limit int
		want  []int64
	}{
		{"x", 0, 0, span(1, 20)},
		{"y", 7, 5, span(8, 12)},
		{"z", 0, 0, span(1, 10)},
		{"z", 5, 0, span(6, 10)},
		{"x", 19, 0, []int64{20}},
	} {
		evs, err := s.Events(ctx(t), tc.id, tc.after, tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if got := seqs(evs); !slices.Equal(got, tc.want) {
			t.Errorf("Events(%s, %d, %d) = %v, want %v", tc.id, tc.after, tc.limit, got, tc.want)
		}
		for _, ev := range evs {
			if ev.Kind != tc.id {
				t.Errorf("log %s holds event %d of %s", tc.id, ev.Seq, ev.Kind)
			}
		}
	}
}

func testWaitAtOnce(t *testing.T, s delegation.Store) {
	appendN(t, s, "d1", 1, 3)
	for _, after := range []int64{0, 1, 2} {
		if err := s.Wait(ctx(t), "d1", after); err != nil {
			t.Errorf("Wait(after %d) with 3 events: %v", after, err)
		}
	}
}

func testWaitWakesOnAppend(t *testing.T, s delegation.Store) {
	for _, tc := range []struct {
		name   string
		before int64 // events in the log before waiting
		after  int64
	}{
		{"empty log", 0, 0},
		{"waiting past the tail", 3, 3},
	} {
		id := "wait-" + fmt.Sprint(tc.before)
		appendN(t, s, id, 1, tc.before)
		done := make(chan error, 1)
		go func() { done <- s.Wait(ctx(t), id, tc.after) }()
		select {
		case err := <-done:
			t.Fatalf("%s: Wait returned %v before any event above %d", tc.name, err, tc.after)
		case <-time.After(100 * time.Millisecond):
		}
		// An event at or below after does not wake it.
		if tc.before > 0 {
			if err := s.Append(ctx(t), id, event(tc.before, "again")); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				t.Fatalf("%s: Wait returned %v on a retried event", tc.name, err)
			case <-time.After(100 * time.Millisecond):
			}
		}
		appendN(t, s, id, tc.before+1, tc.before+1)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s: Wait: %v", tc.name, err)
			}
		case <-time.After(opTimeout):
			t.Fatalf("%s: Wait did not return within %s of the append", tc.name, opTimeout)
		}
	}
}

func testWaitHonoursContext(t *testing.T, s delegation.Store) {
	appendN(t, s, "d1", 1, 1)
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 200*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(t.Context())
			time.AfterFunc(200*time.Millisecond, cancel)
			return c, cancel
		}, context.Canceled},
	} {
		c, cancel := tc.ctx()
		start := time.Now()
		err := s.Wait(c, "d1", 1)
		cancel()
		if !errors.Is(err, tc.want) {
			t.Errorf("%s: Wait = %v, want %v", tc.name, err, tc.want)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("%s: Wait took %s to notice its context ended", tc.name, took)
		}
	}
}

func testRunning(t *testing.T, s delegation.Store) {
	for _, step := range []struct {
		name string
		puts []delegation.Record
		want []string
	}{
		{"none yet", nil, nil},
		{"running and ended", []delegation.Record{
			record("a", a2a.TaskStateWorking, 1), record("b", a2a.TaskStateSubmitted, 2),
			record("c", a2a.TaskStateCompleted, 3), record("d", a2a.TaskStateInputRequired, 4),
			record("e", a2a.TaskStateRejected, 5),
		}, []string{"a", "b", "d"}},
		{"one ends", []delegation.Record{record("a", a2a.TaskStateFailed, 1)}, []string{"b", "d"}},
		{"an ended one runs again", []delegation.Record{record("c", a2a.TaskStateWorking, 3)}, []string{"b", "c", "d"}},
		{"an update that stays running", []delegation.Record{record("b", a2a.TaskStateWorking, 2)}, []string{"b", "c", "d"}},
		{"all end", []delegation.Record{
			record("b", a2a.TaskStateCanceled, 2), record("c", a2a.TaskStateCompleted, 3), record("d", a2a.TaskStateFailed, 4),
		}, nil},
	} {
		put(t, s, step.puts...)
		got, err := s.Running(ctx(t))
		if err != nil {
			t.Fatalf("%s: Running: %v", step.name, err)
		}
		slices.Sort(got)
		if !slices.Equal(got, step.want) {
			t.Errorf("%s: Running = %v, want %v", step.name, got, step.want)
		}
	}
}

// testConcurrent puts and appends from several goroutines at once, each
// on its own delegation, and checks nothing was lost.
func testConcurrent(t *testing.T, s delegation.Store) {
	const workers, events = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			id := fmt.Sprintf("w%d", w)
			for seq := int64(1); seq <= events; seq++ {
				r := record(id, a2a.TaskStateWorking, w)
				r.LastEvent = seq
				if seq == events {
					r.State = a2a.TaskStateCompleted
				}
				if err := s.Append(ctx(t), id, event(seq, id)); err != nil {
					errs <- err
					return
				}
				if err := s.Put(ctx(t), r); err != nil {
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
	for w := range workers {
		id := fmt.Sprintf("w%d", w)
		r, err := s.Get(ctx(t), id)
		if err != nil || r.LastEvent != events || r.State != a2a.TaskStateCompleted {
			t.Errorf("Get(%s) = last event %d, %s, %v; want %d, completed", id, r.LastEvent, r.State, err, events)
		}
		evs, err := s.Events(ctx(t), id, 0, 0)
		if err != nil || !slices.Equal(seqs(evs), span(1, events)) {
			t.Errorf("Events(%s) = %v, %v", id, seqs(evs), err)
		}
	}
	if got := listAll(t, s, delegation.Query{PageSize: 3}); len(got) != workers {
		t.Errorf("listed %v, want %d records", got, workers)
	}
	if running, err := s.Running(ctx(t)); err != nil || len(running) != 0 {
		t.Errorf("Running = %v, %v; want none", running, err)
	}
}
