package delegation

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/policies"
)

func TestDelegate_StreamingAgent(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true, Extensions: chainReader}, testagent.Work(20*time.Millisecond))
	f := newFixture(t, Config{Self: "root"})
	f.add(t, "worker", agent.URL)

	d, err := f.engine.Delegate(t.Context(), Request{Text: "find papers", Skill: "research", Requires: []string{"streaming"}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitState(t, d, a2a.TaskStateCompleted)
	if r.Downstream.TaskID == "" {
		t.Errorf("no downstream task: %+v", r.Downstream)
	}
	if r.Result == nil {
		t.Fatalf("no result: %+v", r)
	}
	type outcome struct{ Agent, Chosen, Result string }
	got := outcome{Agent: r.Downstream.Agent, Chosen: r.Decision.Chosen, Result: messageText(r.Result)}
	if diff := cmp.Diff(outcome{Agent: "worker", Chosen: "worker", Result: "done"}, got); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	if len(r.Artifacts) != 1 || len(r.Artifacts[0].Parts) != 2 {
		t.Fatalf("artifacts = %+v", r.Artifacts)
	}
	evs, _, ended := d.Events(0)
	var kinds []string
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Errorf("event %d has seq %d", i, ev.Seq)
		}
		kinds = append(kinds, ev.Kind+":"+string(ev.State))
	}
	if !ended {
		t.Errorf("the events have not ended: %v", kinds)
	}
	if !slices.Contains(kinds, "artifact:TASK_STATE_WORKING") {
		t.Errorf("no artifact while working in the events %v", kinds)
	}
	if last := kinds[len(kinds)-1]; last != "state:TASK_STATE_COMPLETED" {
		t.Errorf("last event %s, want state:TASK_STATE_COMPLETED; events %v", last, kinds)
	}
	if calls := agent.Calls(); len(calls) != 1 || calls[0] != "SendStreamingMessage" {
		t.Errorf("calls = %v", calls)
	}
	// The work carried the chain context.
	msgs := agent.Messages()
	chain, ok, err := ChainFrom(msgs[0].Metadata)
	if err != nil || !ok {
		t.Fatalf("chain sent %v, err %v", ok, err)
	}
	want := Chain{Path: []string{"root"}, Depth: 1, MaxDepth: DefaultMaxDepth, Skill: "research", Requires: []string{"streaming"}, RootTask: r.ID}
	if diff := cmp.Diff(want, chain, cmpopts.IgnoreFields(Chain{}, "Names", "Deadline", "Verified", "OnBehalfOf")); diff != "" {
		t.Errorf("chain (-want +got):\n%s", diff)
	}
	stored, err := f.engine.Lookup(t.Context(), r.ID)
	if err != nil || stored.State != a2a.TaskStateCompleted {
		t.Errorf("stored record = %+v, %v", stored, err)
	}
}

func TestDelegate_NeverStreamsToNonStreamingAgent(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Poller", Skill: "batch"}, testagent.Work(30*time.Millisecond))
	f := newFixture(t, Config{})
	f.add(t, "poller", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "crunch", Skill: "batch"})
	if err != nil {
		t.Fatal(err)
	}
	r := waitState(t, d, a2a.TaskStateCompleted)
	if len(r.Artifacts) != 1 || messageText(r.Result) != "done" {
		t.Errorf("record = %+v", r)
	}
	calls := agent.Calls()
	if slices.Contains(calls, "SendStreamingMessage") {
		t.Errorf("calls = %v: streamed to an agent that does not stream", calls)
	}
	if len(calls) < 2 || calls[0] != "SendMessage" || calls[len(calls)-1] != "GetTask" {
		t.Errorf("calls = %v; want SendMessage then GetTask polls", calls)
	}
}

