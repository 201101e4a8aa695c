package delegation

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/steering"
)

// ordered is a non-streaming agent's work whose status messages have
// fixed ids: WORKING ("working"), an artifact, then COMPLETED ("done"),
// or with ask INPUT_REQUIRED ("ask"), a further message then bringing the
// artifact and COMPLETED. Before WORKING it waits for start, and after
// the artifact for release, when they are set.
type ordered struct {
	ask            bool
	start, release <-chan struct{}
}

func (o ordered) do(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
	msg := func(id, text string) *a2a.Message {
		m := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))
		m.ID = id
		return m
	}
	wait := func(c <-chan struct{}) bool {
		if c == nil {
			return true
		}
		select {
		case <-c:
			return true
		case <-ctx.Done():
			return false
		}
	}
	art := a2a.NewArtifactEvent(ec, a2a.NewTextPart("result"))
	art.Artifact.ID, art.LastChunk = "art", true
	if ec.StoredTask != nil { // the answer to the question
		if yield(art, nil) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, msg("done", "done")), nil)
		}
		return
	}
	if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
		return
	}
	if o.ask {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, msg("ask", "which year?")), nil)
		return
	}
	if !wait(o.start) || !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, msg("working", "working")), nil) {
		return
	}
	if !yield(art, nil) || !wait(o.release) {
		return
	}
	yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, msg("done", "done")), nil)
}

// eventTrace is a delegation's events as kind:state:message id, or
// kind:artifact id.
func eventTrace(evs []Event) []string {
	var out []string
	for _, ev := range evs {
		s := ev.Kind + ":" + string(ev.State)
		switch {
		case ev.Artifact != nil:
			s = ev.Kind + ":" + string(ev.Artifact.ID)
		case ev.Message != nil && ev.Message.Role == a2a.MessageRoleUser:
			s += ":input"
		case ev.Message != nil:
			s += ":" + ev.Message.ID
		}
		out = append(out, s)
	}
	return out
}

// TestOrder_TaskReadWholeKeepsTheStreamOrder delegates to real agents that
// do not stream, so orchd learns each task by reading it whole (as it does
// after a push notification too), and checks that the delegation's events
// are those a stream brings, in its order, however the reads fall: the
// WORKING status message (found in the history when the read comes after
// it), then the artifact, then COMPLETED. Through orchd the WORKING
// message was missing from the caller's task history, and the artifact
// event came before WORKING, when the read saw the task past them.
func TestOrder_TaskReadWholeKeepsTheStreamOrder(t *testing.T) {
	t.Parallel()
	streamed := []string{"state:TASK_STATE_WORKING:working", "artifact:art", "state:TASK_STATE_COMPLETED:done"}
	for _, tc := range []struct {
		name string
		// gate says where the agent waits: before WORKING (so a read
		// finds the task SUBMITTED, then, likely, COMPLETED) or after the
		// artifact (a read finds it WORKING with the artifact).
		gate string
	}{
		{"read at any time", ""},
		{"read after the end", "start"},
		{"read while working, with the artifact", "release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			gate := make(chan struct{})
			w := ordered{}
			switch tc.gate {
			case "start":
				w.start = gate
			case "release":
				w.release = gate
			}
			agent := testagent.Start(t, testagent.Options{Name: "Batch", Skill: "batch"}, w.do)
			f := newFixture(t, Config{PollInterval: 500 * time.Millisecond})
			f.add(t, "batch", agent.URL)
			d, err := f.engine.Delegate(t.Context(), Request{Text: "crunch", Skill: "batch"})
			if err != nil {
				t.Fatal(err)
			}
			switch tc.gate {
			case "start":
				agent.WaitCalls(t, "GetTask", 1) // a read found it SUBMITTED
				close(gate)
			case "release":
				waitRecord(t, d, "artifact", func(r Record) bool { return len(r.Artifacts) > 0 })
				close(gate)
			}
			waitState(t, d, a2a.TaskStateCompleted)
			evs, _, _ := d.Events(0)
			if got := eventTrace(evs); !slices.Equal(got, streamed) {
				t.Errorf("events %q, want %q", got, streamed)
			}
		})
	}
}

// TestOrder_AnswerAfterInputBringsNoOldStatus checks that a task read
// whole after the caller's input does not bring back the question it
// answered: a2a-go moves the INPUT_REQUIRED status message into the
// history after the input, where it must not pass for a status missed.
func TestOrder_AnswerAfterInputBringsNoOldStatus(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Asker", Skill: "ask"}, ordered{ask: true}.do)
	f := newFixture(t, Config{PollInterval: 500 * time.Millisecond})
	f.add(t, "asker", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "plan", Skill: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateInputRequired)
	if _, err := f.engine.Send(t.Context(), d.ID(), a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("2026"))); err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateCompleted)
	evs, _, _ := d.Events(0)
	want := []string{"state:TASK_STATE_INPUT_REQUIRED:ask", "message:TASK_STATE_WORKING:input", "artifact:art", "state:TASK_STATE_COMPLETED:done"}
	if got := eventTrace(evs); !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestMissedStatuses_SignalsAreNoInput reads a task whose history holds a
// status message the delegation did not see, then a message of the
// caller's: a steer or an interrupt, which orchd sends while the task
// works, leaves the status message missed (a polled delegation steered
// before its poll lost it); an input, which orchd sends only once it saw
// the task wait, does not.
func TestMissedStatuses_SignalsAreNoInput(t *testing.T) {
	t.Parallel()
	agentSays := func(id string) *a2a.Message {
		m := a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart(id))
		m.ID = id
		return m
	}
	callerSays := func(control string) *a2a.Message {
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go on"))
		if control != "" {
			m.Metadata = map[string]any{steering.ControlKey: control}
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		after *a2a.Message
		want  []string
	}{
		{"steer", callerSays(string(steering.Steer)), []string{"tick 1"}},
		{"interrupt", callerSays(string(steering.Interrupt)), []string{"tick 1"}},
		{"input", callerSays(""), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			task := &a2a.Task{
				History: []*a2a.Message{callerSays(""), agentSays("tick 1"), tc.after},
				Status:  a2a.TaskStatus{State: a2a.TaskStateWorking, Message: agentSays("tick 2")},
			}
			d := &Delegation{rec: Record{State: a2a.TaskStateWorking}}
			var got []string
			for _, m := range d.missedStatusesLocked(task) {
				got = append(got, m.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("missed %q, want %q", got, tc.want)
			}
		})
	}
}
