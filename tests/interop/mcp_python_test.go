package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/orchdtest"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/mcpserver"
	"github.com/orchd/orchd/orchestrator"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// mcpStep is one line mcp_client.py prints: what one step saw.
type mcpStep struct {
	Step     string         `json:"step"`
	Error    string         `json:"error"`
	Code     int            `json:"code"`
	Protocol string         `json:"protocol"`
	Server   *mcpServerInfo `json:"server"`
	Tools    []string       `json:"tools"`
	// IsError, Structured and Text are a tool's result.
	IsError    bool             `json:"isError"`
	Structured json.RawMessage  `json:"structured"`
	Text       string           `json:"text"`
	Progress   []mcpProgress    `json:"progress"`
	Asked      []mcpElicitation `json:"asked"`
	// Started, Receipt, Retried and Ended are the steer step's.
	Started *mcpserver.Status `json:"started"`
	Receipt *steering.Receipt `json:"receipt"`
	Retried *steering.Receipt `json:"retried"`
	Ended   *mcpserver.Status `json:"ended"`
	// Task, Created, Got and Final are the task steps' (--tasks): whether
	// the call became a task, its CreateTaskResult, and the task as
	// tasks/get read it before the cancel and last.
	Task    bool                        `json:"task"`
	Created *mcpserver.CreateTaskResult `json:"created"`
	Got     *mcpserver.DetailedTask     `json:"got"`
	Final   *mcpserver.DetailedTask     `json:"final"`
	Wire    []mcpWire                   `json:"wire"`
}

// mcpServerInfo is the server's name and version as the client got them.
type mcpServerInfo struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// mcpProgress is one notifications/progress the client received.
type mcpProgress struct {
	Progress float64  `json:"progress"`
	Total    *float64 `json:"total"`
	Message  string   `json:"message"`
}

// mcpElicitation is one question the client's user was asked.
type mcpElicitation struct {
	RequestID any            `json:"requestId"`
	Mode      string         `json:"mode"`
	Message   string         `json:"message"`
	Schema    map[string]any `json:"schema"`
}

// mcpWire is one HTTP request the client sent.
type mcpWire struct {
	HTTP      string `json:"http"`
	Method    string `json:"method"`
	Name      string `json:"name"`
	Protocol  string `json:"protocol"`
	MCPMethod string `json:"mcpMethod"`
	MCPName   string `json:"mcpName"`
	Session   bool   `json:"session"`
	// RequestState and InputResponses are a tools/call's MRTR fields;
	// InputResponses are also the keys a tasks/update answered.
	RequestState   bool     `json:"requestState"`
	InputResponses []string `json:"inputResponses"`
	ProgressToken  bool     `json:"progressToken"`
	// Extensions are those a tools/call declared in its client
	// capabilities; TaskID is the task a tasks/* request named.
	Extensions []string `json:"extensions"`
	TaskID     string   `json:"taskId"`
	Status     int      `json:"status"`
}

// status decodes the structured content of a step's tool result as a
// Status.
func (s mcpStep) status(t *testing.T) mcpserver.Status {
	t.Helper()
	var st mcpserver.Status
	if err := json.Unmarshal(s.Structured, &st); err != nil {
		t.Fatalf("%s: structured content %s: %v", s.Step, s.Structured, err)
	}
	return st
}

// posts keeps the POSTs of w with JSON-RPC method m.
func posts(w []mcpWire, m string) []mcpWire {
	var out []mcpWire
	for _, e := range w {
		if e.HTTP == "POST" && e.Method == m {
			out = append(out, e)
		}
	}
	return out
}

// runMCPClient runs mcp_client.py with the interpreter py against the MCP
// endpoint at url, with the flags args and "--answer 2024", and returns its
// steps by name.
func runMCPClient(t *testing.T, py, url string, args ...string) map[string]mcpStep {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	argv := append([]string{"mcp_client.py", url, "--answer", "2024"}, args...)
	cmd := exec.CommandContext(ctx, py, argv...)
	cmd.Dir = pythonDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("mcp_client.py %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, out, stderr.String())
	}
	t.Logf("mcp_client.py %v saw:\n%s", args, out)
	steps := map[string]mcpStep{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var s mcpStep
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			t.Fatalf("mcp_client.py printed %q: %v", sc.Text(), err)
		}
		steps[s.Step] = s
	}
	if stderr.Len() > 0 {
		t.Logf("stderr:\n%s", stderr.String())
	}
	return steps
}