func TestDelegate_MessageReplyCompletes(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Echo", Skill: "echo", Streaming: true}, testagent.Reply("hello back"))
	f := newFixture(t, Config{})
	f.add(t, "echo", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Message: &a2a.Message{Parts: a2a.ContentParts{a2a.NewTextPart("hello")}}, Agent: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	r := waitState(t, d, a2a.TaskStateCompleted)
	if r.Downstream.TaskID != "" || messageText(r.Result) != "hello back" {
		t.Errorf("record = %+v", r)
	}
}

func TestDelegate_Refusals(t *testing.T) {
	t.Parallel()
	future := testagent.Start(t, testagent.Options{Name: "Future", Skill: "s", Version: "2.0"}, testagent.Reply("x"))
	plain := testagent.Start(t, testagent.Options{Name: "Plain", Skill: "s"}, testagent.Reply("x"))
	streamer := testagent.Start(t, testagent.Options{Name: "Streamer", Skill: "s", Streaming: true}, testagent.Reply("x"))
	dir := t.TempDir()
	policy := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(policy, []byte("policy: no-streamer\ndefault: allow\nrules:\n  - name: no-streamer\n    deny: agent.id == \"streamer\"\n    reason: streamer is on leave\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Config{}, policy)
	f.add(t, "future", future.URL)
	f.add(t, "plain", plain.URL)
	f.add(t, "streamer", streamer.URL)

	_, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "s", Requires: []string{"streaming"}})
	var refused *RefusedError
	if !errors.As(err, &refused) {
		t.Fatalf("err = %v, want *RefusedError", err)
	}
	want := map[string]string{
		"future":   "protocol: speaks only 2.0 over JSONRPC",
		"plain":    "lacks required capability streaming",
		"streamer": "streamer is on leave",
	}
	for _, c := range refused.Decision.Candidates {
		if c.Allowed || !strings.Contains(strings.Join(c.Reasons, "; "), want[c.Agent]) {
			t.Errorf("%s: allowed %v, reasons %q; want %q", c.Agent, c.Allowed, c.Reasons, want[c.Agent])
		}
	}
	if len(refused.Decision.Candidates) != 3 || !strings.Contains(err.Error(), "streamer: streamer is on leave") {
		t.Errorf("err = %v", err)
	}
	for _, a := range []*testagent.Agent{future, plain, streamer} {
		if len(a.Calls()) != 0 {
			t.Errorf("%s was called although the delegation was refused: %v", a.URL, a.Calls())
		}
	}

	if _, err := f.engine.Delegate(t.Context(), Request{Text: "x", Agent: "nobody"}); !errors.Is(err, ErrUnknownAgent) {
		t.Errorf("unknown pinned agent: err = %v", err)
	}
	bad := []Request{{}, {Text: "x", Message: &a2a.Message{Parts: a2a.ContentParts{a2a.NewTextPart("y")}}}, {Text: "x", Requires: []string{""}}, {Text: "x", Protocol: "soon"}}
	for _, r := range bad {
		if _, err := f.engine.Delegate(t.Context(), r); !errors.Is(err, ErrBadRequest) {
			t.Errorf("Delegate(%+v): err = %v, want ErrBadRequest", r, err)
		}
	}
}

func TestDelegate_FailsOverBeforeAcceptance(t *testing.T) {
	t.Parallel()
	broken := testagent.Broken(t, "Broken", "s")
	good := testagent.Start(t, testagent.Options{Name: "Good", Skill: "s"}, testagent.Reply("ok"))
	dir := t.TempDir()
	policy := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(policy, []byte("policy: prefer-broken\ndefault: allow\nrules:\n  - name: r\n    rank: 'agent.id == \"broken\" ? 10 : 0'\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Config{}, policy)
	f.add(t, "broken", broken.URL)
	f.add(t, "good", good.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "s"})
	if err != nil {
		t.Fatal(err)
	}
	r := waitState(t, d, a2a.TaskStateCompleted)
	if r.Decision.Chosen != "good" {
		t.Errorf("chosen %q, want good", r.Decision.Chosen)
	}
	// Each attempt's agent and whether it failed; the failure must name
	// the broken agent's 503.
	type try struct {
		Agent  string
		Failed bool
	}
	var tries []try
	for _, a := range r.Decision.Attempts {
		tries = append(tries, try{a.Agent, a.Error != ""})
	}
	if diff := cmp.Diff([]try{{"broken", true}, {"good", false}}, tries); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	} else if why := r.Decision.Attempts[0].Error; !strings.Contains(why, "503") {
		t.Errorf("the broken agent's attempt failed with %q, want its 503", why)
	}

	// With only the broken agent, the delegation fails with the attempt.
	_, err = f.engine.Delegate(t.Context(), Request{Text: "x", Agent: "broken"})
	var failed *FailedError
	if !errors.As(err, &failed) || !strings.Contains(err.Error(), "broken: unexpected HTTP status: 503") {
		t.Errorf("err = %v", err)
	}
}

func TestDelegate_InputRequiredRoundTrip(t *testing.T) {
	t.Parallel()
	for _, streaming := range []bool{true, false} {
		agent := testagent.Start(t, testagent.Options{Name: "Asker", Skill: "ask", Streaming: streaming}, testagent.Ask())
		f := newFixture(t, Config{})
		f.add(t, "asker", agent.URL)
		d, err := f.engine.Delegate(t.Context(), Request{Text: "history of A2A", Skill: "ask"})
		if err != nil {
			t.Fatal(err)
		}
		r := waitState(t, d, a2a.TaskStateInputRequired)
		if _, err := f.engine.Send(t.Context(), d.ID(), &a2a.Message{Parts: a2a.ContentParts{a2a.NewTextPart("2025")}}); err != nil {
			t.Fatal(err)
		}
		r = waitState(t, d, a2a.TaskStateCompleted)
		if messageText(r.Result) != "answered: 2025" {
			t.Errorf("streaming %v: result = %q", streaming, messageText(r.Result))
		}
		msgs := agent.Messages()
		if len(msgs) != 2 || msgs[1].TaskID != r.Downstream.TaskID {
			t.Errorf("streaming %v: the input did not go to the same task: %+v", streaming, msgs)
		}
		if _, err := f.engine.Send(t.Context(), d.ID(), &a2a.Message{Parts: a2a.ContentParts{a2a.NewTextPart("more")}}); !errors.Is(err, ErrEnded) {
			t.Errorf("input after the end: err = %v", err)
		}
	}
}

func TestDelegate_CancelGoesDownstream(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true}, testagent.Hang())
	f := newFixture(t, Config{})
	f.add(t, "slow", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "take your time", Skill: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	if _, err := f.engine.Send(t.Context(), d.ID(), &a2a.Message{Parts: a2a.ContentParts{a2a.NewTextPart("x")}}); !errors.Is(err, ErrNotWaiting) {
		t.Errorf("input while working: err = %v", err)
	}
	r, err := f.engine.Cancel(t.Context(), d.ID())
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if r.State != a2a.TaskStateCanceled {
		t.Errorf("canceled delegation is %s (%s)", r.State, r.Error)
	}
	if n := agent.Cancels(); n != 1 {
		t.Errorf("agent saw %d cancels, want 1", n)
	}
	if _, err := f.engine.Cancel(t.Context(), d.ID()); !errors.Is(err, ErrEnded) {
		t.Errorf("second cancel: err = %v", err)
	}
}

