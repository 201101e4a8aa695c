package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"golang.org/x/sys/unix"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
)

// A full disk is simulated with the child daemon's file size limit
// (RLIMIT_FSIZE), which a test can set on another process of its user
// and lift again: a write past it fails with EFBIG, as a write to a full
// disk fails with ENOSPC, and nats-server v2.15.2 treats both alike.

// limitFileSize sets the child daemon's limit on the size of a file it
// writes; unix.RLIM_INFINITY lifts it.
func (c *child) limitFileSize(t *testing.T, limit uint64) {
	t.Helper()
	c.mu.Lock()
	pid := c.cmd.Process.Pid
	c.mu.Unlock()
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &unix.Rlimit{Cur: limit, Max: unix.RLIM_INFINITY}, nil); err != nil {
		t.Fatalf("limit the child's file size: %v", err)
	}
}

// stop sends SIGTERM, a graceful stop, and returns how long the daemon
// took to exit and its exit code.
func (c *child) stop(t *testing.T) (time.Duration, int) {
	t.Helper()
	c.mu.Lock()
	cmd := c.cmd
	c.cmd = nil
	c.mu.Unlock()
	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	took := time.Since(start)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return took, 0
	case errors.As(err, &exit):
		return took, exit.ExitCode()
	}
	t.Fatalf("wait for the daemon: %v", err)
	return took, -1
}

// TestReady_StoreWritesFailUntilSpaceReturns makes every write of the
// daemon's embedded store fail at the operating system, as on a full
// disk: /readyz goes unready, naming the store, as long as that lasts,
// and comes back by itself once writes can succeed again, without a
// restart; new work is taken again and none taken before is lost.
func TestReady_StoreWritesFailUntilSpaceReturns(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole daemon as a process and waits out its store's retries (~3 s)")
	}
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work"}, testagent.Reply("done"))
	// The agent answers at once: with quick writes such a hop is answered
	// before its record is written (docs/state.md), and the first one
	// after the disk fails would be answered too. Off, each is written
	// before its answer, as work that goes on always is.
	c := childDaemon(t, t.TempDir(), "store:\n  quickWriteLag: \"off\"\n")
	if code := call(t, "POST", c.base+"/v1/agents", `{"url":"`+agent.URL+`"}`, nil); code != 201 {
		t.Fatalf("add agent = %d", code)
	}
	if code := post(c.base+"/v1/delegations", workBody); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	c.limitFileSize(t, 1) // no file of the store may grow
	if code := post(c.base+"/v1/delegations", workBody); code != 503 {
		t.Errorf("delegate with the store failing = %d, want 503", code)
	}
	r := waitReady(t, c, 503, 30*time.Second, "unready while the store's writes fail")
	if !strings.Contains(strings.Join(r.Reasons, " "), "state store cannot write") {
		t.Errorf("readiness reasons %q do not say the state store cannot write", r.Reasons)
	}
	time.Sleep(2 * time.Second) // room is looked for every second, and not found
	if code := callNoFail(c.base+"/readyz", &r); code != 503 {
		t.Errorf("/readyz = %d with the store still failing", code)
	}

	c.limitFileSize(t, unix.RLIM_INFINITY)
	freed := time.Now()
	waitReady(t, c, 200, 30*time.Second, "ready again once writes can succeed")
	t.Logf("ready again %s after space returned", time.Since(freed).Round(time.Millisecond))
	for i := range 3 {
		if code := post(c.base+"/v1/delegations", workBody); code != 201 {
			t.Errorf("delegate %d after space returned = %d", i, code)
		}
	}
	var list httpapi.DelegationList
	call(t, "GET", c.base+"/v1/delegations?pageSize=100", "", &list)
	if len(list.Delegations) != 4 {
		t.Errorf("listed %d delegations, want the 4 taken", len(list.Delegations))
	}
}

