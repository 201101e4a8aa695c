package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/orchd/orchd/internal/orchdtest"
	"github.com/orchd/orchd/internal/syncbuf"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/orchestrator"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runUntil runs the command until want shows in its output, then stops it
// and returns the output.
func runUntil(t *testing.T, want string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, logs syncbuf.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, &out, &logs) }()
	testwait.Succeeds(t, 20*time.Second, fmt.Sprintf("%q in the output", want), func() error {
		select {
		case err := <-done:
			t.Fatalf("exited (%v) before %q:\n%s%s", err, want, out.String(), logs.String())
		default:
		}
		if !strings.Contains(out.String(), want) {
			return fmt.Errorf("output so far:\n%s%s", out.String(), logs.String())
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	return out.String()
}

// The agents register with a running orchd; with none they say how.
func TestRun_Registers(t *testing.T) {
	cfg, err := orchestrator.LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	base := orchdtest.Start(t, cfg)
	out := runUntil(t, "run until Ctrl-C", "--orchd", base, "--port", "0")
	if n := strings.Count(out, "registered with "+base); n != 5 {
		t.Errorf("%d agents registered, want 5:\n%s", n, out)
	}
	resp, err := http.Get(base + "/v1/agents")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Agents []struct {
			ID string `json:"id"`
		} `json:"agents"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, a := range list.Agents {
		ids = append(ids, a.ID)
	}
	if got := strings.Join(ids, ","); got != "asker,legacy,plain,report,steerable" {
		t.Errorf("orchd has %s", got)
	}

	// The ids are taken now, by URLs of free ports that were closed.
	out = runUntil(t, "run until Ctrl-C", "--orchd", base, "--port", "0")
	if !strings.Contains(out, `report`) || !strings.Contains(out, `not registered: agent already registered: id "report" is taken by`) ||
		!strings.Contains(out, "orchd agents remove ID") {
		t.Errorf("registering taken ids:\n%s", out)
	}

	out = runUntil(t, "run until Ctrl-C", "--orchd", "http://127.0.0.1:1", "--port", "0")
	for _, want := range []string{"no orchd answers at http://127.0.0.1:1", `curl -s -X POST http://127.0.0.1:1/v1/agents -H 'Content-Type: application/json' -d '{"id": "legacy", "url": "http://127.0.0.1:`, "  agents:\n    - {id: report, url: \"http://127.0.0.1:"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
