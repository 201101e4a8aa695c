package delegation

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/steering"
)

func textMessage(s string) *a2a.Message {
	return a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(s))
}

// working delegates req from an orchd named b to a new agent started
// with o and do, registered under its lowercased name, and waits until the
// agent works on it.
func working(t *testing.T, o testagent.Options, do testagent.Behaviour, req Request) (*fixture, *testagent.Agent, *Delegation) {
	t.Helper()
	agent := testagent.Start(t, o, do)
	f := newFixture(t, Config{Self: "b"})
	f.add(t, strings.ToLower(o.Name), agent.URL)
	d, err := f.engine.Delegate(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	return f, agent, d
}

func TestSteer_ReachesTheAgentInOrderOnce(t *testing.T) {
	t.Parallel()
	for _, streaming := range []bool{true, false} {
		f, agent, d := working(t, testagent.Options{Name: "C", Skill: "research", Streaming: streaming, Steering: true}, testagent.Steerable(), Request{Text: "survey", Skill: "research", Requires: []string{"steerable"}})
		var receipts []steering.Receipt
		for i, text := range []string{"narrow to 2025", "primary sources only", "finish"} {
			m := textMessage(text)
			m.Metadata = map[string]any{steering.ReferenceKey: "out-" + string(rune('1'+i))}
			r, err := f.engine.Steer(t.Context(), d.ID(), steering.Steer, m)
			if err != nil {
				t.Fatalf("streaming %v: steer %d: %v", streaming, i, err)
			}
			receipts = append(receipts, r)
			if i == 0 {
				dup, err := f.engine.Steer(t.Context(), d.ID(), steering.Steer, m)
				if err != nil {
					t.Fatalf("retried steer: %v", err)
				}
				if !dup.Duplicate || dup.Seq != 1 {
					t.Errorf("retried steer: receipt %+v, want a duplicate of 1", dup)
				}
			}
		}
		for i, r := range receipts {
			seq := int64(i + 1)
			want := steering.Receipt{Control: steering.Steer, Seq: seq, ReferenceMessageID: "out-" + string(rune('1'+i)),
				Hops: []steering.Hop{{Agent: "b", Seq: seq}, {Agent: "C", Seq: seq}}}
			if diff := cmp.Diff(want, r, cmpopts.IgnoreFields(steering.Receipt{}, "MessageID")); diff != "" {
				t.Errorf("streaming %v: receipt %d (-want +got):\n%s", streaming, i, diff)
			}
		}
		rec := waitState(t, d, a2a.TaskStateCompleted)
		if got := testagent.Text(rec.Result); got != "finished: narrow to 2025, primary sources only, finish" {
			t.Errorf("streaming %v: result %q", streaming, got)
		}
		if sigs := agent.Signals(); len(sigs) != 3 {
			t.Errorf("streaming %v: the agent took %d signals, want 3 (the retry not again)", streaming, len(sigs))
		}
		evs, _, _ := d.Events(0)
		steers := 0
		for _, ev := range evs {
			if ev.Kind == "steer" && ev.Receipt != nil {
				steers++
			}
		}
		if steers != 3 {
			t.Errorf("streaming %v: %d steer events in the log, want 3", streaming, steers)
		}
	}
}

func TestInterrupt_SettlesAndResumesTheSameTask(t *testing.T) {
	t.Parallel()
	f, agent, d := working(t, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable(), Request{Text: "survey", Skill: "research"})
	r, err := f.engine.Steer(t.Context(), d.ID(), steering.Interrupt, textMessage("stop: the premise changed"))
	if err != nil {
		t.Fatal(err)
	}
	if rec := d.Record(); rec.State != a2a.TaskStateInputRequired {
		t.Fatalf("after interrupt: state %s, want input required", rec.State)
	}
	if r.Control != steering.Interrupt || len(r.Hops) != 2 {
		t.Fatalf("after interrupt: receipt %+v, want an interrupt through 2 hops", r)
	}
	evs, _, _ := d.Events(0)
	interrupted := false
	for _, ev := range evs {
		interrupted = interrupted || (ev.State == a2a.TaskStateInputRequired && ev.Metadata[steering.InterruptedKey] == true)
	}
	if !interrupted {
		t.Error("no INPUT_REQUIRED event marked interrupted")
	}
	// Interrupted work waits for input: another interrupt is refused, and
	// says it is an interrupt that was.
	_, err = f.engine.Steer(t.Context(), d.ID(), steering.Interrupt, textMessage("stop again"))
	if want := "cannot interrupt: delegation " + strconv.Quote(d.ID()) + " is TASK_STATE_INPUT_REQUIRED; only WORKING work can be interrupted"; !errors.Is(err, ErrNotSteerable) || err.Error() != want {
		t.Errorf("interrupt while waiting: err = %v, want %q", err, want)
	}
	// The caller's next message resumes the same downstream task.
	if _, err := f.engine.Send(t.Context(), d.ID(), textMessage("new premise: 2026")); err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	if _, err := f.engine.Steer(t.Context(), d.ID(), steering.Steer, textMessage("finish")); err != nil {
		t.Fatal(err)
	}
	done := waitState(t, d, a2a.TaskStateCompleted)
	msgs := agent.Messages()
	if len(msgs) != 2 || msgs[1].TaskID != done.Downstream.TaskID {
		t.Errorf("the resume did not reach the same task: %d executions", len(msgs))
	}
}

func TestSteer_RefusedAtANonSteerableHop(t *testing.T) {
	t.Parallel()
	f, agent, d := working(t, testagent.Options{Name: "D", Skill: "research", Streaming: true}, testagent.Hang(), Request{Text: "survey", Skill: "research"})
	before := len(agent.Calls())
	for c, want := range map[steering.Control]string{
		steering.Steer:     "cannot steer: hop d does not advertise the steerable mode of " + steering.URI,
		steering.Interrupt: "cannot interrupt: hop d does not advertise the interruptible mode of " + steering.URI,
	} {
		_, err := f.engine.Steer(t.Context(), d.ID(), c, textMessage("x"))
		if !errors.Is(err, ErrNotSteerable) || err.Error() != want {
			t.Errorf("%s: err = %v, want %q", c, err, want)
		}
	}
	if after := len(agent.Calls()); after != before {
		t.Errorf("a refused signal reached the agent: %v", agent.Calls()[before:])
	}
	if _, err := f.engine.Steer(t.Context(), "nope", steering.Steer, textMessage("x")); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown delegation: err = %v", err)
	}
	if _, err := f.engine.Cancel(t.Context(), d.ID()); err != nil {
		t.Fatal(err)
	}
}

