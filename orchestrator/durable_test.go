package orchestrator

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testport"
	"github.com/orchd/orchd/internal/testwait"
)

// daemonProcess is the body of the helper processes childDaemon starts:
// it runs orchd on the config file args[0] until SIGTERM, in a process of
// its own so a test can kill it with SIGKILL.
func daemonProcess(args []string) int {
	if len(args) != 1 {
		return helperFailed(fmt.Errorf("daemon: want a config file, got %q", args))
	}
	cfg, err := LoadConfig(args[0])
	if err != nil {
		return helperFailed(err)
	}
	d, err := New(cfg, slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	if err != nil {
		return helperFailed(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := d.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// child is an orchd daemon in a child process, on a fixed address and
// state directory, so it can be killed and started again as the same
// orchd.
type child struct {
	t    *testing.T
	cfg  string
	base string
	mu   sync.Mutex
	cmd  *exec.Cmd
	logs []string // every line the daemon logged, across restarts
}

// childDaemon writes a config listening on a free loopback port with the
// state directory dir (and the extra YAML) and starts a daemon on it.
func childDaemon(t *testing.T, dir, extra string) *child {
	t.Helper()
	// A port outside the ephemeral range, which other tests' listeners
	// and connections cannot take before the child binds it.
	addr := "127.0.0.1:" + strconv.Itoa(testport.Free(t, 1)[0])
	cfg := filepath.Join(t.TempDir(), "orchd.yaml")
	yaml := fmt.Sprintf("listen: %s\nstateDir: %s\ndelegation:\n  pollInterval: 50ms\n%s", addr, dir, extra)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &child{t: t, cfg: cfg, base: "http://" + addr}
	c.start()
	t.Cleanup(c.kill)
	return c
}

// start starts the daemon and waits until it is ready.
func (c *child) start() {
	c.t.Helper()
	cmd := helpers.Command(c.t, "daemon", c.cfg)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() { // relays the child's errors until it exits
		sc := bufio.NewScanner(stderr)
		name := "child " + strings.TrimPrefix(c.base, "http://") + ":" // which of several logged
		for sc.Scan() {
			c.t.Log(name, sc.Text())
			c.mu.Lock()
			c.logs = append(c.logs, sc.Text())
			c.mu.Unlock()
		}
	}()
	c.mu.Lock()
	c.cmd = cmd
	c.mu.Unlock()
	// Starting the test binary under the race detector and setting up
	// replicated buckets on a 3-node cluster has taken over 20s on a
	// machine busy with other packages' tests.
	testwait.Until(c.t, 60*time.Second, "child daemon ready at "+c.base, func() bool {
		var ready map[string]any
		return callNoFail(c.base+"/readyz", &ready) == 200
	})
}

// logged returns the lines the daemon logged that hold every one of
// parts.
func (c *child) logged(parts ...string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, l := range c.logs {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(l, p) }) {
			out = append(out, l)
		}
	}
	return out
}

// kill kills the daemon with SIGKILL, as a crash would, and reaps it.
func (c *child) kill() {
	c.mu.Lock()
	cmd := c.cmd
	c.cmd = nil
	c.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
}

// callNoFail is call for polling: a connection error is status 0.
func callNoFail(url string, out any) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(out)
	return resp.StatusCode
}

// TestDurable_KillNineMidDelegation kills the daemon with SIGKILL while
// delegations run and starts it again on the same state directory: the
// agents added through the API are there, every delegation ends
// COMPLETED with its artifact whole, and each event log, read across the
// kill with Last-Event-ID, holds every event once and in order.
func TestDurable_KillNineMidDelegation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts whole daemons as processes and kills them")
	}
	t.Parallel()
	const n = 100
	release := make(chan struct{})
	agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work", Streaming: true}, gatedWork(release))
	polled := testagent.Start(t, testagent.Options{Name: "Poller", Skill: "batch"}, gatedWork(release))
	c := childDaemon(t, t.TempDir(), "")
	for _, a := range []*testagent.Agent{agent, polled} {
		if code := call(t, "POST", c.base+"/v1/agents", `{"url":"`+a.URL+`"}`, nil); code != 201 {
			t.Fatalf("add agent = %d", code)
		}
	}
	ids := make([]string, n)
	for i := range ids {
		skill := []string{"work", "batch"}[i%2]
		var rec delegation.Record
		if code := call(t, "POST", c.base+"/v1/delegations", `{"skill":"`+skill+`","message":{"role":"ROLE_USER","parts":[{"text":"go"}]}}`, &rec); code != 201 {
			t.Fatalf("delegate %d = %d", i, code)
		}
		ids[i] = rec.ID
	}
	// Read the first events of each, then kill the daemon mid-work.
	seen := make([][]delegation.Event, n)
	for i, id := range ids {
		seen[i] = readUntil(t, c.base+"/v1/delegations/"+id+"/events", "", func(ev delegation.Event) bool { return ev.Kind == "artifact" })
	}
	var running httpapi.DelegationList
	call(t, "GET", c.base+"/v1/delegations?state=working&pageSize=1000", "", &running)
	if len(running.Delegations) != n {
		t.Fatalf("%d of %d delegations ran at the kill", len(running.Delegations), n)
	}
	c.kill()
	start := time.Now()
	c.start()
	t.Logf("ready again in %s", time.Since(start).Round(time.Millisecond))
	close(release) // the agents finish the work the killed daemon delegated

	var list httpapi.AgentList
	if code := call(t, "GET", c.base+"/v1/agents", "", &list); code != 200 || len(list.Agents) != 2 {
		t.Fatalf("after the restart: %d agents (%d)", len(list.Agents), code)
	}
	for i, id := range ids {
		last := seen[i][len(seen[i])-1].Seq
		rest := readEvents(t, c.base+"/v1/delegations/"+id+"/events", fmt.Sprint(last))
		all := append(seen[i], rest...)
		terminal := 0
		for j, ev := range all {
			if ev.Seq != int64(j+1) {
				t.Fatalf("delegation %d: event %d has seq %d: %s", i, j, ev.Seq, kinds(all))
			}
			if ev.State.Terminal() {
				terminal++
			}
		}
		var rec delegation.Record
		call(t, "GET", c.base+"/v1/delegations/"+id, "", &rec)
		if terminal != 1 {
			t.Errorf("delegation %d: %d terminal events, want 1: %s", i, terminal, kinds(all))
		}
		if diff := cmp.Diff(whole{a2a.TaskStateCompleted, []int{2}}, wholeOf(rec)); diff != "" {
			t.Errorf("delegation %d, error %q: (-want +got):\n%s", i, rec.Error, diff)
		}
	}
}