// TestStop_QuickWithTheStoreFailing stops a daemon gracefully while its
// store's writes fail and its delegations are writing the agents' last
// events: the stop does not wait a timeout for each write (it took 19 s
// with three delegations and the default store.timeout of 5 s), and
// exits 0.
func TestStop_QuickWithTheStoreFailing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole daemon as a process")
	}
	t.Parallel()
	release := make(chan struct{})
	finished := make(chan struct{}, 3)
	work := gatedWork(release)
	agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work", Streaming: true},
		func(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
			work(ctx, ec, yield)
			finished <- struct{}{}
		})
	c := childDaemon(t, t.TempDir(), "")
	if code := call(t, "POST", c.base+"/v1/agents", `{"url":"`+agent.URL+`"}`, nil); code != 201 {
		t.Fatalf("add agent = %d", code)
	}
	for i := range 3 {
		var rec delegation.Record
		if code := call(t, "POST", c.base+"/v1/delegations", workBody, &rec); code != 201 {
			t.Fatalf("delegate %d = %d", i, code)
		}
		readUntil(t, c.base+"/v1/delegations/"+rec.ID+"/events", "", func(ev delegation.Event) bool { return ev.Kind == "artifact" })
	}
	c.limitFileSize(t, 1)
	close(release) // the agents finish: every delegation writes its last events
	for range 3 {
		<-finished
	}
	time.Sleep(time.Second) // the events reach orchd, whose writes fail
	took, code := c.stop(t)
	t.Logf("graceful stop with the store failing: %s, exit code %d", took.Round(time.Millisecond), code)
	if code != 0 {
		t.Errorf("exit code %d after a graceful stop", code)
	}
	if took > 4*time.Second {
		t.Errorf("graceful stop took %s with the store failing", took)
	}
}

// waitReady polls the daemon's /readyz until it answers want, and
// returns that answer.
func waitReady(t *testing.T, c *child, want int, within time.Duration, what string) httpapi.Readiness {
	t.Helper()
	var r httpapi.Readiness
	testwait.Succeeds(t, within, what, func() error {
		r = httpapi.Readiness{}
		if code := callNoFail(c.base+"/readyz", &r); code != want {
			return fmt.Errorf("/readyz = %d %v, want %d", code, r.Reasons, want)
		}
		return nil
	})
	return r
}

// TestReady_EndWrittenOnceTheStoreWritesAgain ends a delegation while
// every write of the daemon's embedded store fails, as on a full disk:
// the daemon serves the end meanwhile, and once writes succeed again the
// store has it, without a restart: its listing, read from the store, shows
// the delegation COMPLETED, and its log holds every event once.
func TestReady_EndWrittenOnceTheStoreWritesAgain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a whole daemon as a process and makes its store fail")
	}
	t.Parallel()
	release := make(chan struct{})
	_, c := childWithGatedAgent(t, release, "")
	var rec delegation.Record
	if code := call(t, "POST", c.base+"/v1/delegations", workBody, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	events := c.base + "/v1/delegations/" + rec.ID + "/events"
	readUntil(t, events, "", func(ev delegation.Event) bool { return ev.Kind == "artifact" })
	c.limitFileSize(t, 1)
	close(release) // the agent ends the work; its last events' writes fail
	testwait.Until(t, 30*time.Second, "the daemon to serve the end", func() bool {
		var r delegation.Record
		return callNoFail(c.base+"/v1/delegations/"+rec.ID, &r) == 200 && r.State == a2a.TaskStateCompleted
	})
	waitReady(t, c, 503, 30*time.Second, "unready while the store's writes fail")
	stored := func() (a2a.TaskState, error) {
		var list httpapi.DelegationList
		if code := callNoFail(c.base+"/v1/delegations?pageSize=10", &list); code != 200 {
			return "", fmt.Errorf("list = %d", code)
		}
		for _, r := range list.Delegations {
			if r.ID == rec.ID {
				return r.State, nil
			}
		}
		return "", errors.New("not listed")
	}
	if st, err := stored(); err == nil && st.Terminal() {
		t.Fatalf("the store has the end (%s) while its writes fail", st)
	}
	c.limitFileSize(t, unix.RLIM_INFINITY)
	freed := time.Now()
	waitReady(t, c, 200, 30*time.Second, "ready again once writes can succeed")
	testwait.Succeeds(t, 30*time.Second, "the end in the store", func() error {
		st, err := stored()
		if err == nil && st != a2a.TaskStateCompleted {
			err = fmt.Errorf("stored %s", st)
		}
		return err
	})
	t.Logf("the end was stored %s after space returned", time.Since(freed).Round(time.Millisecond))
	evs := readEvents(t, events, "")
	ends := 0
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: %s", i, ev.Seq, kinds(evs))
		}
		if ev.State.Terminal() {
			ends++
		}
	}
	if ends != 1 {
		t.Errorf("%d ends in the log, want 1: %s", ends, kinds(evs))
	}
}