// The status an interrupt settles on reaches a hop twice, with the
// acknowledgement and on the stream; a copy arriving after the caller
// resumed must not put the delegation back to waiting.
func TestInterrupt_LateCopyOfTheStatusDoesNotUndoAResume(t *testing.T) {
	t.Parallel()
	f, _, d := working(t, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable(), Request{Text: "survey", Skill: "research"})
	if _, err := f.engine.Steer(t.Context(), d.ID(), steering.Interrupt, textMessage("stop")); err != nil {
		t.Fatal(err)
	}
	evs, _, _ := d.Events(0)
	i := slices.IndexFunc(evs, func(ev Event) bool { return ev.State == a2a.TaskStateInputRequired && ev.Message != nil })
	if i < 0 {
		t.Fatalf("no settling status among %+v", evs)
	}
	settled := evs[i]
	if _, err := f.engine.Send(t.Context(), d.ID(), textMessage("go on")); err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	before := d.Record().LastEvent
	rec := d.Record()
	d.apply(&a2a.TaskStatusUpdateEvent{TaskID: rec.Downstream.TaskID, ContextID: rec.Downstream.ContextID,
		Status: a2a.TaskStatus{State: settled.State, Message: settled.Message}, Metadata: settled.Metadata})
	if now := d.Record(); now.State != a2a.TaskStateWorking || now.LastEvent != before {
		t.Errorf("a late copy of the settling status moved the delegation to %s (event %d, was %d)", now.State, now.LastEvent, before)
	}
	if _, err := f.engine.Cancel(t.Context(), d.ID()); err != nil {
		t.Fatal(err)
	}
}

// workingOnAHangingAgent delegates to a streaming agent that never ends
// its task, and returns the delegation once it is WORKING, with its record
// then: the events a test applies by hand meet a follower that will not
// apply anything of its own.
func workingOnAHangingAgent(t *testing.T) (*Delegation, Record) {
	t.Helper()
	agent := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true}, testagent.Hang())
	f := newFixture(t, Config{})
	f.add(t, "slow", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	return d, waitState(t, d, a2a.TaskStateWorking)
}

// TestApply_LateWorkingDoesNotUndoAWait checks that a WORKING status the
// hop recorded before the INPUT_REQUIRED already applied (an interrupt's
// acknowledgement applied ahead of a lagging stream) is dropped, while a
// later WORKING, as after the caller's input, is applied.
func TestApply_LateWorkingDoesNotUndoAWait(t *testing.T) {
	t.Parallel()
	d, rec := workingOnAHangingAgent(t)
	task := a2a.TaskInfo{TaskID: rec.Downstream.TaskID, ContextID: rec.Downstream.ContextID}
	at := func(state a2a.TaskState, when time.Time) *a2a.TaskStatusUpdateEvent {
		ev := a2a.NewStatusUpdateEvent(task, state, nil)
		ev.Status.Timestamp = &when
		return ev
	}
	now := time.Now()
	d.apply(at(a2a.TaskStateInputRequired, now))
	d.apply(at(a2a.TaskStateWorking, now.Add(-time.Second)))
	if got := d.Record().State; got != a2a.TaskStateInputRequired {
		t.Fatalf("after a late, older WORKING the state is %s", got)
	}
	d.apply(at(a2a.TaskStateWorking, now.Add(time.Second)))
	if got := d.Record().State; got != a2a.TaskStateWorking {
		t.Fatalf("after a newer WORKING the state is %s", got)
	}
	// An end is never dropped, whatever its timestamp says.
	d.apply(at(a2a.TaskStateCompleted, now.Add(-time.Hour)))
	if got := d.Record().State; got != a2a.TaskStateCompleted {
		t.Fatalf("after an end stamped in the past the state is %s", got)
	}
}

