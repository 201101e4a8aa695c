package storetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
)

// testPutEnded checks a store's PutEnded, when it has one: a delegation
// that ended as it started is kept whole (record, log, listing) and not
// running; one whose log was begun already is completed, not doubled; and
// what breaks its contract is refused as a bad request.
func testPutEnded(t *testing.T, s delegation.Store) {
	es, ok := s.(delegation.EndedStore)
	if !ok {
		t.Skipf("%T keeps ended delegations with Append and Put", s)
	}
	put(t, s, record("older", a2a.TaskStateCompleted, 1))
	evs := []delegation.Event{event(1, "artifact"), event(2, "state"), event(3, "message")}
	for _, tc := range []struct {
		name    string
		id      string
		before  func(id string) // what was stored of it already
		evs     []delegation.Event
		wantLog []int64
	}{
		{"new", "new", func(string) {}, evs, span(1, 3)},
		{"one event", "one", func(string) {}, evs[:1], span(1, 1)},
		{"log begun", "begun", func(id string) { appendN(t, s, id, 1, 1) }, evs, span(1, 3)},
		{"record kept running", "kept", func(id string) { put(t, s, record(id, a2a.TaskStateWorking, 2)) }, evs[:2], span(1, 2)},
	} {
		tc.before(tc.id)
		want := record(tc.id, a2a.TaskStateCompleted, 2)
		if err := es.PutEnded(ctx(t), want, tc.evs); err != nil {
			t.Fatalf("%s: PutEnded: %v", tc.name, err)
		}
		got, err := s.Get(ctx(t), tc.id)
		if err != nil || !sameJSON(t, got, want) {
			t.Errorf("%s: Get = %+v, %v; want %+v", tc.name, got, err, want)
		}
		log, err := s.Events(ctx(t), tc.id, 0, 0)
		if err != nil || !slices.Equal(seqs(log), tc.wantLog) {
			t.Errorf("%s: Events = %v, %v; want %v", tc.name, seqs(log), err, tc.wantLog)
		}
		if len(log) > 1 && !sameJSON(t, log[1], tc.evs[1]) {
			t.Errorf("%s: event 2 = %+v, want %+v", tc.name, log[1], tc.evs[1])
		}
		if tc.name == "log begun" && len(log) > 0 && log[0].Kind != "state" {
			t.Errorf("%s: event 1 is %q: the one stored first must stay", tc.name, log[0].Kind)
		}
	}
	if got := listAll(t, s, delegation.Query{}); !slices.Equal(got, []string{"kept", "begun", "one", "new", "older"}) {
		t.Errorf("List = %v, want the ended ones newest first", got)
	}
	if running, err := s.Running(ctx(t)); err != nil || len(running) != 0 {
		t.Errorf("Running = %v, %v; want none", running, err)
	}
	for _, tc := range []struct {
		name string
		r    delegation.Record
		evs  []delegation.Event
	}{
		{"running record", record("bad1", a2a.TaskStateWorking, 3), evs},
		{"log not from 1", record("bad2", a2a.TaskStateCompleted, 3), evs[1:]},
		{"log with a gap", record("bad3", a2a.TaskStateCompleted, 3), []delegation.Event{evs[0], evs[2]}},
	} {
		if err := es.PutEnded(ctx(t), tc.r, tc.evs); !errors.Is(err, delegation.ErrBadRequest) {
			t.Errorf("%s: PutEnded error = %v, want ErrBadRequest", tc.name, err)
		}
		if _, err := s.Get(ctx(t), tc.r.ID); !errors.Is(err, delegation.ErrNotFound) {
			t.Errorf("%s: a refused PutEnded stored the record (%v)", tc.name, err)
		}
	}
}

// testEndedLogReadAsAnyOther checks that the log PutEnded keeps (however
// the store keeps it) reads as an appended one does: Events by after and
// limit, Wait at once for an event kept and until its context ends for
// one never to come, and a later Put of the ended record (naming its
// upstream task, say) leaves the log as it was.
func testEndedLogReadAsAnyOther(t *testing.T, s delegation.Store) {
	es, ok := s.(delegation.EndedStore)
	if !ok {
		t.Skipf("%T keeps ended delegations with Append and Put", s)
	}
	evs := []delegation.Event{event(1, "artifact"), event(2, "state")}
	r := record("ended", a2a.TaskStateCompleted, 2)
	if err := es.PutEnded(ctx(t), r, evs); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		for _, tc := range []struct {
			after int64
			limit int
			want  []int64
		}{{0, 0, span(1, 2)}, {1, 0, span(2, 2)}, {0, 1, span(1, 1)}, {2, 0, nil}} {
			got, err := s.Events(ctx(t), r.ID, tc.after, tc.limit)
			if err != nil || !slices.Equal(seqs(got), tc.want) {
				t.Errorf("%s: Events(after %d, limit %d) = %v, %v; want %v", when, tc.after, tc.limit, seqs(got), err, tc.want)
			}
		}
		if got, err := s.Events(ctx(t), r.ID, 0, 0); err == nil && len(got) == 2 && !sameJSON(t, got[1], evs[1]) {
			t.Errorf("%s: event 2 = %+v, want %+v", when, got[1], evs[1])
		}
		if err := s.Wait(ctx(t), r.ID, 1); err != nil {
			t.Errorf("%s: Wait(after 1) = %v, want at once", when, err)
		}
		c, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		if err := s.Wait(c, r.ID, 2); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: Wait(after 2) = %v, want its context's deadline", when, err)
		}
	}
	check("after PutEnded")
	r.Upstream = &delegation.Upstream{TaskID: "up-1"}
	put(t, s, r)
	if got, err := s.Get(ctx(t), r.ID); err != nil || !sameJSON(t, got, r) {
		t.Errorf("Get after Put = %+v, %v; want %+v", got, err, r)
	}
	check("after a later Put")
}
