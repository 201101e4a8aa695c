package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/internal/orchdtest"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/orchestrator"
	"github.com/orchd/orchd/registry"
)

// daemon runs an orchd with the given agents until the test ends.
func daemon(t *testing.T, agents ...registry.Spec) string {
	t.Helper()
	cfg, err := orchestrator.LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Agents = agents
	cfg.Delegation.PollInterval = orchestrator.Duration(20 * time.Millisecond)
	return orchdtest.Start(t, cfg)
}

// waitTask runs `orchd tasks get` of the delegation until its output
// matches the regular expression want, and returns that output.
func waitTask(t *testing.T, server, id, want string) string {
	t.Helper()
	re := regexp.MustCompile(want)
	var out string
	testwait.Succeeds(t, 10*time.Second, "delegation "+id+" matching "+want, func() error {
		_, out, _ = orchd(t, t.Context(), "tasks", "get", "--server", server, id)
		if !re.MatchString(out) {
			return fmt.Errorf("tasks get says\n%s", out)
		}
		return nil
	})
	return out
}

func TestDelegateAndTasks(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Work(10*time.Millisecond))
	asker := testagent.Start(t, testagent.Options{Name: "Asker", Skill: "ask"}, testagent.Ask())
	slow := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true}, testagent.Hang())
	base := daemon(t, registry.Spec{ID: "worker", URL: worker.URL}, registry.Spec{ID: "asker", URL: asker.URL}, registry.Spec{ID: "slow", URL: slow.URL})

	code, out, errOut := orchd(t, t.Context(), "delegate", "--server", base, "--skill", "research", "--require", "streaming", "find papers")
	if code != 0 || !regexp.MustCompile(`(?m)^delegation \S+ → worker \(task \S+\)$`).MatchString(out) ||
		!strings.Contains(out, "artifact") || !strings.Contains(out, "] completed: done") {
		t.Errorf("delegate: exit %d\n%s%s", code, out, errOut)
	}

	// A refusal lists every candidate with its reasons, says once that no
	// agent can take the work, naming the skill, and exits 3.
	code, out, errOut = orchd(t, t.Context(), "delegate", "--server", base, "--skill", "research", "--require", "steerable", "x")
	if code != exitRefused || out != "refused worker: lacks required capability steerable\n" ||
		errOut != "orchd: refused: no agent with skill \"research\" can take the work\n" {
		t.Errorf("refused delegate: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = orchd(t, t.Context(), "delegate", "--server", base, "--skill", "nosuch", "x")
	if code != exitRefused || out != "" || errOut != "orchd: refused: no agent has skill \"nosuch\"\n" {
		t.Errorf("delegate to an unknown skill: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = orchd(t, t.Context(), "delegate", "--server", base, "--skill", "nosuch", "-o", "json", "x")
	if code != exitRefused || !strings.Contains(out, `"code": "refused"`) || !strings.Contains(errOut, `no agent has skill "nosuch"`) {
		t.Errorf("delegate -o json to an unknown skill: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = orchd(t, t.Context(), "delegate", "--server", base, "--agent", "asker", "history")
	id := regexp.MustCompile(`delegation (\S+) →`).FindStringSubmatch(out)
	if code != 0 || id == nil || !strings.Contains(out, "input_required: which year?") || !strings.Contains(errOut, "orchd tasks send --server "+base+" "+id[1]) {
		t.Fatalf("delegate to asker: exit %d\n%s%s", code, out, errOut)
	}
	// Following it again replays its events and stops where it waits.
	code, out, errOut = orchd(t, t.Context(), "tasks", "follow", "--server", base, id[1])
	if code != 0 || !strings.Contains(out, "input_required: which year?") || !strings.Contains(errOut, "waits for input") {
		t.Errorf("tasks follow of a waiting delegation: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = orchd(t, t.Context(), "tasks", "send", "--server", base, id[1], "1999")
	if code != 0 || !strings.Contains(out, "completed: answered: 1999") || strings.Contains(out, "which year?") {
		t.Errorf("tasks send: exit %d\n%s%s", code, out, errOut)
	}
	// Once answered and ended, following replays it all, the answered
	// wait included, to the end.
	code, out, errOut = orchd(t, t.Context(), "tasks", "follow", "--server", base, id[1])
	if code != 0 || !strings.Contains(out, "input_required: which year?") || !strings.Contains(out, "completed: answered: 1999") {
		t.Errorf("tasks follow of an ended delegation: exit %d\n%s%s", code, out, errOut)
	}

	code, out, errOut = orchd(t, t.Context(), "delegate", "--server", base, "--skill", "slow", "--detach", "forever")
	slowID := regexp.MustCompile(`delegation (\S+) →`).FindStringSubmatch(out)
	if code != 0 || slowID == nil || errOut != "delegation "+slowID[1]+" goes on in the daemon; follow it with 'orchd tasks follow --server "+base+" "+slowID[1]+"'\n" {
		t.Fatalf("delegate slow: exit %d\n%s%s", code, out, errOut)
	}
	waitTask(t, base, slowID[1], `(?m)^state +working$`)
	code, out, errOut = orchd(t, t.Context(), "tasks", "cancel", "--server", base, slowID[1])
	if code != 0 || !regexp.MustCompile(`(?m)^state +canceled$`).MatchString(out) {
		t.Errorf("tasks cancel: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = orchd(t, t.Context(), "tasks", "follow", "--server", base, slowID[1])
	if code != exitFailure || !strings.Contains(out, "] canceled") || errOut != "orchd: delegation "+slowID[1]+" was canceled\n" {
		t.Errorf("tasks follow of a canceled delegation: exit %d\n%s%s", code, out, errOut)
	}
	code, out, _ = orchd(t, t.Context(), "tasks", "list", "--server", base, "--state", "completed")
	if code != 0 || strings.Count(out, "completed") != 2 {
		t.Errorf("tasks list: exit %d\n%s", code, out)
	}
	code, _, errOut = orchd(t, t.Context(), "tasks", "get", "--server", base, "nope")
	if code == 0 || !strings.Contains(errOut, `delegation not found: "nope" (HTTP 404)`) {
		t.Errorf("tasks get unknown: exit %d, %s", code, errOut)
	}
}

func TestSteerAndInterruptCommands(t *testing.T) {
	t.Parallel()
	c := testagent.Start(t, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	base := daemon(t, registry.Spec{ID: "c", URL: c.URL})
	code, out, errOut := orchd(t, t.Context(), "delegate", "--server", base, "--skill", "research", "--detach", "survey")
	id := regexp.MustCompile(`delegation (\S+) →`).FindStringSubmatch(out)
	if code != 0 || id == nil {
		t.Fatalf("delegate: exit %d\n%s%s", code, out, errOut)
	}
	waitTask(t, base, id[1], `(?m)^state +working$`)
	code, out, errOut = orchd(t, t.Context(), "steer", "--server", base, "--reference", "out-1", id[1], "narrow to 2025")
	if code != 0 || !regexp.MustCompile(`^steer 1 accepted by orchd-[0-9a-f]{16} #1 → C #1$`).MatchString(strings.TrimSpace(out)) {
		t.Errorf("steer: exit %d %q %s", code, out, errOut)
	}
	code, out, errOut = orchd(t, t.Context(), "interrupt", "--server", base, id[1])
	if code != 0 || !regexp.MustCompile(`^interrupt 2 accepted by orchd-[0-9a-f]{16} #2 → C #2$`).MatchString(strings.TrimSpace(out)) {
		t.Errorf("interrupt: exit %d %q %s", code, out, errOut)
	}
	code, _, errOut = orchd(t, t.Context(), "steer", "--server", base, id[1], "more")
	if code != exitRefused || !strings.Contains(errOut, "cannot steer: delegation \""+id[1]+"\" is TASK_STATE_INPUT_REQUIRED; only WORKING work can be steered") {
		t.Errorf("steer while interrupted: exit %d %s", code, errOut)
	}
	code, _, errOut = orchd(t, t.Context(), "interrupt", "--server", base, id[1])
	if code != exitRefused || !strings.Contains(errOut, "cannot interrupt: delegation \""+id[1]+"\" is TASK_STATE_INPUT_REQUIRED; only WORKING work can be interrupted") {
		t.Errorf("interrupt while interrupted: exit %d %s", code, errOut)
	}
	orchd(t, t.Context(), "tasks", "cancel", "--server", base, id[1])
}

// The client commands send $ORCHD_TOKEN to a daemon that authenticates
// its callers, and say so when it refuses them.
func TestClientCommands_SendTheToken(t *testing.T) {
	cfg, err := orchestrator.LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth.Tokens = []auth.TokenConfig{{Token: "cli-token-0123456789", Principal: "alice"}}
	base := orchdtest.Start(t, cfg)

	t.Setenv("ORCHD_TOKEN", "")
	code, _, errOut := orchd(t, t.Context(), "tasks", "list", "--server", base)
	if code == 0 || !strings.Contains(errOut, "HTTP 401") || !strings.Contains(errOut, "set ORCHD_TOKEN") {
		t.Errorf("without a token: exit %d, %s", code, errOut)
	}
	t.Setenv("ORCHD_TOKEN", "cli-token-0123456789")
	if code, out, errOut := orchd(t, t.Context(), "tasks", "list", "--server", base); code != 0 || !strings.Contains(out, "STATE") {
		t.Errorf("with the token: exit %d\n%s%s", code, out, errOut)
	}
}

// The client commands' wrong flag values are usage errors, told before
// any daemon is asked.
func TestClientCommands_UsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"delegate", "-o", "yaml", "x"}, `"yaml"`},
		{[]string{"steer", "-o", "yaml", "id", "x"}, `"yaml"`},
		{[]string{"tasks", "get", "-o", "yaml", "id"}, `"yaml"`},
		{[]string{"tasks", "list", "--limit", "0"}, "--limit 0: want a positive number; see 'orchd tasks list --help'"},
		{[]string{"tasks", "follow", "--after", "-1", "id"}, "--after -1: want an event's sequence number, 0 or more; see 'orchd tasks follow --help'"},
		{[]string{"agents", "list", "--server", "127.0.0.1:8080"}, `--server "127.0.0.1:8080": want an http or https URL such as "http://127.0.0.1:8080"; see 'orchd agents list --help'`},
		{[]string{"tasks", "follow", "--server", "ftp://orchd.example.com", "id"}, `--server "ftp://orchd.example.com": want an http or https URL such as "http://127.0.0.1:8080"`},
	} {
		code, out, errOut := orchd(t, t.Context(), append(tc.args, "--server", "http://127.0.0.1:1")...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d and %q", tc.args, code, out, errOut, exitUsage, tc.want)
		}
	}
}