// TestApply_EventsOfAnotherTaskAreDropped: an agent's status update,
// artifact or task naming a task other than the one the delegation
// follows neither ends the delegation nor adds to it; its own still do.
func TestApply_EventsOfAnotherTaskAreDropped(t *testing.T) {
	t.Parallel()
	d, rec := workingOnAHangingAgent(t)
	other := a2a.TaskInfo{TaskID: "another-task", ContextID: rec.Downstream.ContextID}
	d.apply(a2a.NewArtifactEvent(other, a2a.NewTextPart("not ours")))
	d.apply(&a2a.Task{ID: other.TaskID, ContextID: other.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateFailed}})
	d.apply(a2a.NewStatusUpdateEvent(other, a2a.TaskStateCompleted, nil))
	if got := d.Record(); got.State != a2a.TaskStateWorking || len(got.Artifacts) != 0 {
		t.Fatalf("after another task's events: %s with %d artifacts, want WORKING with none", got.State, len(got.Artifacts))
	}
	own := a2a.TaskInfo{TaskID: rec.Downstream.TaskID, ContextID: rec.Downstream.ContextID}
	d.apply(a2a.NewStatusUpdateEvent(own, a2a.TaskStateCompleted, nil))
	if got := d.Record().State; got != a2a.TaskStateCompleted {
		t.Errorf("after its own task's end: %s", got)
	}
}

// TestApply_LaggingStreamRepeatsNothing applies the agent's task, read
// while the stream lagged (as a silent stream's probe reads it), and then
// the stream's older statuses: the progress the task already showed is
// not logged again, and a newer status still is.
func TestApply_LaggingStreamRepeatsNothing(t *testing.T) {
	t.Parallel()
	d, rec := workingOnAHangingAgent(t)
	info := a2a.TaskInfo{TaskID: rec.Downstream.TaskID, ContextID: rec.Downstream.ContextID}
	start := time.Now()
	tick := func(n int) *a2a.TaskStatusUpdateEvent {
		ev := a2a.NewStatusUpdateEvent(info, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, info, a2a.NewTextPart(fmt.Sprintf("tick %d", n))))
		at := start.Add(time.Duration(n) * time.Second)
		ev.Status.Timestamp = &at
		return ev
	}
	ticks := []*a2a.TaskStatusUpdateEvent{tick(1), tick(2), tick(3), tick(4)}
	d.apply(ticks[0])
	// The task as the agent has it after tick 3: ticks 1 and 2 in its
	// history, tick 3 its status.
	task := &a2a.Task{ID: info.TaskID, ContextID: info.ContextID, Status: ticks[2].Status,
		History: []*a2a.Message{ticks[0].Status.Message, ticks[1].Status.Message}}
	d.apply(task)
	before := d.Record().LastEvent
	d.apply(ticks[1]) // the lagging stream catches up
	d.apply(ticks[2])
	if got := d.Record().LastEvent; got != before {
		evs, _, _ := d.engine.Events(t.Context(), d.ID(), 0, 0)
		t.Fatalf("the lagging stream's statuses were logged again: last event %d, was %d: %+v", got, before, evs)
	}
	d.apply(ticks[3])
	if got := d.Record().LastEvent; got != before+1 {
		t.Fatalf("a newer status was not logged: last event %d, want %d", got, before+1)
	}
}

// TestInterrupt_ReadsTheTaskItSeesSubmitted interrupts a polled delegation
// that has not heard yet that its agent took the task up, as when its
// next poll is far off: it reads the task first, and the interrupt goes
// through rather than being refused as not WORKING.
func TestInterrupt_ReadsTheTaskItSeesSubmitted(t *testing.T) {
	t.Parallel()
	f, agent, d := working(t, testagent.Options{Name: "C", Skill: "research", Steering: true}, testagent.Steerable(), Request{Text: "survey", Skill: "research"})
	// Nothing follows the task now, and the delegation reads as it did
	// before its first poll.
	d.stop()
	d.mu.Lock()
	d.rec.State = a2a.TaskStateSubmitted
	d.mu.Unlock()
	if _, err := f.engine.Steer(t.Context(), d.ID(), steering.Interrupt, textMessage("stop")); err != nil {
		t.Fatalf("interrupt of work the agent has taken up: %v", err)
	}
	waitState(t, d, a2a.TaskStateInputRequired)
	if sigs := agent.Signals(); len(sigs) != 1 || sigs[0].Control != steering.Interrupt {
		t.Errorf("the agent took %+v, want the interrupt", sigs)
	}
}
