package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/syncbuf"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// waitOutput waits until buf holds a match of re and returns it.
func waitOutput(t *testing.T, buf *syncbuf.Buffer, re *regexp.Regexp) []string {
	t.Helper()
	var m []string
	testwait.Succeeds(t, 10*time.Second, "output matching "+re.String(), func() error {
		out := buf.String()
		if m = re.FindStringSubmatch(out); m == nil {
			return fmt.Errorf("output is\n%s", out)
		}
		return nil
	})
	return m
}

// TestDelegate_CtrlCLeavesTheWorkRunning stops `orchd delegate` as Ctrl-C
// does, by canceling its context, while a slow agent works: the command
// says the work goes on and how to follow or cancel it, and the
// delegation is still WORKING in the daemon, where `orchd tasks follow`
// finds it again.
func TestDelegate_CtrlCLeavesTheWorkRunning(t *testing.T) {
	t.Parallel()
	slow := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true}, testagent.Hang())
	base := daemon(t, registry.Spec{ID: "slow", URL: slow.URL})

	// interrupted runs a following command until it printed want, then
	// cancels it and returns its exit code and outputs.
	interrupted := func(want *regexp.Regexp, args ...string) (int, string, string) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var out, errOut syncbuf.Buffer
		done := make(chan int, 1)
		go func() { done <- runContext(ctx, args, &out, &errOut) }()
		waitOutput(t, &out, want)
		cancel()
		select {
		case code := <-done:
			return code, out.String(), errOut.String()
		case <-time.After(10 * time.Second):
			t.Fatalf("%v did not stop when canceled:\n%s", args, out.String())
			return 0, "", ""
		}
	}
	working := regexp.MustCompile(`(?m)^\[\d+\] working$`)
	code, out, errOut := interrupted(working, "delegate", "--server", base, "--skill", "slow", "forever")
	m := regexp.MustCompile(`delegation (\S+) → slow`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no decision line:\n%s", out)
	}
	id := m[1]
	want := "orchd: stopped following delegation " + id + "; the work goes on in the daemon. Follow it again with 'orchd tasks follow --server " +
		base + " " + id + "', or cancel it with 'orchd tasks cancel --server " + base + " " + id + "'\n"
	if code != exitFailure || errOut != want {
		t.Errorf("delegate stopped: exit %d, stderr %q; want %d, %q", code, errOut, exitFailure, want)
	}
	code, out, errOut = orchd(t, t.Context(), "tasks", "get", "--server", base, id)
	if code != 0 || !regexp.MustCompile(`(?m)^state +working$`).MatchString(out) {
		t.Errorf("after Ctrl-C: exit %d, want the delegation still working:\n%s%s", code, out, errOut)
	}

	// Following it again shows the decision and its events, and stops
	// the same way.
	code, out, errOut = interrupted(working, "tasks", "follow", "--server", base, id)
	if code != exitFailure || errOut != want {
		t.Errorf("tasks follow stopped: exit %d, stderr %q; want %d and %q", code, errOut, exitFailure, want)
	}
	if !strings.HasPrefix(out, "delegation "+id+" → slow") {
		t.Errorf("tasks follow stopped without the decision first:\n%s", out)
	}
	if code, out, errOut := orchd(t, t.Context(), "tasks", "cancel", "--server", base, id); code != 0 {
		t.Errorf("tasks cancel: exit %d\n%s%s", code, out, errOut)
	}
}

