package delegation

import (
	"context"
	"errors"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// TestDeadline_EndsTheDelegation checks that a deadline is enforced while
// the delegation runs, for streamed and polled agents, working or waiting
// for input: the downstream task is canceled and the delegation ends
// FAILED saying so.
func TestDeadline_EndsTheDelegation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		streaming bool
		do        testagent.Behaviour
		state     a2a.TaskState
	}{
		{"streamed working", true, testagent.Hang(), a2a.TaskStateWorking},
		{"polled working", false, testagent.Hang(), a2a.TaskStateWorking},
		{"streamed input required", true, testagent.Ask(), a2a.TaskStateInputRequired},
		{"polled input required", false, testagent.Ask(), a2a.TaskStateInputRequired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			agent := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: tt.streaming}, tt.do)
			f := newFixture(t, Config{})
			f.add(t, "slow", agent.URL)
			deadline := time.Now().Add(800 * time.Millisecond)
			d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow", Deadline: deadline})
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, d, tt.state)
			r := waitState(t, d, a2a.TaskStateFailed)
			late := time.Since(deadline)
			want := "deadline " + stamp(deadline) + " passed while agent slow was " + shortState(tt.state) + "; canceled downstream"
			if r.Error != want {
				t.Errorf("error = %q, want %q", r.Error, want)
			}
			if !strings.HasSuffix(stamp(deadline), "Z") {
				t.Errorf("deadline written as %q, want UTC", stamp(deadline))
			}
			if agent.Cancels() != 1 {
				t.Errorf("agent saw %d cancels, want 1", agent.Cancels())
			}
			if late > 2*time.Second {
				t.Errorf("FAILED %s after the deadline", late)
			}
			evs, _, ended := d.Events(0)
			if !ended {
				t.Error("the delegation's events have not ended")
			}
			type end struct {
				State a2a.TaskState
				Error string
			}
			if last := evs[len(evs)-1]; last.State != a2a.TaskStateFailed || last.Error != want {
				t.Errorf("last event (-want +got):\n%s", cmp.Diff(end{a2a.TaskStateFailed, want}, end{last.State, last.Error}))
			}
			if _, err := f.engine.Cancel(t.Context(), d.ID()); !errors.Is(err, ErrEnded) {
				t.Errorf("cancel after the deadline: err = %v", err)
			}
		})
	}
}

// TestDeadline_InheritedFromTheChain checks that the deadline of an
// incoming chain is enforced as the delegation's own.
func TestDeadline_InheritedFromTheChain(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true, Extensions: chainReader}, testagent.Hang())
	f := newFixture(t, Config{Self: "b"})
	f.add(t, "slow", agent.URL)
	deadline := time.Now().Add(500 * time.Millisecond)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Chain: &Chain{Path: []string{"a"}, Depth: 1, MaxDepth: 4, Skill: "slow", Deadline: deadline}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitState(t, d, a2a.TaskStateFailed)
	if !strings.HasPrefix(r.Error, "deadline "+stamp(deadline)+" passed while agent slow was WORKING") {
		t.Errorf("error = %q", r.Error)
	}
}

// TestDeadline_MaxDurationCapsAndTravels checks delegation.maxDuration: a
// delegation without a deadline gets start + maxDuration, a later deadline
// is capped, an earlier one is kept, and the deadline sent down the chain
// is the capped one.
func TestDeadline_MaxDurationCapsAndTravels(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true, Extensions: chainReader}, testagent.Hang())
	f := newFixture(t, Config{MaxDuration: 500 * time.Millisecond})
	f.add(t, "slow", agent.URL)
	tests := []struct {
		name     string
		deadline time.Duration // from now; 0 for none
		want     time.Duration // the deadline sent, from now
	}{
		{"no deadline", 0, 500 * time.Millisecond},
		{"a later deadline", time.Hour, 500 * time.Millisecond},
		{"an earlier deadline", 250 * time.Millisecond, 250 * time.Millisecond},
	}
	for i, tt := range tests {
		before := time.Now()
		req := Request{Text: "x", Skill: "slow"}
		if tt.deadline > 0 {
			req.Deadline = before.Add(tt.deadline)
		}
		d, err := f.engine.Delegate(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		chain, _, err := ChainFrom(agent.Messages()[i].Metadata)
		if err != nil {
			t.Fatalf("%s: chain sent: %v", tt.name, err)
		}
		if chain.Deadline.Before(before.Add(tt.want)) || chain.Deadline.After(after.Add(tt.want)) {
			t.Errorf("%s: deadline sent %v, want %v from now", tt.name, chain.Deadline, tt.want)
		}
		if r := d.Record(); !r.Chain.Deadline.Equal(chain.Deadline) {
			t.Errorf("%s: record's chain deadline %v, sent %v", tt.name, r.Chain.Deadline, chain.Deadline)
		}
		r := waitState(t, d, a2a.TaskStateFailed)
		if !strings.HasPrefix(r.Error, "deadline "+stamp(chain.Deadline)+" passed") {
			t.Errorf("%s: error = %q", tt.name, r.Error)
		}
	}
}

