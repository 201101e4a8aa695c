package interop

import (
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/orchdtest"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/mcpserver"
	"github.com/orchd/orchd/registry"
)

// pythonTasksDir holds the MCP Tasks client's venv: requirements.txt
// (fastmcp-tasks and mcp, pinned) and install.sh. The client itself is
// peers/python/mcp_client.py, run with --tasks.
const pythonTasksDir = "peers/python-tasks"

// pythonTasksPeers installs the Tasks client's pinned packages (once per
// test process) and returns the venv's interpreter.
func pythonTasksPeers(t *testing.T) string {
	t.Helper()
	requireTool(t, "python3")
	setup(t, filepath.Join(pythonTasksDir, "install.sh"))
	py, err := filepath.Abs(filepath.Join(pythonTasksDir, ".venv", "bin", "python"))
	if err != nil {
		t.Fatal(err)
	}
	return py
}

// sequence is the JSON-RPC methods of the POSTs in w, in order, one
// space apart.
func sequence(w []mcpWire) string {
	var ms []string
	for _, e := range w {
		if e.HTTP == "POST" {
			ms = append(ms, e.Method)
		}
	}
	return strings.Join(ms, " ")
}

// TestMCPPythonTasksClient drives orchd's task path with an independent
// client of the MCP Tasks extension (io.modelcontextprotocol/tasks,
// SEP-2663): the TasksClientExtension of fastmcp-tasks 4.1.4, on the MCP
// Python SDK mcp 2.3.0 (pinned in peers/python-tasks/requirements.txt).
// mcp_client.py --tasks declares the extension on its calls; orchd
// answers a delegation with a CreateTaskResult and the client follows it
// with tasks/get to its result, answers the agent's question with
// tasks/update, and cancels steerable work with tasks/cancel, which
// reaches the agent.
func TestMCPPythonTasksClient(t *testing.T) {
	py := pythonTasksPeers(t)
	reply := testagent.Start(t, testagent.Options{Name: "go-reply", Skill: "reply"}, testagent.Reply("hello from the agent"))
	ask := testagent.Start(t, testagent.Options{Name: "go-ask", Skill: "ask"}, testagent.Ask())
	steer := testagent.Start(t, testagent.Options{Name: "go-steer", Skill: "steer", Steering: true, Streaming: true}, testagent.Steerable())
	base := orchdtest.Node(t, "orchd", nil, registry.Spec{ID: "go-reply", URL: reply.URL},
		registry.Spec{ID: "go-ask", URL: ask.URL}, registry.Spec{ID: "go-steer", URL: steer.URL})

	steps := runMCPClient(t, py, base+mcpserver.Path, "--tasks")
	tasks := map[string]string{} // step -> the task it followed
	for _, name := range []string{"connect", "tools", "taskReply", "taskAsk", "taskCancel"} {
		s, ok := steps[name]
		if !ok {
			t.Fatalf("mcp_client.py printed no %q step", name)
		}
		if s.Error != "" {
			t.Errorf("%s: %s (code %d)", name, s.Error, s.Code)
		}
		if name == "connect" {
			if s.Protocol != "2026-07-28" || s.Server == nil || s.Server.Name != "orchd" {
				t.Errorf("connect: protocol %q, server %+v; want 2026-07-28 with orchd", s.Protocol, s.Server)
			}
			continue
		}
		// Every request stands alone at 2026-07-28 and orchd took it;
		// every delegation declares the extension; every tasks/* request
		// names one task.
		for _, w := range s.Wire {
			if w.Session || w.Protocol != "2026-07-28" || w.Status != http.StatusOK {
				t.Errorf("%s: %s %s with protocol %q, session %v answered %d; want 2026-07-28, no session, 200", name, w.HTTP, w.Method, w.Protocol, w.Session, w.Status)
			}
			switch {
			case w.Method == "tools/call" && w.Name == mcpserver.ToolDelegate && !slices.Equal(w.Extensions, []string{mcpserver.ExtTasks}):
				t.Errorf("%s: tools/call of %s declared extensions %v, want [%s]", name, w.Name, w.Extensions, mcpserver.ExtTasks)
			case strings.HasPrefix(w.Method, "tasks/"):
				if id := tasks[name]; id != "" && w.TaskID != id {
					t.Errorf("%s: %s names task %q after %q", name, w.Method, w.TaskID, id)
				}
				tasks[name] = w.TaskID
				// The extension says a client MUST send Mcp-Name: <taskId>
				// with tasks/*; fastmcp-tasks 4.1.4 sends none (its request
				// classes leave the SDK's name_param unset), and orchd
				// checks the header only when it is there
				// (docs/interop.md).
				if w.MCPName != "" {
					t.Errorf("%s: %s sent Mcp-Name %q: fastmcp-tasks now sends it; say so in docs/interop.md", name, w.Method, w.MCPName)
				}
			}
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	// The reply agent's answer: a task from the start, followed with
	// tasks/get until it completed with the answer.
	r := steps["taskReply"]
	st := r.status(t)
	if r.IsError || st.State != "completed" || st.Message != "hello from the agent" || st.Agent != "go-reply" {
		t.Errorf("taskReply: isError %v, %+v; want completed with the agent's answer", r.IsError, st)
	}
	if seq := sequence(r.Wire); !regexp.MustCompile(`^tools/call( tasks/get)+$`).MatchString(seq) || tasks["taskReply"] != st.Delegation {
		t.Errorf("taskReply sent %q for task %q; want tools/call, then tasks/get of delegation %q", seq, tasks["taskReply"], st.Delegation)
	}

	// The ask agent's question: asked through the extension's
	// inputRequests, answered with one tasks/update under orchd's key,
	// completed with the answer.
	a := steps["taskAsk"]
	st = a.status(t)
	if a.IsError || st.State != "completed" || st.Message != "answered: 2024" {
		t.Errorf("taskAsk: isError %v, %+v; want completed with answered: 2024", a.IsError, st)
	}
	if len(st.Requests) != 1 || st.Requests[0].State != "resolved" || st.Requests[0].Resolution != "answered" {
		t.Fatalf("taskAsk: requests %+v, want the question resolved as answered", st.Requests)
	}
	if len(a.Asked) != 1 || a.Asked[0].Mode != "form" || !strings.Contains(a.Asked[0].Message, "which year?") {
		t.Errorf("taskAsk: the user was asked %+v, want one form asking which year", a.Asked)
	}
	seq := sequence(a.Wire)
	updates := posts(a.Wire, mcpserver.MethodTaskUpdate)
	if !regexp.MustCompile(`^tools/call( tasks/get)+ tasks/update( tasks/get)+$`).MatchString(seq) || tasks["taskAsk"] != st.Delegation ||
		len(updates) != 1 || !slices.Equal(updates[0].InputResponses, []string{st.Requests[0].ID}) {
		t.Errorf("taskAsk sent %q for task %q, updates %+v; want tools/call, tasks/get, one tasks/update answering %q, tasks/get of delegation %q",
			seq, tasks["taskAsk"], updates, st.Requests[0].ID, st.Delegation)
	}
	if got := ask.Messages(); len(got) != 2 || testagent.Text(got[1]) != "2024" {
		t.Errorf("the ask agent received %d messages, want the task and the answer 2024", len(got))
	}

	// Steerable work: a task read, cancelled with tasks/cancel, read
	// until it ended cancelled; the agent's task was canceled.
	c := steps["taskCancel"]
	if !c.Task || c.Created == nil || c.Got == nil || c.Final == nil {
		t.Fatalf("taskCancel: task %v, created %+v, got %+v, final %+v; want a task read before and after the cancel", c.Task, c.Created, c.Got, c.Final)
	}
	id := c.Created.TaskID
	if c.Created.ResultType != "task" || c.Created.Status != "working" || c.Got.Status != "working" || c.Final.Status != "cancelled" || c.Final.TaskID != id {
		t.Errorf("taskCancel: created %s %s, read %s, ended %s (task %s); want task working, working, cancelled", c.Created.ResultType, c.Created.Status, c.Got.Status, c.Final.Status, c.Final.TaskID)
	}
	if seq := sequence(c.Wire); !regexp.MustCompile(`^tools/call tasks/get tasks/cancel( tasks/get)+$`).MatchString(seq) || tasks["taskCancel"] != id {
		t.Errorf("taskCancel sent %q for task %q; want tools/call, tasks/get, tasks/cancel, tasks/get of %q", seq, tasks["taskCancel"], id)
	}
	if rec := waitDelegation(t, base, id, func(r delegation.Record) bool { return r.State.Terminal() }); rec.State != a2a.TaskStateCanceled {
		t.Errorf("delegation %s ended %s, want CANCELED", id, rec.State)
	}
	if n := steer.Cancels(); n < 1 {
		t.Errorf("the steer agent was asked to cancel %d times, want at least once", n)
	}
}
