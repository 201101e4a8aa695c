package delegation

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/internal/testagent"
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
	for _, s := range agent.Signals() {
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

// closingProxy relays HTTP requests to the server at target and returns
// its own base URL. The agent card it relays names the proxy instead of
// target. It closes a connection when the second POST on it arrives,
// without answering it.
func closingProxy(t *testing.T, target string) string {
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
				if posts++; posts == 2 {
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