// TestDeadline_ReleasesGoroutines expires delegations to streamed and
// polled agents that never finish and checks that nothing orchd started
// for them is left running while the engine goes on.
func TestDeadline_ReleasesGoroutines(t *testing.T) {
	streamed := testagent.Start(t, testagent.Options{Name: "Streamed", Skill: "slow", Streaming: true}, testagent.Hang())
	polled := testagent.Start(t, testagent.Options{Name: "Polled", Skill: "slow"}, testagent.Hang())
	transport, err := registry.NewTransport(registry.Config{AllowNetworks: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Config{HTTPClient: &http.Client{Transport: transport}})
	f.add(t, "streamed", streamed.URL)
	f.add(t, "polled", polled.URL)
	t.Cleanup(transport.CloseIdleConnections)

	baseline := goleak.IgnoreCurrent()
	before := runtime.NumGoroutine()
	const n = 20
	var ds []*Delegation
	for i := range n {
		agent := "streamed"
		if i%2 == 1 {
			agent = "polled"
		}
		d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Agent: agent, Deadline: time.Now().Add(500 * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		ds = append(ds, d)
	}
	running := runtime.NumGoroutine()
	for _, d := range ds {
		waitState(t, d, a2a.TaskStateFailed)
	}
	transport.CloseIdleConnections()
	// The engine keeps a few goroutines for the deep work of streamed
	// events until it closes (Engine.stacks): its, not the delegations'.
	kept := goleak.IgnoreAnyFunction("github.com/orchd/orchd/internal/ownstack.(*Workers).work")
	if err := goleak.Find(baseline, kept); err != nil {
		t.Errorf("goroutines left after %d expired delegations: %v", n, err)
	}
	t.Logf("goroutines: %d before, %d with %d delegations in flight, %d after they expired", before, running, n, runtime.NumGoroutine())
	if got := streamed.Cancels() + polled.Cancels(); got != n {
		t.Errorf("agents saw %d cancels, want %d", got, n)
	}
}

// TestSilence_StreamThatStopsAnsweringFails checks that an agent whose
// stream goes silent and which then answers no GetTask fails the
// delegation, naming it.
func TestSilence_StreamThatStopsAnsweringFails(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Stuck", Skill: "s", Streaming: true}, testagent.Hang())
	f := newFixture(t, Config{SilenceTimeout: 100 * time.Millisecond, CallTimeout: 100 * time.Millisecond})
	f.add(t, "stuck", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "s"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	agent.Freeze()
	r := waitState(t, d, a2a.TaskStateFailed)
	if !strings.HasPrefix(r.Error, "hop stuck: agent went silent: no stream event for 100ms, then 5 GetTask calls in a row failed") {
		t.Errorf("error = %q", r.Error)
	}
	if n := countCalls(agent.Calls(), "GetTask"); n != 5 {
		t.Errorf("agent got %d GetTask calls, want 5", n)
	}
}

// TestSilence_QuietAgentThatAnswersIsAlive checks that an agent streaming
// nothing for a long time but answering GetTask keeps its delegation.
func TestSilence_QuietAgentThatAnswersIsAlive(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Quiet", Skill: "s", Streaming: true}, testagent.Hang())
	f := newFixture(t, Config{SilenceTimeout: 30 * time.Millisecond})
	f.add(t, "quiet", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "s"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	agent.WaitCalls(t, "GetTask", 4)
	if r := d.Record(); r.State != a2a.TaskStateWorking {
		t.Fatalf("a quiet agent that answers was given up: %s (%s)", r.State, r.Error)
	}
	r, err := f.engine.Cancel(t.Context(), d.ID())
	if err != nil || r.State != a2a.TaskStateCanceled {
		t.Errorf("cancel: %v, state %s (%s)", err, r.State, r.Error)
	}
}

// TestSilence_PolledAgentThatStopsAnsweringFails checks that polls that
// hang count as failed polls, each bounded by CallTimeout.
func TestSilence_PolledAgentThatStopsAnsweringFails(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Stuck", Skill: "s"}, testagent.Hang())
	f := newFixture(t, Config{CallTimeout: 100 * time.Millisecond, SilenceTimeout: 300 * time.Millisecond})
	f.add(t, "stuck", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "s"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	agent.Freeze()
	start := time.Now()
	r := waitState(t, d, a2a.TaskStateFailed)
	if !strings.HasPrefix(r.Error, "hop stuck: lost track of task") {
		t.Errorf("error = %q", r.Error)
	}
	if took := time.Since(start); took < 300*time.Millisecond || took > 3*time.Second {
		t.Errorf("hung polls were given up after %s, want silenceTimeout (300ms) and five polls", took)
	}
}

// TestCallTimeout_BoundsTheFirstAnswer checks that an agent that takes the
// request and never answers is given up after CallTimeout, whether orchd
// streams to it or not.
func TestCallTimeout_BoundsTheFirstAnswer(t *testing.T) {
	t.Parallel()
	for _, streaming := range []bool{true, false} {
		agent := testagent.Start(t, testagent.Options{Name: "Mute", Skill: "s", Streaming: streaming}, testagent.Reply("never sent"))
		f := newFixture(t, Config{CallTimeout: 200 * time.Millisecond})
		f.add(t, "mute", agent.URL)
		agent.Freeze()
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		start := time.Now()
		_, err := f.engine.Delegate(ctx, Request{Text: "x", Skill: "s"})
		took := time.Since(start)
		cancel()
		var failed *FailedError
		if !errors.As(err, &failed) || !strings.Contains(err.Error(), "mute: agent mute did not answer within callTimeout (200ms)") {
			t.Errorf("streaming %v: err = %v", streaming, err)
		}
		if took > 3*time.Second {
			t.Errorf("streaming %v: gave up after %s, want about 200ms", streaming, took)
		}
	}
}

func countCalls(calls []string, method string) int {
	n := 0
	for _, c := range calls {
		if c == method {
			n++
		}
	}
	return n
}

// TestSilence_LateAnswerDoesNotUndoTheStream checks that a GetTask the
// silence probe sent, answered after the stream spoke again, is not
// applied over the stream's newer events: the stream is alive, and the
// answer says how the task stood before.
func TestSilence_LateAnswerDoesNotUndoTheStream(t *testing.T) {
	t.Parallel()
	more := make(chan struct{})
	status := func(ec *a2asrv.ExecutorContext, text string) a2a.Event {
		return a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text)))
	}
	agent := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "s", Streaming: true},
		func(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !yield(status(ec, "one"), nil) {
				return
			}
			select {
			case <-more:
			case <-ctx.Done():
				return
			}
			if yield(status(ec, "two"), nil) {
				<-ctx.Done()
			}
		})
	release := agent.Hold("GetTask")
	defer release()
	f := newFixture(t, Config{SilenceTimeout: 200 * time.Millisecond})
	f.add(t, "slow", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "s"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, d, "one")
	agent.WaitCalls(t, "GetTask", 1) // its answer says "one"
	close(more)
	waitStatus(t, d, "two")
	release()
	agent.WaitCalls(t, "GetTask", 3) // the next probes went by
	evs, _, _ := d.Events(0)
	var said []string
	for _, ev := range evs {
		if ev.Kind == "state" && ev.Message != nil {
			said = append(said, testagent.Text(ev.Message))
		}
	}
	if !slices.Equal(said, []string{"one", "two"}) {
		t.Errorf("status messages %q, want one then two", said)
	}
	if r, err := f.engine.Cancel(t.Context(), d.ID()); err != nil || r.State != a2a.TaskStateCanceled {
		t.Errorf("cancel: %v, state %s (%s)", err, r.State, r.Error)
	}
}