// TestMCPPythonClient drives orchd's MCP endpoint with an independent
// client: the official MCP Python SDK from PyPI, mcp 2.3.0 (with
// mcp-types 2.3.0, httpx2 2.17.0 and anyio 4.16.0, pinned in
// peers/python/requirements.txt). mcp_client.py runs against an orchd
// fronting four a2a-go agents, once in the SDK's "auto" mode, which
// speaks 2026-07-28 without sessions, and once in its "legacy" mode, which
// speaks 2025-11-25 in a session. Each run lists the tools, delegates and
// gets the answer, receives progress while work takes a while, answers an
// agent's question through its elicitation callback (an InputRequiredResult
// answered by calling again at 2026-07-28; elicitation/create in a
// session), and steers running work, getting receipts that name both hops.
func TestMCPPythonClient(t *testing.T) {
	py := pythonPeers(t)
	reply := testagent.Start(t, testagent.Options{Name: "go-reply", Skill: "reply"}, testagent.Reply("hello from the agent"))
	work := testagent.Start(t, testagent.Options{Name: "go-work", Skill: "work", Streaming: true}, testagent.Work(3*time.Second))
	ask := testagent.Start(t, testagent.Options{Name: "go-ask", Skill: "ask"}, testagent.Ask())
	steer := testagent.Start(t, testagent.Options{Name: "go-steer", Skill: "steer", Steering: true, Streaming: true}, testagent.Steerable())
	cfg, err := orchestrator.LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Delegation.Self = "orchd"
	// A heartbeat every second: the work agent's three silent seconds
	// show in the progress the client receives.
	cfg.MCP.Heartbeat = orchestrator.Duration(time.Second)
	cfg.Agents = []registry.Spec{{ID: "go-reply", URL: reply.URL}, {ID: "go-work", URL: work.URL},
		{ID: "go-ask", URL: ask.URL}, {ID: "go-steer", URL: steer.URL}}
	url := orchdtest.Start(t, cfg) + mcpserver.Path

	for _, tc := range []struct {
		mode, protocol string
	}{
		{mode: "auto", protocol: "2026-07-28"},
		{mode: "legacy", protocol: "2025-11-25"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			steps := runMCPClient(t, py, url, "--mode", tc.mode)
			modern := tc.protocol >= "2026-07-28"
			for _, name := range []string{"connect", "tools", "reply", "progress", "ask", "steer"} {
				s, ok := steps[name]
				if !ok {
					t.Fatalf("mcp_client.py printed no %q step", name)
				}
				if s.Error != "" {
					t.Errorf("%s: %s (code %d)", name, s.Error, s.Code)
				}
				if name == "connect" {
					continue
				}
				// Every request at 2026-07-28 stands alone; in a session
				// every request after initialize names the session.
				for _, w := range s.Wire {
					if w.Session == modern || w.Protocol != tc.protocol {
						t.Errorf("%s: %s %s with protocol %q, session %v; want %s, session %v", name, w.HTTP, w.Method, w.Protocol, w.Session, tc.protocol, !modern)
					}
				}
			}
			if t.Failed() {
				t.FailNow()
			}

			c := steps["connect"]
			if c.Protocol != tc.protocol || c.Server == nil || c.Server.Name != "orchd" {
				t.Errorf("connect: protocol %q, server %+v; want %s with orchd", c.Protocol, c.Server, tc.protocol)
			}
			first := "initialize"
			if modern {
				first = "server/discover"
			}
			if len(c.Wire) == 0 || c.Wire[0].Method != first {
				t.Errorf("connect: sent %+v, want %s first", c.Wire, first)
			}

			want := []string{mcpserver.ToolAgents, mcpserver.ToolCancel, mcpserver.ToolDelegate, mcpserver.ToolInterrupt,
				mcpserver.ToolReply, mcpserver.ToolStatus, mcpserver.ToolSteer, mcpserver.ToolWait}
			if diff := cmp.Diff(want, steps["tools"].Tools); diff != "" {
				t.Errorf("tools/list (-want +got):\n%s", diff)
			}

			r := steps["reply"]
			if st := r.status(t); r.IsError || st.State != "completed" || st.Message != "hello from the agent" || st.Agent != "go-reply" {
				t.Errorf("delegate to go-reply: isError %v, %+v; want completed with its answer", r.IsError, st)
			}
			if !strings.Contains(r.Text, "hello from the agent") {
				t.Errorf("delegate to go-reply: text %q does not carry the answer", r.Text)
			}

			p := steps["progress"]
			if st := p.status(t); p.IsError || st.State != "completed" || len(st.Artifacts) != 1 || st.Artifacts[0].Text != "part one, part two" {
				t.Errorf("delegate to go-work: isError %v, %+v; want completed with its artifact", p.IsError, st)
			}
			var events, beats int
			for i, n := range p.Progress {
				if i > 0 && n.Progress <= p.Progress[i-1].Progress {
					t.Errorf("progress %v after %v: want it to increase (%+v)", n.Progress, p.Progress[i-1].Progress, p.Progress)
				}
				switch {
				case strings.HasPrefix(n.Message, "event "):
					events++
				case strings.HasPrefix(n.Message, "still waiting on delegation "):
					beats++
				}
			}
			// The artifact's second chunk and the completion come after the
			// agent's three seconds; a heartbeat comes every second.
			if events < 2 || beats < 1 || events+beats != len(p.Progress) {
				t.Errorf("progress %+v: want at least 2 events and a heartbeat, nothing else", p.Progress)
			}
			if calls := posts(p.Wire, "tools/call"); len(calls) != 1 || !calls[0].ProgressToken {
				t.Errorf("delegate to go-work sent %+v, want one tools/call with a progress token", calls)
			}

			a := steps["ask"]
			st := a.status(t)
			if a.IsError || st.State != "completed" || st.Message != "answered: 2024" {
				t.Errorf("delegate to go-ask: isError %v, %+v; want completed with answered: 2024", a.IsError, st)
			}
			if len(st.Requests) != 1 || st.Requests[0].State != "resolved" || st.Requests[0].Resolution != "answered" {
				t.Errorf("delegate to go-ask: requests %+v, want the question resolved as answered", st.Requests)
			}
			if len(a.Asked) != 1 || a.Asked[0].Mode != "form" || !strings.Contains(a.Asked[0].Message, "which year?") ||
				!slices.Equal(anyStrings(a.Asked[0].Schema["required"]), []string{"answer"}) {
				t.Fatalf("the user was asked %+v, want one form asking which year, requiring answer", a.Asked)
			}
			calls := posts(a.Wire, "tools/call")
			answers := posts(a.Wire, "response")
			if modern {
				// MRTR: the call again with the answer keyed as orchd asked,
				// and the request state; no request from the server.
				key, _ := a.Asked[0].RequestID.(string)
				if len(calls) != 2 || calls[0].RequestState || !calls[1].RequestState ||
					!slices.Equal(calls[1].InputResponses, []string{key}) || len(answers) != 0 {
					t.Errorf("delegate to go-ask sent %+v, want tools/call, then tools/call with requestState and inputResponses[%q]", a.Wire, key)
				}
			} else if len(calls) != 1 || calls[0].RequestState || len(answers) != 1 || answers[0].Status/100 != 2 {
				// elicitation/create on the call's stream, answered by a POST.
				t.Errorf("delegate to go-ask sent %+v, want one tools/call and the answer to elicitation/create", a.Wire)
			}

			s := steps["steer"]
			if s.Started == nil || (s.Started.State != "working" && s.Started.State != "submitted") || !s.Started.Steerable {
				t.Fatalf("delegate to go-steer: %+v, want the handle of steerable work", s.Started)
			}
			hops := []steering.Hop{{Agent: "orchd", Seq: 1}, {Agent: "go-steer", Seq: 1}}
			if r := s.Receipt; r == nil || r.Control != steering.Steer || !slices.Equal(r.Hops, hops) || r.Duplicate {
				t.Errorf("steer: receipt %+v, want hops %v", r, hops)
			}
			if r := s.Retried; r == nil || !r.Duplicate || !slices.Equal(r.Hops, hops) || r.MessageID != s.Receipt.MessageID {
				t.Errorf("steer again with the key: receipt %+v, want the first receipt marked duplicate", r)
			}
			if e := s.Ended; e == nil || e.State != "completed" || e.Message != "finished: go left, finish" {
				t.Errorf("the steered work ended %+v, want completed after both steers", e)
			}
		})
	}
}

// anyStrings is v, a JSON array, as strings.
func anyStrings(v any) []string {
	var out []string
	if a, ok := v.([]any); ok {
		for _, x := range a {
			s, _ := x.(string)
			out = append(out, s)
		}
	}
	return out
}