// gatedWork creates a task, reports progress and a first artifact chunk,
// then waits for release before it sends the second chunk and
// completes.
func gatedWork(release <-chan struct{}) testagent.Behaviour {
	return func(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) ||
			!yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("working"))), nil) {
			return
		}
		art := a2a.NewArtifactEvent(ec, a2a.NewTextPart("part one, "))
		if !yield(art, nil) {
			return
		}
		select {
		case <-release:
		case <-ctx.Done():
			return
		}
		more := a2a.NewArtifactUpdateEvent(ec, art.Artifact.ID, a2a.NewTextPart("part two"))
		more.Append, more.LastChunk = true, true
		if yield(more, nil) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done"))), nil)
		}
	}
}

// readUntil reads a delegation's events until stop says so (or the
// stream ends).
func readUntil(t *testing.T, url, lastID string, stop func(delegation.Event) bool) []delegation.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []delegation.Event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev delegation.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
		if stop(ev) {
			return out
		}
	}
	t.Fatalf("the stream ended before the event waited for: %s", kinds(out))
	return nil
}

func kinds(evs []delegation.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%d:%s/%s ", ev.Seq, ev.Kind, strings.TrimPrefix(string(ev.State), "TASK_STATE_"))
	}
	return b.String()
}

// childWithGatedAgent starts a streaming agent whose tasks work until
// release is closed (gatedWork), and a child daemon (extra as for
// childDaemon) that knows it.
func childWithGatedAgent(t *testing.T, release <-chan struct{}, extra string) (*testagent.Agent, *child) {
	t.Helper()
	agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work", Streaming: true}, gatedWork(release))
	c := childDaemon(t, t.TempDir(), extra)
	if code := call(t, "POST", c.base+"/v1/agents", `{"url":"`+agent.URL+`"}`, nil); code != 201 {
		t.Fatalf("add the agent to %s = %d", c.base, code)
	}
	return agent, c
}

// TestDurable_MiddleHopRestarts kills B in A → B → agent with SIGKILL
// mid-task and starts it again: A's delegation carries on to the end,
// with the artifact whole.
func TestDurable_MiddleHopRestarts(t *testing.T) {
	if testing.Short() {
		t.Skip("starts whole daemons as processes and kills them")
	}
	t.Parallel()
	release := make(chan struct{})
	_, b := childWithGatedAgent(t, release, "agent:\n  name: b\n")
	cfg := loadDefaults(t)
	cfg.Delegation.PollInterval = Duration(50 * time.Millisecond)
	a := startDaemon(t, cfg)
	if code := call(t, "POST", a+"/v1/agents", `{"id":"b","url":"`+b.base+`"}`, nil); code != 201 {
		t.Fatalf("add b to a = %d", code)
	}
	var rec delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"skill":"work","message":{"role":"ROLE_USER","parts":[{"text":"go"}]}}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	seen := readUntil(t, a+"/v1/delegations/"+rec.ID+"/events", "", func(ev delegation.Event) bool { return ev.Kind == "artifact" })
	b.kill()
	b.start()
	close(release)
	rest := readEvents(t, a+"/v1/delegations/"+rec.ID+"/events", fmt.Sprint(seen[len(seen)-1].Seq))
	call(t, "GET", a+"/v1/delegations/"+rec.ID, "", &rec)
	if diff := cmp.Diff(whole{a2a.TaskStateCompleted, []int{2}}, wholeOf(rec)); diff != "" {
		t.Fatalf("A's delegation, error %q, events %s (-want +got):\n%s", rec.Error, kinds(append(seen, rest...)), diff)
	}
}