// waitStatus waits until the delegation's latest event carries a status
// message with text.
func waitStatus(t *testing.T, d *Delegation, text string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		evs, changed, _ := d.Events(0)
		if n := len(evs); n > 0 && evs[n-1].Message != nil && testagent.Text(evs[n-1].Message) == text {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("no status %q; events %+v", text, evs)
		}
	}
}

// TestDeadline_UnansweredCancelCountsAgainstTheAgent checks that an agent
// that does not answer the cancel sent at the deadline within cancelWait
// has that counted against it, as a cancel the caller asked for is.
func TestDeadline_UnansweredCancelCountsAgainstTheAgent(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Stuck", Skill: "s", Streaming: true}, testagent.Hang())
	f := newFixtureWith(t, registry.Config{BreakerMinBackoff: time.Hour}, Config{CancelWait: 100 * time.Millisecond})
	f.add(t, "stuck", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "s", Deadline: time.Now().Add(300 * time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	agent.Freeze()
	r := waitState(t, d, a2a.TaskStateFailed)
	if !strings.HasSuffix(r.Error, "the cancel sent downstream was not answered within cancelWait (100ms)") {
		t.Errorf("error = %q", r.Error)
	}
	if a, _ := f.reg.Get("stuck"); a.Breaker.Failures != 1 || !strings.Contains(a.Breaker.LastError, "deadline exceeded") {
		t.Errorf("breaker %+v, want the unanswered cancel counted", a.Breaker)
	}
}

// TestDeadline_EndsASteerInFlight checks that a steer the agent does not
// answer does not hold the delegation past its deadline: the steer gives
// up at the deadline, saying so, and the delegation ends FAILED then.
func TestDeadline_EndsASteerInFlight(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "C", Skill: "s", Streaming: true, Steering: true}, testagent.Steerable())
	f := newFixture(t, Config{CallTimeout: 10 * time.Second, CancelWait: 100 * time.Millisecond})
	f.add(t, "c", agent.URL)
	deadline := time.Now().Add(400 * time.Millisecond)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "s", Deadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	agent.Freeze()
	_, err = f.engine.Steer(t.Context(), d.ID(), steering.Steer, textMessage("narrow it"))
	if took := time.Since(deadline); !errors.Is(err, ErrDeadline) || took > 2*time.Second {
		t.Errorf("steer returned %s after the deadline: %v, want ErrDeadline at the deadline", took, err)
	}
	r := waitState(t, d, a2a.TaskStateFailed)
	if late := time.Since(deadline); late > 2*time.Second {
		t.Errorf("FAILED %s after the deadline", late)
	}
	if !strings.HasPrefix(r.Error, "deadline "+stamp(deadline)+" passed while agent c was WORKING") {
		t.Errorf("error = %q", r.Error)
	}
	if a, _ := f.reg.Get("c"); a.Breaker.Failures != 1 {
		t.Errorf("breaker %+v, want only the unanswered cancel counted, not the steer the deadline cut short", a.Breaker)
	}
}

