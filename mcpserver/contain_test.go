package mcpserver_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/orchd/orchd/mcpserver"
)

// TestDelegate_ContainedAgentIsAToolError checks that work for an agent an
// operator contained is refused over MCP, naming the containment, on
// every protocol version.
func TestDelegate_ContainedAgentIsAToolError(t *testing.T) {
	f := startFleet(t)
	resp, err := http.Post(f.base+"/v1/agents/reply:contain", "application/json", strings.NewReader(`{"reason": "answers wrongly"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("contain = %d", resp.StatusCode)
	}
	for _, v := range versions {
		cs := connect(t, f.base, v, nil)
		res := call(t, cs, mcpserver.ToolDelegate, map[string]any{"text": "hello", "agent": "reply"}, nil)
		if text := textOf(res); !res.IsError || !strings.Contains(text, "contained by anonymous at") || !strings.Contains(text, "answers wrongly") {
			t.Errorf("%s: isError %v, %q; want refused naming the containment", v, res.IsError, text)
		}
	}
}
