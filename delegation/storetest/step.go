package storetest

import (
	"errors"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
)

// testPutStep checks a store's PutStep, when it has one: each step of a
// running delegation keeps its event in the log and its record as Append
// and Put would, whether the delegation is new to the store, was begun
// with Append and Put, or just took a step; a step retried keeps the
// first event and the newer record; a step that ends the delegation
// takes it out of Running; and a bad event is refused as a bad request.
func testPutStep(t *testing.T, s delegation.Store) {
	ss, ok := s.(delegation.StepStore)
	if !ok {
		t.Skipf("%T keeps each step with Append and Put", s)
	}
	put(t, s, record("begun", a2a.TaskStateWorking, 1))
	appendN(t, s, "begun", 1, 2)
	for _, tc := range []struct {
		name    string
		id      string
		state   a2a.TaskState
		ev      delegation.Event
		wantLog []int64
		running bool
	}{
		{"new", "new", a2a.TaskStateWorking, event(1, "state"), span(1, 1), true},
		{"after its first step", "new", a2a.TaskStateWorking, event(2, "steer"), span(1, 2), true},
		{"after Append and Put", "begun", a2a.TaskStateWorking, event(3, "artifact"), span(1, 3), true},
		{"retried", "begun", a2a.TaskStateInputRequired, event(3, "retried"), span(1, 3), true},
		{"next after the retry", "begun", a2a.TaskStateWorking, event(4, "state"), span(1, 4), true},
		{"ends it", "new", a2a.TaskStateCompleted, event(3, "state"), span(1, 3), false},
	} {
		want := record(tc.id, tc.state, int(tc.ev.Seq))
		if err := ss.PutStep(ctx(t), want, tc.ev); err != nil {
			t.Fatalf("%s: PutStep: %v", tc.name, err)
		}
		got, err := s.Get(ctx(t), tc.id)
		if err != nil || !sameJSON(t, got, want) {
			t.Errorf("%s: Get = %+v, %v; want %+v", tc.name, got, err, want)
		}
		log, err := s.Events(ctx(t), tc.id, 0, 0)
		if err != nil || !slices.Equal(seqs(log), tc.wantLog) {
			t.Fatalf("%s: Events = %v, %v; want %v", tc.name, seqs(log), err, tc.wantLog)
		}
		last := log[len(log)-1]
		if tc.name == "retried" {
			if last.Kind != "artifact" {
				t.Errorf("%s: event 3 is %q: the one stored first must stay", tc.name, last.Kind)
			}
		} else if !sameJSON(t, last, tc.ev) {
			t.Errorf("%s: event %d = %+v, want %+v", tc.name, tc.ev.Seq, last, tc.ev)
		}
		running, err := s.Running(ctx(t))
		if err != nil || slices.Contains(running, tc.id) != tc.running {
			t.Errorf("%s: Running = %v, %v; want %s in it: %v", tc.name, running, err, tc.id, tc.running)
		}
	}
	if got := listAll(t, s, delegation.Query{}); !slices.Equal(got, []string{"new", "begun"}) {
		t.Errorf("List = %v, want each delegation once, newest first", got)
	}
	if err := ss.PutStep(ctx(t), record("bad", a2a.TaskStateWorking, 1), event(0, "state")); !errors.Is(err, delegation.ErrBadRequest) {
		t.Errorf("PutStep of event 0 = %v, want ErrBadRequest", err)
	}
	if _, err := s.Get(ctx(t), "bad"); !errors.Is(err, delegation.ErrNotFound) {
		t.Errorf("a refused PutStep stored the record (%v)", err)
	}
}
