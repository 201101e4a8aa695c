package main

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

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
	if code != 0 {
		t.Errorf("delegate: exit %d\n%s", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^delegation \S+ → worker \(task \S+\)$`).MatchString(out) {
		t.Errorf("delegate did not say where the work went:\n%s", out)
	}
	if m := missing(out, "artifact", "] completed: done"); m != nil {
		t.Errorf("delegate: stdout lacks %q:\n%s", m, out)
	}

	// A refusal lists every candidate with its reasons, says once that no
	// agent can take the work, naming the skill, and exits 3.
	code, out, errOut = orchd(t, t.Context(), "delegate", "--server", base, "--skill", "research", "--require", "steerable", "x")
	want := result{exitRefused, "refused worker: lacks required capability steerable\n", "orchd: refused: no agent with skill \"research\" can take the work\n"}
	if diff := cmp.Diff(want, result{code, out, errOut}); diff != "" {
		t.Errorf("refused delegate (-want +got):\n%s", diff)
	}
	code, out, errOut = orchd(t, t.Context(), "delegate", "--server", base, "--skill", "nosuch", "x")
	if diff := cmp.Diff(result{exitRefused, "", "orchd: refused: no agent has skill \"nosuch\"\n"}, result{code, out, errOut}); diff != "" {
		t.Errorf("delegate to an unknown skill (-want +got):\n%s", diff)
	}
	code, out, errOut = orchd(t, t.Context(), "delegate", "--server", base, "--skill", "nosuch", "-o", "json", "x")
	if code != exitRefused {
		t.Errorf("delegate -o json to an unknown skill: exit %d, want %d", code, exitRefused)
	}
	if !strings.Contains(out, `"code": "refused"`) || !strings.Contains(errOut, `no agent has skill "nosuch"`) {
		t.Errorf("delegate -o json to an unknown skill: want the refusal as JSON and the skill named\n%s%s", out, errOut)
	}

	code, out, errOut = orchd(t, t.Context(), "delegate", "--server", base, "--agent", "asker", "history")
	id := regexp.MustCompile(`delegation (\S+) →`).FindStringSubmatch(out)
	if code != 0 || id == nil {
		t.Fatalf("delegate to asker: exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(out, "input_required: which year?") {
		t.Errorf("delegate to asker did not print the question:\n%s", out)
	}
	if !strings.Contains(errOut, "orchd tasks send --server "+base+" "+id[1]) {
		t.Errorf("delegate to asker did not say how to answer:\n%s", errOut)
	}
	// Following it again replays its events and stops where it waits.
	code, out, errOut = orchd(t, t.Context(), "tasks", "follow", "--server", base, id[1])
	if code != 0 {
		t.Errorf("tasks follow of a waiting delegation: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(out, "input_required: which year?") || !strings.Contains(errOut, "waits for input") {
		t.Errorf("tasks follow of a waiting delegation did not stop at the question:\n%s%s", out, errOut)
	}
	code, out, errOut = orchd(t, t.Context(), "tasks", "send", "--server", base, id[1], "1999")
	if code != 0 {
		t.Errorf("tasks send: exit %d\n%s", code, errOut)
	}
	if !strings.Contains(out, "completed: answered: 1999") || strings.Contains(out, "which year?") {
		t.Errorf("tasks send: want the answer's completion and not the question again:\n%s", out)
	}
	// Once answered and ended, following replays it all, the answered
	// wait included, to the end.
	code, out, errOut = orchd(t, t.Context(), "tasks", "follow", "--server", base, id[1])
	if m := missing(out, "input_required: which year?", "completed: answered: 1999"); code != 0 || m != nil {
		t.Errorf("tasks follow of an ended delegation: exit %d, stdout lacks %q\n%s%s", code, m, out, errOut)
	}

	code, out, errOut = orchd(t, t.Context(), "delegate", "--server", base, "--skill", "slow", "--detach", "forever")
	slowID := regexp.MustCompile(`delegation (\S+) →`).FindStringSubmatch(out)
	if code != 0 || slowID == nil {
		t.Fatalf("delegate slow: exit %d\n%s%s", code, out, errOut)
	}
	if want := "delegation " + slowID[1] + " goes on in the daemon; follow it with 'orchd tasks follow --server " + base + " " + slowID[1] + "'\n"; errOut != want {
		t.Errorf("delegate slow: stderr %q, want %q", errOut, want)
	}
	waitTask(t, base, slowID[1], `(?m)^state +working$`)
	code, out, errOut = orchd(t, t.Context(), "tasks", "cancel", "--server", base, slowID[1])
	if code != 0 || !regexp.MustCompile(`(?m)^state +canceled$`).MatchString(out) {
		t.Errorf("tasks cancel: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = orchd(t, t.Context(), "tasks", "follow", "--server", base, slowID[1])
	if code != exitFailure || errOut != "orchd: delegation "+slowID[1]+" was canceled\n" {
		t.Errorf("tasks follow of a canceled delegation: exit %d, stderr %q; want %d and that it was canceled", code, errOut, exitFailure)
	}
	if !strings.Contains(out, "] canceled") {
		t.Errorf("tasks follow of a canceled delegation did not print the cancel:\n%s", out)
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
	if m := missing(errOut, "HTTP 401", "set ORCHD_TOKEN"); code == 0 || m != nil {
		t.Errorf("without a token: exit %d, stderr lacks %q: %s", code, m, errOut)
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
		{[]string{"mcp", "--server", "127.0.0.1:8080"}, `--server "127.0.0.1:8080": want an http or https URL such as "http://127.0.0.1:8080"; see 'orchd mcp --help'`},
		{[]string{"mcp", "now"}, "orchd mcp takes no arguments, but was given 1; see 'orchd mcp --help'"},
	} {
		code, out, errOut := orchd(t, t.Context(), append(tc.args, "--server", "http://127.0.0.1:1")...)
		if code != exitUsage || out != "" {
			t.Errorf("%v: exit %d, stdout %q; want %d and nothing", tc.args, code, out, exitUsage)
		}
		if !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: stderr %q, want %q in it", tc.args, errOut, tc.want)
		}
	}
}
