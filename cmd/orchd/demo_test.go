package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/orchd/orchd/internal/syncbuf"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/mcpserver"
)

// The README's quick start, end to end: orchd demo on free ports, then
// the commands it prints, through the CLI.
func TestDemo_QuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the whole demo: a daemon and its fleet")
	}
	ctx, cancel := context.WithCancel(t.Context())
	var out, logs syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runContext(ctx, []string{"demo", "--listen", "127.0.0.1:0", "--agents-port", "0"}, &out, &logs)
	}()
	stopped := false
	stop := func() int {
		cancel()
		if stopped {
			return 0
		}
		stopped = true
		return <-done
	}
	defer stop()
	testwait.Succeeds(t, 30*time.Second, "the demo's banner", func() error {
		select {
		case code := <-done:
			stopped = true
			t.Fatalf("demo exited %d:\n%s%s", code, out.String(), logs.String())
		default:
		}
		if !strings.Contains(out.String(), "Ctrl-C stops the demo") {
			return fmt.Errorf("output so far:\n%s%s", out.String(), logs.String())
		}
		return nil
	})
	banner := out.String()
	server := regexp.MustCompile(`orchd serves at (http://127\.0\.0\.1:\d+) with 5 demo agents`).FindStringSubmatch(banner)
	stateDir := regexp.MustCompile(`orchd's state is in (\S+), removed when the demo stops`).FindStringSubmatch(banner)
	if server == nil || stateDir == nil || !strings.Contains(banner, "orchd steer --server "+server[1]+` ID "only papers from 2025"`) {
		t.Fatalf("banner:\n%s", banner)
	}
	if resp, err := http.Get(server[1] + "/ui/"); err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(banner, server[1]+"/ui/") {
		t.Errorf("the console the banner names: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	if !strings.Contains(banner, "claude mcp add --transport http orchd "+server[1]+"/mcp") {
		t.Errorf("the banner does not say where MCP clients connect:\n%s", banner)
	}
	// An MCP client sees the demo's agents there.
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "demo-test", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: server[1] + mcpserver.Path, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolAgents})
	_ = cs.Close()
	var listed mcpserver.AgentsOutput
	if err == nil && !res.IsError {
		b, _ := json.Marshal(res.StructuredContent)
		err = json.Unmarshal(b, &listed)
	}
	if err != nil || len(listed.Agents) != 5 {
		t.Errorf("orchd_agents at the demo: %v, %+v", err, listed)
	}
	// cli runs an orchd command (one or two words) against the demo.
	cli := func(command string, args ...string) (int, string, string) {
		t.Helper()
		return orchd(t, ctx, append(append(strings.Fields(command), "--server", server[1]), args...)...)
	}
	idOf := func(out string) string {
		t.Helper()
		m := regexp.MustCompile(`(?m)^delegation (\S+) → `).FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("no delegation id in:\n%s", out)
		}
		return m[1]
	}

	code, got, errOut := cli("delegate", "--skill", "report", "the state of agent protocols")
	if code != exitOK || !strings.Contains(got, "] working: writing section 4 of 4: next steps") ||
		!regexp.MustCompile(`\] artifact report: summary: what matters about "the state of agent protocols", in short\.\s*\n`).MatchString(got) ||
		!regexp.MustCompile(`\] artifact report \(continued\): background: `).MatchString(got) ||
		!strings.Contains(got, `] completed: the report on "the state of agent protocols" is ready`) {
		t.Errorf("delegate report: exit %d\n%s%s", code, got, errOut)
	}

	code, got, errOut = cli("delegate", "--skill", "research", "--detach", "agent steering")
	if code != exitOK || !strings.Contains(got, " → steerable (task ") {
		t.Fatalf("delegate research: exit %d\n%s%s", code, got, errOut)
	}
	research := idOf(got)
	waitTask(t, server[1], research, `(?m)^state +working$`)
	code, got, errOut = cli("steer", research, "only papers from 2025")
	if code != exitOK || !regexp.MustCompile(`^steer 1 accepted by orchd-[0-9a-f]{16} #1 → steerable #1\n$`).MatchString(got) {
		t.Errorf("steer: exit %d %q %s", code, got, errOut)
	}
	waitTask(t, server[1], research, `(?m)^artifact +progress: took steer 1 at step \d+ of 12; following "only papers from 2025"$`)
	if !strings.Contains(logs.String(), `msg="took a steer" component=fleet agent=steerable`) {
		t.Errorf("the demo's log does not show the steer taken:\n%s", logs.String())
	}
	code, got, errOut = cli("interrupt", research)
	if code != exitOK || !strings.HasPrefix(got, "interrupt 2 accepted by ") {
		t.Errorf("interrupt: exit %d %q %s", code, got, errOut)
	}
	waitTask(t, server[1], research, `(?m)^state +input_required$`)
	// The operator's brake: the resumed work stops again once its agent
	// is contained, new work for it is refused, and a release lets it on.
	resp, err := http.Post(server[1]+"/v1/delegations/"+research+"/messages", "application/json", strings.NewReader(`{"text": "go on, briefly"}`))
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("resume: %v %v", resp, err)
	}
	resp.Body.Close()
	waitTask(t, server[1], research, `(?m)^state +working$`)
	if code, got, errOut = cli("agents contain", "steerable", "--reason", "misbehaves"); code != exitOK || !strings.HasPrefix(got, "contained steerable: contained by ") {
		t.Errorf("agents contain: exit %d %q %s", code, got, errOut)
	}
	waitTask(t, server[1], research, `(?m)^state +input_required$`)
	if code, got, errOut = cli("delegate", "--skill", "research", "more steering"); code != exitRefused || !strings.Contains(got, "misbehaves") {
		t.Errorf("delegate to the contained agent: exit %d\n%s%s", code, got, errOut)
	}
	if code, got, errOut = cli("agents release", "steerable"); code != exitOK || !strings.HasPrefix(got, "released steerable, contained by ") {
		t.Errorf("agents release: exit %d %q %s", code, got, errOut)
	}
	if code, got, errOut = cli("tasks cancel", research); code != exitOK {
		t.Errorf("tasks cancel: exit %d\n%s%s", code, got, errOut)
	}

	code, got, errOut = cli("delegate", "--skill", "summary", "the A2A spec")
	if code != exitOK || !strings.Contains(got, `input_required: which year should the summary of "the A2A spec" cover?`) || !strings.Contains(errOut, "orchd tasks send") {
		t.Fatalf("delegate summary: exit %d\n%s%s", code, got, errOut)
	}
	code, got, errOut = cli("tasks send", idOf(got), "2025")
	if code != exitOK || !strings.Contains(got, `artifact summary: summary of "the A2A spec" for 2025`) || !strings.Contains(got, "] completed: summary ready") {
		t.Errorf("tasks send: exit %d\n%s%s", code, got, errOut)
	}

	code, got, errOut = cli("delegate", "--skill", "legacy", "hello from A2A 1.0")
	if code != exitOK || !strings.Contains(got, `artifact answer: legacy agent (A2A 0.3) got "hello from A2A 1.0"`) {
		t.Errorf("delegate legacy: exit %d\n%s%s", code, got, errOut)
	}

	code, got, errOut = cli("delegate", "--skill", "draft", "--detach", "release notes")
	if code != exitOK || !strings.Contains(got, " → plain (task ") {
		t.Fatalf("delegate draft: exit %d\n%s%s", code, got, errOut)
	}
	draft := idOf(got)
	waitTask(t, server[1], draft, `(?m)^state +working$`)
	code, got, errOut = cli("steer", draft, "shorter")
	if code == exitOK || !strings.Contains(errOut, "hop plain does not advertise the steerable mode") {
		t.Errorf("steer to plain: exit %d %q %s", code, got, errOut)
	}
	cli("tasks cancel", draft)

	code, got, errOut = cli("tasks list")
	for _, want := range []string{"completed  report", "canceled   steerable", "completed  asker", "completed  legacy", "canceled   plain"} {
		if code != exitOK || !regexp.MustCompile(strings.ReplaceAll(regexp.QuoteMeta(want), " ", " +")).MatchString(got) {
			t.Errorf("tasks list lacks %q: exit %d\n%s%s", want, code, got, errOut)
		}
	}

	if code := stop(); code != exitOK {
		t.Errorf("demo exited %d:\n%s", code, logs.String())
	}
	if _, err := os.Stat(stateDir[1]); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temporary state directory is left: %v", err)
	}
}

// Free ports for the agents cannot go with a kept state directory: the
// agents it keeps would be at the old ports.
func TestDemo_FreePortsWithStateDir(t *testing.T) {
	t.Parallel()
	code, _, errOut := orchd(t, t.Context(), "demo", "--agents-port", "0", "--state-dir", t.TempDir())
	if code != exitUsage || !strings.Contains(errOut, "--agents-port 0 cannot go with --state-dir") {
		t.Errorf("exit %d, %s", code, errOut)
	}
}
