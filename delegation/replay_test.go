package delegation

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/testagent"
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
			posted := new(atomic.Int64)
			proxy := closingProxyAt(t, strings.TrimPrefix(agent.URL, "http://"), 2, posted)
			f := newFixture(t, Config{Self: "b"})
			f.add(t, "c", proxy)
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
			if n := posted.Load(); n != 3 {
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
	posted := new(atomic.Int64)
	proxy := closingProxyAt(t, strings.TrimPrefix(agent.URL, "http://"), 1, posted)
	f := newFixture(t, Config{Self: "b"})
	f.add(t, "c", proxy)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "survey", Skill: "research"})
	if err == nil && d.Record().State == a2a.TaskStateCompleted {
		t.Fatalf("the delegation completed through a proxy that answers nothing")
	}
	if n := posted.Load(); n != 1 {
		t.Errorf("%d POSTs reached the proxy; want 1, not sent again", n)
	}
}

// closingProxy relays HTTP requests to the server at target and returns
// its own base URL. The agent card it relays names the proxy instead of
// target. It closes a connection when the second POST on it arrives,
// without answering it.
func closingProxy(t *testing.T, target string) string {
	t.Helper()
	return closingProxyAt(t, target, 2, new(atomic.Int64))
}

// closingProxyAt is closingProxy closing a connection when its POST
// number closeAt arrives, counting every POST that arrives in posted.
func closingProxyAt(t *testing.T, target string, closeAt int, posted *atomic.Int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	self := ln.Addr().String()
	tr := &http.Transport{}
	// stop ends the relayed requests, an agent's stream among them.
	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		stop()
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		tr.CloseIdleConnections()
	})
	relay := func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for posts := 0; ; {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if req.Method == http.MethodPost {
				posted.Add(1)
				if posts++; posts == closeAt {
					return
				}
			}
			req.URL.Scheme, req.URL.Host, req.RequestURI = "http", target, ""
			resp, err := tr.RoundTrip(req.WithContext(ctx))
			if err != nil {
				return
			}
			if strings.HasSuffix(req.URL.Path, "agent-card.json") {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				b = bytes.ReplaceAll(b, []byte(target), []byte(self))
				resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
				resp.Header.Del("Etag")
			}
			err = resp.Write(c)
			resp.Body.Close()
			if err != nil {
				return
			}
		}
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() { relay(c) })
		}
	})
	return "http://" + self
}