// TestTasksFollow_ResumesAStreamThatEnds follows a delegation through a
// proxy that ends the first event stream after its first event, as a
// proxy timing out or a daemon stopping does: the command reopens the
// stream after the last event it printed, and prints every event once.
func TestTasksFollow_ResumesAStreamThatEnds(t *testing.T) {
	t.Parallel()
	work := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work", Streaming: true}, testagent.Work(300*time.Millisecond))
	base := daemon(t, registry.Spec{ID: "worker", URL: work.URL})
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var resumedAfter []string // Last-Event-ID of each event stream asked for
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(resp *http.Response) error {
		if !strings.HasSuffix(resp.Request.URL.Path, "/events") {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		resumedAfter = append(resumedAfter, resp.Request.Header.Get("Last-Event-ID"))
		if len(resumedAfter) == 1 {
			resp.Body = &firstEventOnly{ReadCloser: resp.Body}
		}
		return nil
	}
	front := httptest.NewServer(proxy)
	t.Cleanup(front.Close)

	code, out, errOut := orchd(t, t.Context(), "delegate", "--server", base, "--skill", "work", "--detach", "write it up")
	m := regexp.MustCompile(`delegation (\S+) →`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("delegate: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = orchd(t, t.Context(), "tasks", "follow", "--server", front.URL, m[1])
	seqs := regexp.MustCompile(`(?m)^\[(\d+)\]`).FindAllStringSubmatch(out, -1)
	for i, s := range seqs {
		if s[1] != strconv.Itoa(i+1) {
			t.Errorf("event %d printed as [%s]; want every event once, in order", i+1, s[1])
		}
	}
	if code != 0 {
		t.Errorf("tasks follow: exit %d\n%s", code, errOut)
	}
	if len(seqs) < 3 || !strings.HasSuffix(out, "] completed: done\n") {
		t.Errorf("tasks follow printed %d events, want 3 or more ending completed:\n%s", len(seqs), out)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"0", "1"}, resumedAfter); diff != "" {
		t.Errorf("event streams asked for after (-want +got):\n%s", diff)
	}
}

// TestTasksFollow_RetriesAServerError follows an ended delegation through
// a proxy whose first event stream answers 502, as one does while the
// daemon behind it restarts: the command asks again and prints its events
// to the end, though the record it started from already said it ended.
func TestTasksFollow_RetriesAServerError(t *testing.T) {
	t.Parallel()
	work := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work", Streaming: true}, testagent.Work(10*time.Millisecond))
	base := daemon(t, registry.Spec{ID: "worker", URL: work.URL})
	target, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	streams := 0
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/events") {
			mu.Lock()
			streams++
			first := streams == 1
			mu.Unlock()
			if first {
				http.Error(w, "bad gateway", http.StatusBadGateway)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	code, out, errOut := orchd(t, t.Context(), "delegate", "--server", base, "--skill", "work", "--detach", "write it up")
	m := regexp.MustCompile(`delegation (\S+) →`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("delegate: exit %d\n%s%s", code, out, errOut)
	}
	// It has ended before it is followed: the record says so, and the
	// events are still to be printed.
	waitTask(t, base, m[1], `(?m)^state +completed$`)
	code, out, errOut = orchd(t, t.Context(), "tasks", "follow", "--server", front.URL, m[1])
	mu.Lock()
	defer mu.Unlock()
	if code != 0 || !strings.HasSuffix(out, "] completed: done\n") {
		t.Errorf("tasks follow after a 502: exit %d, want 0 and completed\n%s%s", code, out, errOut)
	}
	if streams != 2 {
		t.Errorf("tasks follow after a 502 asked for %d event streams, want 2", streams)
	}
}

// firstEventOnly ends an event stream after its first event.
type firstEventOnly struct {
	io.ReadCloser
	seen []byte
	done bool
}

func (f *firstEventOnly) Read(p []byte) (int, error) {
	if f.done {
		return 0, io.EOF
	}
	n, err := f.ReadCloser.Read(p)
	before := len(f.seen)
	f.seen = append(f.seen, p[:n]...)
	if i := bytes.Index(f.seen, []byte("\n\n")); i >= 0 {
		f.done = true
		return i + 2 - before, nil
	}
	return n, err
}

// TestTasksGet_PrintsTheLineage runs A → B → agent: `orchd tasks get` at
// A names the agent B chose, its state, task and timings, before any
// steer.
func TestTasksGet_PrintsTheLineage(t *testing.T) {
	t.Parallel()
	slow := testagent.Start(t, testagent.Options{Name: "Slow one", Skill: "slow", Streaming: true}, testagent.Hang())
	b := daemon(t, registry.Spec{ID: "slow", URL: slow.URL})
	a := daemon(t, registry.Spec{ID: "b", URL: b})
	code, out, errOut := orchd(t, t.Context(), "delegate", "--server", a, "--skill", "slow", "--detach", "forever")
	m := regexp.MustCompile(`delegation (\S+) → b`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("delegate: exit %d\n%s%s", code, out, errOut)
	}
	out = waitTask(t, a, m[1], `(?m)^below +orchd → slow \(Slow one\): working, task \S+, delegated \S+, last change \S+ later$`)
	if !regexp.MustCompile(`(?m)^agent +b \(card sha256:`).MatchString(out) {
		t.Errorf("tasks get does not name B first:\n%s", out)
	}
	if code, out, errOut := orchd(t, t.Context(), "tasks", "cancel", "--server", a, m[1]); code != 0 {
		t.Errorf("tasks cancel: exit %d\n%s%s", code, out, errOut)
	}
}
