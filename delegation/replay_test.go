package delegation

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testproxy"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/steering"
)

// TestReplayableSignals_ASteerOutlivesAClosedConnection steers an agent
// behind a proxy that closes each connection when its second POST
// arrives, unanswered, as a server closing a kept-alive connection under
// a request does: every steer reaches the agent once, in order, each
// sent again on a new connection when its own was closed. Without the
// Idempotency-Key, net/http does not send a POST again, and the second
// steer fails with EOF.
func TestReplayableSignals_ASteerOutlivesAClosedConnection(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	proxy := closingProxy(t, strings.TrimPrefix(agent.URL, "http://"))
	f := newFixture(t, Config{Self: "b"})
	f.add(t, "c", proxy)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "survey", Skill: "research"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	for i := range 4 {
		r, err := f.engine.Steer(t.Context(), d.ID(), steering.Steer, textMessage("steer "+strconv.Itoa(i)))
		if err != nil {
			t.Fatalf("steer %d: %v", i, err)
		}
		if r.Seq != int64(i+1) || r.Duplicate {
			t.Errorf("steer %d: receipt %+v; want seq %d, not a duplicate", i, r, i+1)
		}
	}
	var took []string
	for _, s := range agent.TookSignals(t, 4) { // a receipt comes as the signal is queued
		took = append(took, testagent.Text(s.Message))
	}
	if want := []string{"steer 0", "steer 1", "steer 2", "steer 3"}; strings.Join(took, ",") != strings.Join(want, ",") {
		t.Errorf("the agent took %q; want %q, once each", took, want)
	}
}

// TestReplayable_ReadsAndCancelsOutliveAClosedConnection reads and then
// cancels the task of an agent that does not stream, behind the proxy
// that closes each connection at its second POST: each read, and the
// cancel, is sent again on a new connection. Without the Idempotency-Key
// the first read, the second POST on the send's connection, fails with
// EOF.
func TestReplayable_ReadsAndCancelsOutliveAClosedConnection(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "C", Skill: "research"}, testagent.Hang())
	proxy := closingProxy(t, strings.TrimPrefix(agent.URL, "http://"))
	f := newFixture(t, Config{Self: "b", PollInterval: time.Hour}) // no poll meanwhile
	f.add(t, "c", proxy)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "survey", Skill: "research"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := d.getTask(t.Context(), d.Record().Downstream.TaskID); err != nil {
			t.Fatalf("read %d of the task: %v", i, err)
		}
	}
	rec, err := f.engine.Cancel(t.Context(), d.ID())
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if rec.State != a2a.TaskStateCanceled {
		t.Errorf("the delegation is %s after the cancel; want CANCELED", rec.State)
	}
}

// TestStaleConnResend_ANewMessageOutlivesAClosedConnection delegates
// twice to an agent behind a proxy that closes each connection when its
// second POST arrives, unanswered, as a server closing a kept-alive
// connection on its idle timeout does: the second message goes out on
// the first's kept connection and is sent again on a new one, and the
// agent takes each message once. The same holds for streamed messages,
// whose connections OwnStreamConns keeps. Without staleConnResend, the
// second delegation fails with EOF.
func TestStaleConnResend_ANewMessageOutlivesAClosedConnection(t *testing.T) {
	t.Parallel()
	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("streaming=%v", streaming), func(t *testing.T) {
			t.Parallel()
			agent := testagent.Start(t, testagent.Options{Name: "C", Skill: "research", Streaming: streaming}, testagent.Reply("done"))
			proxy := testproxy.NewClosing(t, strings.TrimPrefix(agent.URL, "http://"), 2)
			f := newFixture(t, Config{Self: "b"})
			f.add(t, "c", proxy.URL)
			for i := range 2 {
				d, err := f.engine.Delegate(t.Context(), Request{Text: "survey " + strconv.Itoa(i), Skill: "research"})
				if err != nil {
					t.Fatalf("delegation %d: %v", i, err)
				}
				if rec := d.Record(); rec.State != a2a.TaskStateCompleted {
					t.Fatalf("delegation %d is %s (%q); want COMPLETED", i, rec.State, rec.Error)
				}
				if streaming && i == 0 {
					// The stream's reader lets its connection go once it has
					// read the stream's end, after the delegation ended.
					own := f.engine.cfg.HTTPClient.Transport.(*ownStreams)
					testwait.Until(t, 5*time.Second, "the stream's connection kept", func() bool {
						own.mu.Lock()
						defer own.mu.Unlock()
						return len(own.idle) == 1
					})
				}
			}
			var took []string
			for _, m := range agent.Messages() {
				took = append(took, testagent.Text(m))
			}
			if diff := cmp.Diff([]string{"survey 0", "survey 1"}, took); diff != "" {
				t.Errorf("the agent took (-want +got):\n%s", diff)
			}
			if n := proxy.Posted(); n != 3 {
				t.Errorf("%d POSTs reached the proxy; want 3 (the second message twice)", n)
			}
		})
	}
}

// TestStaleConnResend_NotOnANewConnection sends a message through a
// proxy that closes every connection when its first POST arrives: a new
// connection closed under a request is the server's answer to it, not
// a stale connection, and the message is not sent again.
func TestStaleConnResend_NotOnANewConnection(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "C", Skill: "research"}, testagent.Reply("done"))
	proxy := testproxy.NewClosing(t, strings.TrimPrefix(agent.URL, "http://"), 1)
	f := newFixture(t, Config{Self: "b"})
	f.add(t, "c", proxy.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "survey", Skill: "research"})
	if err == nil && d.Record().State == a2a.TaskStateCompleted {
		t.Fatalf("the delegation completed through a proxy that answers nothing")
	}
	if n := proxy.Posted(); n != 1 {
		t.Errorf("%d POSTs reached the proxy; want 1, not sent again", n)
	}
}

// closingProxy relays HTTP requests to the server at target, closing a
// connection when its second POST arrives, unanswered, and returns its
// base URL (testproxy.Closing).
func closingProxy(t *testing.T, target string) string {
	t.Helper()
	return testproxy.NewClosing(t, target, 2).URL
}
