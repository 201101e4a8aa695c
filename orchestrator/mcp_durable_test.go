package orchestrator

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/mcpserver"
)

// TestDurable_MCPTaskAcrossKillNine kills the daemon with SIGKILL while
// work delegated over MCP runs: after the restart, delegating again with
// the same idempotency key attaches to the same delegation without
// sending the work twice, and tasks/get follows it to COMPLETED.
func TestDurable_MCPTaskAcrossKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a daemon as a process and kills it")
	}
	t.Parallel()
	release := make(chan struct{})
	agent, c := childWithGatedAgent(t, release, "")
	args := map[string]any{"text": "go", "skill": "work", "idempotencyKey": "report-42", "waitSeconds": 0}
	first := mcpDelegate(t, c.base, args)
	if first.State != "working" && first.State != "submitted" {
		t.Fatalf("before the kill: %+v", first)
	}
	agent.WaitCalls(t, "SendStreamingMessage", 1)

	c.kill()
	c.start()

	again := mcpDelegate(t, c.base, args)
	if again.Delegation != first.Delegation {
		t.Fatalf("the same key after the restart named %s, not %s", again.Delegation, first.Delegation)
	}
	if n := len(agent.Messages()); n != 1 {
		t.Errorf("the agent got the work %d times", n)
	}
	close(release)
	var status string
	testwait.Until(t, 30*time.Second, "the task completes", func() bool {
		status = taskStatus(t, c.base, first.Delegation)
		return status == "completed"
	})
}

// mcpDelegate calls orchd_delegate at the daemon at base with a client
// of its own, speaking 2026-07-28.
func mcpDelegate(t *testing.T, base string, args map[string]any) mcpserver.Status {
	t.Helper()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "durable-test", Version: "1"}, nil).Connect(t.Context(),
		&mcp.StreamableClientTransport{Endpoint: base + mcpserver.Path, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserver.ToolDelegate, Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	var st mcpserver.Status
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &st); err != nil || st.Delegation == "" {
		t.Fatalf("orchd_delegate: %s (%v)", b, err)
	}
	return st
}

// taskStatus reads the status of task id with tasks/get, "" when the
// daemon does not answer.
func taskStatus(t *testing.T, base, id string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": mcpserver.MethodTaskGet, "params": map[string]any{"taskId": id,
		"_meta": map[string]any{"io.modelcontextprotocol/protocolVersion": "2026-07-28",
			"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": map[string]any{mcpserver.ExtTasks: map[string]any{}}}}}})
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+mcpserver.Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", mcpserver.MethodTaskGet)
	req.Header.Set("Mcp-Name", id)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	text := buf.String()
	if i := strings.Index(text, "data: "); i >= 0 { // an event stream
		text = strings.TrimSpace(text[i+len("data: "):])
	}
	var msg struct {
		Result struct {
			Status string `json:"status"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(text), &msg); err != nil {
		t.Logf("tasks/get: %s", buf.String())
	}
	return msg.Result.Status
}
