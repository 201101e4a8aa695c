package mcpserver_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/orchd/orchd/internal/orchdtest"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/mcpserver"
	"github.com/orchd/orchd/orchestrator"
	"github.com/orchd/orchd/registry"
)

// TestDelegate_OverTheRunningLimit fills an orchd that runs one
// delegation at most with work that waits for input: orchd_delegate is
// then a tool error naming the limit, and as a task a JSON-RPC error
// (-32000) naming it, and the agent hears of neither.
func TestDelegate_OverTheRunningLimit(t *testing.T) {
	ask := testagent.Start(t, testagent.Options{Name: "asker", Skill: "ask"}, testagent.Ask())
	cfg, err := orchestrator.LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Delegation.Self, cfg.Delegation.MaxRunning = "mcp-limits", 1
	cfg.Agents = []registry.Spec{{ID: "ask", URL: ask.URL}}
	base := orchdtest.Start(t, cfg)
	cs := connect(t, base, versions[0], nil)
	var st mcpserver.Status
	if res := call(t, cs, mcpserver.ToolDelegate, map[string]any{"text": "ask me", "agent": "ask"}, &st); res.IsError || st.State != "input_required" {
		t.Fatalf("the first: isError %v, %+v, %q", res.IsError, st, textOf(res))
	}
	res := call(t, cs, mcpserver.ToolDelegate, map[string]any{"text": "ask me", "agent": "ask"}, nil)
	if !res.IsError || !strings.Contains(textOf(res), "delegation.maxRunning") || !strings.Contains(textOf(res), "resource exhausted") {
		t.Errorf("over the limit: isError %v, %q; want a tool error naming delegation.maxRunning", res.IsError, textOf(res))
	}
	e := newRaw(t, base, mcpserver.ExtTasks).call("tools/call", mcpserver.ToolDelegate,
		map[string]any{"name": mcpserver.ToolDelegate, "arguments": map[string]any{"text": "ask me", "agent": "ask"}}, nil)
	var data struct{ Code string }
	if e == nil || e.Code != -32000 || !strings.Contains(e.Message, "delegation.maxRunning") || json.Unmarshal(e.Data, &data) != nil || data.Code != "resource_exhausted" {
		t.Errorf("over the limit, as a task: %+v", e)
	}
	if n := len(ask.Messages()); n != 1 {
		t.Errorf("the agent got %d messages, want 1: refused work reached it", n)
	}
}