// TestDeadline_AHopThatEndsTheWorkFirst checks that a hop below that ends
// the work FAILED once the chain's deadline has passed, before this hop's
// own timer fires (every hop keeps the same deadline; whichever is
// quicker says so first), is reported as the deadline, naming the hop's
// own words too.
func TestDeadline_AHopThatEndsTheWorkFirst(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	agent := testagent.Start(t, testagent.Options{Name: "B", Skill: "slow", Streaming: true},
		func(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
				return
			}
			select {
			case <-release:
			case <-ctx.Done():
				return
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateFailed, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("deadline passed below"))), nil)
		})
	var skew atomic.Int64
	f := newFixture(t, Config{Now: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	f.add(t, "b", agent.URL)
	deadline := time.Now().Add(time.Hour)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow", Deadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	skew.Store(int64(2 * time.Hour)) // the deadline has passed; this hop's timer has not fired
	close(release)
	r := waitState(t, d, a2a.TaskStateFailed)
	if want := "deadline " + stamp(deadline) + " passed while agent b was WORKING; hop b (task "; !strings.HasPrefix(r.Error, want) || !strings.HasSuffix(r.Error, "ended TASK_STATE_FAILED: deadline passed below") {
		t.Errorf("error = %q, want it to start %q", r.Error, want)
	}
}