// TestDelegate_CancelAskedAgainWhileRefused checks a cancel the agent
// refuses as not cancelable, as an a2a-go agent refuses one that meets an
// execution settling, is asked again until the agent cancels the task.
func TestDelegate_CancelAskedAgainWhileRefused(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Busy", Skill: "busy", Streaming: true, RefuseCancels: 2}, testagent.Hang())
	f := newFixture(t, Config{})
	f.add(t, "busy", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "take your time", Skill: "busy"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	start := time.Now()
	r, err := f.engine.Cancel(t.Context(), d.ID())
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if r.State != a2a.TaskStateCanceled {
		t.Errorf("canceled delegation is %s (%s)", r.State, r.Error)
	}
	if n := agent.Cancels(); n != 3 {
		t.Errorf("agent saw %d cancels, want 3", n)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("cancel took %s", took)
	}
}

func TestDelegate_DownstreamFailureNamesTheHop(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Fragile", Skill: "f", Streaming: true}, testagent.Failing("disk full"))
	f := newFixture(t, Config{})
	f.add(t, "fragile", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "f"})
	if err != nil {
		t.Fatal(err)
	}
	r := waitState(t, d, a2a.TaskStateFailed)
	if !strings.HasPrefix(r.Error, "hop fragile (task ") || !strings.HasSuffix(r.Error, "ended TASK_STATE_FAILED: disk full") {
		t.Errorf("error = %q", r.Error)
	}
}

func TestDelegate_ChainRules(t *testing.T) {
	t.Parallel()
	steady := testagent.Start(t, testagent.Options{Name: "Steady", Skill: "s", Steering: true}, testagent.Reply("ok"))
	plain := testagent.Start(t, testagent.Options{Name: "Plain", Skill: "s"}, testagent.Reply("ok"))
	f := newFixture(t, Config{Self: "b"})
	f.add(t, "steady", steady.URL)
	f.add(t, "plain", plain.URL)

	if _, err := f.engine.Delegate(t.Context(), Request{Text: "x", Chain: &Chain{Path: []string{"a", "b"}, Depth: 2, MaxDepth: 5}}); !errors.Is(err, ErrCycle) ||
		!strings.Contains(err.Error(), "a → b → b") {
		t.Errorf("cycle: err = %v", err)
	}
	if _, err := f.engine.Delegate(t.Context(), Request{Text: "x", Chain: &Chain{Path: []string{"a"}, Depth: 2, MaxDepth: 2}}); !errors.Is(err, ErrTooDeep) {
		t.Errorf("depth: err = %v", err)
	}
	// The root required steerable: B must not pick the plain agent.
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Chain: &Chain{Path: []string{"a"}, Depth: 1, MaxDepth: 4, Skill: "s", Requires: []string{"steerable"}, RootTask: "t-1"}})
	if err != nil {
		t.Fatal(err)
	}
	r := waitState(t, d, a2a.TaskStateCompleted)
	if r.Downstream.Agent != "steady" {
		t.Errorf("went to %q, want steady", r.Downstream.Agent)
	}
	want := Chain{Path: []string{"a", "b"}, Depth: 2, MaxDepth: 4, Skill: "s", Requires: []string{"steerable"}, RootTask: "t-1"}
	if diff := cmp.Diff(want, r.Chain, cmpopts.IgnoreFields(Chain{}, "Names", "Deadline", "Verified", "OnBehalfOf")); diff != "" {
		t.Errorf("chain sent on (-want +got):\n%s", diff)
	}
	if len(plain.Calls()) != 0 {
		t.Error("a non-steerable agent was used although the chain requires steerable")
	}
}

func TestDelegate_A2A03Agent(t *testing.T) {
	t.Parallel()
	for _, streaming := range []bool{false, true} {
		agent := testagent.Start(t, testagent.Options{Name: "Legacy", Skill: "old", Version: "0.3", Streaming: streaming}, testagent.Work(5*time.Millisecond))
		f := newFixture(t, Config{})
		f.add(t, "legacy", agent.URL)
		d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "old"})
		if err != nil {
			t.Fatal(err)
		}
		r := waitState(t, d, a2a.TaskStateCompleted)
		if messageText(r.Result) != "done" || len(r.Artifacts) != 1 {
			t.Errorf("streaming %v: record = %+v", streaming, r)
		}
		calls := agent.Calls()
		want := "message/send"
		if streaming {
			want = "message/stream"
		}
		if len(calls) == 0 || calls[0] != want {
			t.Errorf("streaming %v: calls = %v, want %s first (A2A 0.3 methods)", streaming, calls, want)
		}
	}
}

func TestDelegate_DeadlineTravelsAndIsEnforced(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Echo", Skill: "s", Extensions: chainReader}, testagent.Reply("ok"))
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	f := newFixture(t, Config{Now: func() time.Time { return now }})
	f.add(t, "echo", agent.URL)
	deadline := now.Add(time.Minute)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "s", Deadline: deadline})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateCompleted)
	chain, _, _ := ChainFrom(agent.Messages()[0].Metadata)
	if !chain.Deadline.Equal(deadline) {
		t.Errorf("deadline sent = %v, want %v", chain.Deadline, deadline)
	}
	// An inherited deadline that has passed refuses the work; an earlier
	// request deadline wins over a later inherited one.
	if _, err := f.engine.Delegate(t.Context(), Request{Text: "x", Chain: &Chain{Path: []string{"a"}, Depth: 1, Deadline: now.Add(-time.Second)}}); !errors.Is(err, ErrDeadline) {
		t.Errorf("past deadline: err = %v", err)
	}
}

// TestEngine_EndedDelegationTakesOneSlot checks that an ended delegation
// counts once toward KeepFinished, however many paths see it end: a
// cancel, the follower and the silence probe may all report the same end,
// and a delegation counted twice pushed a more recent one out early.
func TestEngine_EndedDelegationTakesOneSlot(t *testing.T) {
	t.Parallel()
	slow := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true}, testagent.Hang())
	quick := testagent.Start(t, testagent.Options{Name: "Quick", Skill: "quick"}, testagent.Reply("done"))
	f := newFixture(t, Config{KeepFinished: 2})
	f.add(t, "slow", slow.URL)
	f.add(t, "quick", quick.URL)

	canceled, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, canceled, a2a.TaskStateWorking)
	if r, err := f.engine.Cancel(t.Context(), canceled.ID()); err != nil || r.State != a2a.TaskStateCanceled {
		t.Fatalf("cancel: %v, %s", err, r.State)
	}
	canceled.settled() // another path seeing the same end
	f.engine.mu.RLock()
	finished := slices.Clone(f.engine.finished)
	f.engine.mu.RUnlock()
	if !slices.Equal(finished, []string{canceled.ID()}) {
		t.Errorf("ended delegations listed %q, want the canceled one once", finished)
	}

	done, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "quick"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, done, a2a.TaskStateCompleted)
	for _, d := range []*Delegation{canceled, done} {
		if _, ok := f.engine.Get(d.ID()); !ok {
			t.Errorf("%s (%s) was forgotten with 2 ended delegations and KeepFinished 2", d.ID(), d.Record().State)
		}
	}
}

// TestSend_AfterCloseSendsNothing checks that input for a waiting
// delegation is refused once the engine is closed: nothing would follow
// the downstream task after it, as Close stopped following.
func TestSend_AfterCloseSendsNothing(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Asker", Skill: "ask"}, testagent.Ask())
	f := newFixture(t, Config{})
	f.add(t, "asker", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "x", Skill: "ask"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateInputRequired)
	f.engine.Close()
	if _, err := f.engine.Send(t.Context(), d.ID(), textMessage("1999")); !errors.Is(err, ErrClosed) {
		t.Errorf("send after close: err = %v, want ErrClosed", err)
	}
	if n := len(agent.Messages()); n != 1 {
		t.Errorf("the agent got %d messages, want only the first", n)
	}
}

// TestDelegate_ChainOnlyToAgentsThatReadIt checks that the chain context
// (whom the work is for among it) goes with the work and with the
// caller's input only to an agent whose card declares the delegation
// extension, and to no other.
func TestDelegate_ChainOnlyToAgentsThatReadIt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		exts  []a2a.AgentExtension
		chain bool
	}{
		{"declares the extension", chainReader, true},
		{"declares none", nil, false},
		{"declares another", []a2a.AgentExtension{{URI: "https://example.com/ext/other/v1"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			agent := testagent.Start(t, testagent.Options{Name: "Asker", Skill: "ask", Extensions: tc.exts}, testagent.Ask())
			f := newFixture(t, Config{Self: "root"})
			f.add(t, "asker", agent.URL)
			d, err := f.engine.Delegate(t.Context(), Request{Text: "which year?", Skill: "ask", Caller: policies.Caller{Principal: "alice", Tenant: "acme"}})
			if err != nil {
				t.Fatal(err)
			}
			waitState(t, d, a2a.TaskStateInputRequired)
			if _, err := f.engine.Send(t.Context(), d.ID(), &a2a.Message{Parts: a2a.ContentParts{a2a.NewTextPart("2025")}}); err != nil {
				t.Fatal(err)
			}
			waitState(t, d, a2a.TaskStateCompleted)
			msgs := agent.Messages()
			if len(msgs) != 2 {
				t.Fatalf("the agent got %d messages, want the work and the input", len(msgs))
			}
			for i, m := range msgs {
				chain, ok, err := ChainFrom(m.Metadata)
				if err != nil || ok != tc.chain {
					t.Errorf("message %d: chain %+v sent = %v (%v), want %v", i, chain, ok, err, tc.chain)
				}
				if !ok {
					continue
				}
				if !slices.Equal(chain.Path, []string{"root"}) {
					t.Errorf("message %d: chain path %q, want [root]", i, chain.Path)
				}
				if chain.OnBehalfOf == nil || chain.OnBehalfOf.ID != "alice" {
					t.Errorf("message %d: on behalf of %+v, want alice", i, chain.OnBehalfOf)
				}
			}
		})
	}
}
