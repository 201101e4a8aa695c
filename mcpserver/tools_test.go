package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/orchdtest"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/mcpserver"
	"github.com/orchd/orchd/orchestrator"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// versions are the protocol versions the tests speak: 2026-07-28, with
// no sessions, and the newest with sessions, whose clients older SDKs and
// most hosts still are.
var versions = []string{"2026-07-28", "2025-11-25"}

// fleet is an orchd with one agent of each behaviour the tests use.
type fleet struct {
	base   string
	steer  *testagent.Agent
	asking *testagent.Agent
}

// startFleet runs the agents and an orchd that knows them.
func startFleet(t *testing.T) fleet {
	t.Helper()
	reply := testagent.Start(t, testagent.Options{Name: "replier", Skill: "reply"}, testagent.Reply("hello from the agent"))
	ask := testagent.Start(t, testagent.Options{Name: "asker", Skill: "ask"}, testagent.Ask())
	steer := testagent.Start(t, testagent.Options{Name: "steered", Skill: "steer", Steering: true, Streaming: true}, testagent.Steerable())
	fail := testagent.Start(t, testagent.Options{Name: "failer", Skill: "fail"}, testagent.Failing("no such thing"))
	base := orchdtest.Node(t, "mcp-node", nil,
		registry.Spec{ID: "reply", URL: reply.URL}, registry.Spec{ID: "ask", URL: ask.URL},
		registry.Spec{ID: "steer", URL: steer.URL}, registry.Spec{ID: "fail", URL: fail.URL})
	return fleet{base: base, steer: steer, asking: ask}
}

// connect opens an MCP client session to the orchd at base speaking
// version; opts may be nil.
func connect(t *testing.T, base, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "orchd-test-client", Version: "1.2.3"}, opts)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + mcpserver.Path, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect (%s): %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("the session speaks %s, not %s", got, version)
	}
	return cs
}

// call calls tool with args and decodes its structured content into out
// (nil: none), failing the test on a protocol error.
func call(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	if out != nil && res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s: structured content %s: %v", tool, b, err)
		}
	}
	return res
}

// get reads url, failing the test unless it answers 200.
func get(t *testing.T, url string) []byte {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s (%v)", url, resp.StatusCode, b, err)
	}
	return b
}

// textOf joins the text content of res.
func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestTools_ListedWithSchemasAndHints(t *testing.T) {
	f := startFleet(t)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, f.base, v, nil)
			res, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]*mcp.Tool{}
			for _, tool := range res.Tools {
				got[tool.Name] = tool
			}
			for _, name := range []string{mcpserver.ToolDelegate, mcpserver.ToolStatus, mcpserver.ToolWait, mcpserver.ToolReply,
				mcpserver.ToolSteer, mcpserver.ToolInterrupt, mcpserver.ToolCancel, mcpserver.ToolAgents} {
				tool := got[name]
				if tool == nil {
					t.Fatalf("tool %s not listed; got %v", name, got)
				}
				if tool.Description == "" || tool.InputSchema == nil {
					t.Errorf("%s: description %q, input schema %v", name, tool.Description, tool.InputSchema)
				}
			}
			if a := got[mcpserver.ToolStatus].Annotations; a == nil || !a.ReadOnlyHint {
				t.Errorf("orchd_status is not read-only: %+v", a)
			}
			if a := got[mcpserver.ToolCancel].Annotations; a == nil || a.DestructiveHint == nil || !*a.DestructiveHint {
				t.Errorf("orchd_cancel is not destructive: %+v", a)
			}
		})
	}
}

func TestDelegate_ReturnsTheAnswer(t *testing.T) {
	f := startFleet(t)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, f.base, v, nil)
			var st mcpserver.Status
			res := call(t, cs, mcpserver.ToolDelegate, map[string]any{"text": "say hello", "skill": "reply"}, &st)
			if res.IsError || st.State != "completed" || st.Message != "hello from the agent" || st.Agent != "reply" || st.Delegation == "" {
				t.Fatalf("got %+v, %q", st, textOf(res))
			}
			if !strings.Contains(textOf(res), "hello from the agent") {
				t.Errorf("the text does not carry the answer: %q", textOf(res))
			}
			var again mcpserver.Status
			call(t, cs, mcpserver.ToolStatus, map[string]any{"delegation": st.Delegation}, &again)
			if again.State != "completed" || again.Delegation != st.Delegation {
				t.Errorf("status: %+v", again)
			}
			// The record and the console say the work came over MCP, and
			// from which client.
			var rec delegation.Record
			if body := get(t, f.base+"/v1/delegations/"+st.Delegation); json.Unmarshal(body, &rec) != nil || rec.Via == nil ||
				*rec.Via != (delegation.Via{Front: "mcp", Client: "orchd-test-client 1.2.3"}) {
				t.Errorf("the record: %s", body)
			}
			if page := get(t, f.base+"/ui/delegations/"+st.Delegation); !bytes.Contains(page, []byte("came over <span id=\"via\">mcp from orchd-test-client 1.2.3</span>")) {
				t.Errorf("the console's page does not say where the work came from:\n%s", page)
			}
		})
	}
}

func TestDelegate_FailedWorkIsAToolError(t *testing.T) {
	f := startFleet(t)
	cs := connect(t, f.base, versions[0], nil)
	var st mcpserver.Status
	res := call(t, cs, mcpserver.ToolDelegate, map[string]any{"text": "do it", "agent": "fail"}, &st)
	if !res.IsError || st.State != "failed" {
		t.Fatalf("got isError %v, %+v", res.IsError, st)
	}
	res = call(t, cs, mcpserver.ToolDelegate, map[string]any{"text": "do it", "agent": "nobody"}, nil)
	if !res.IsError || !strings.Contains(textOf(res), "nobody") {
		t.Fatalf("an unknown agent: isError %v, %q", res.IsError, textOf(res))
	}
}

func TestDelegate_QuestionAnsweredByElicitation(t *testing.T) {
	f := startFleet(t)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			var mu sync.Mutex
			var asked []string
			cs := connect(t, f.base, v, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, req.Params.Message)
					mu.Unlock()
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "2024"}}, nil
				},
			})
			var st mcpserver.Status
			res := call(t, cs, mcpserver.ToolDelegate, map[string]any{"text": "count", "skill": "ask"}, &st)
			if st.State != "completed" || st.Message != "answered: 2024" {
				t.Fatalf("got %+v, %q", st, textOf(res))
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 1 || !strings.Contains(asked[0], "which year?") {
				t.Errorf("the user was asked %q", asked)
			}
			if len(st.Requests) != 1 || st.Requests[0].State != "resolved" || st.Requests[0].Resolution != "answered" {
				t.Errorf("requests: %+v", st.Requests)
			}
		})
	}
}

func TestDelegate_QuestionWithoutElicitationReturnsTheHandle(t *testing.T) {
	f := startFleet(t)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			cs := connect(t, f.base, v, nil)
			var st mcpserver.Status
			res := call(t, cs, mcpserver.ToolDelegate, map[string]any{"text": "count", "skill": "ask"}, &st)
			if res.IsError || st.State != "input_required" || st.Message != "which year?" || !strings.Contains(textOf(res), "orchd_reply") {
				t.Fatalf("got %+v, %q", st, textOf(res))
			}
			if len(st.Requests) != 1 || st.Requests[0].State != "blocked" || st.Requests[0].Kind != "input" {
				t.Errorf("requests: %+v", st.Requests)
			}
			call(t, cs, mcpserver.ToolReply, map[string]any{"delegation": st.Delegation, "text": "1999"}, nil)
			var out mcpserver.WaitOutput
			after := st.Seq
			for out.Status.State != "completed" {
				call(t, cs, mcpserver.ToolWait, map[string]any{"delegation": st.Delegation, "afterSeq": after, "waitSeconds": 10}, &out)
				for _, e := range out.Events {
					if e.Seq <= after {
						t.Fatalf("event %d repeated after %d", e.Seq, after)
					}
					after = e.Seq
				}
				if len(out.Events) == 0 {
					t.Fatalf("no events in 10s: %+v", out.Status)
				}
			}
			if out.Status.Message != "answered: 1999" {
				t.Errorf("got %+v", out.Status)
			}
		})
	}
}

func TestSteer_ReceiptAndOrder(t *testing.T) {
	f := startFleet(t)
	cs := connect(t, f.base, versions[0], nil)
	var st mcpserver.Status
	call(t, cs, mcpserver.ToolDelegate, map[string]any{"text": "work", "agent": "steer", "waitSeconds": 0}, &st)
	if st.State != "working" && st.State != "submitted" {
		t.Fatalf("got %+v", st)
	}
	if !st.Steerable || !st.Interruptible {
		t.Errorf("steering state: %+v", st)
	}
	// Only WORKING work takes signals.
	for st.State != "working" {
		var out mcpserver.WaitOutput
		call(t, cs, mcpserver.ToolWait, map[string]any{"delegation": st.Delegation, "afterSeq": st.Seq, "waitSeconds": 5}, &out)
		st = out.Status
	}
	var r steering.Receipt
	res := call(t, cs, mcpserver.ToolSteer, map[string]any{"delegation": st.Delegation, "text": "only recent", "idempotencyKey": "k1"}, &r)
	if res.IsError || r.Control != steering.Steer || len(r.Hops) != 2 || r.Hops[1].Seq != 1 || r.Duplicate {
		t.Fatalf("receipt %+v, %q", r, textOf(res))
	}
	var again steering.Receipt
	call(t, cs, mcpserver.ToolSteer, map[string]any{"delegation": st.Delegation, "text": "only recent", "idempotencyKey": "k1"}, &again)
	if !again.Duplicate || again.Hops[1].Seq != 1 {
		t.Errorf("a retried steer: %+v", again)
	}
	call(t, cs, mcpserver.ToolSteer, map[string]any{"delegation": st.Delegation, "text": "finish"}, &r)
	var out mcpserver.WaitOutput
	deadline := time.Now().Add(20 * time.Second)
	for out.Status.State != "completed" && time.Now().Before(deadline) {
		call(t, cs, mcpserver.ToolWait, map[string]any{"delegation": st.Delegation, "afterSeq": out.Status.Seq, "waitSeconds": 5}, &out)
	}
	if out.Status.Message != "finished: only recent, finish" {
		t.Fatalf("got %+v", out.Status)
	}
	if got := len(f.steer.Signals()); got != 2 {
		t.Errorf("the agent took %d signals, want 2 (the retry delivered once)", got)
	}
}

func TestDelegate_IdempotencyKeyStartsOnce(t *testing.T) {
	f := startFleet(t)
	cs := connect(t, f.base, versions[0], nil)
	args := map[string]any{"text": "count", "skill": "ask", "idempotencyKey": "job-7"}
	var first, second mcpserver.Status
	call(t, cs, mcpserver.ToolDelegate, args, &first)
	call(t, cs, mcpserver.ToolDelegate, args, &second)
	if first.Delegation == "" || first.Delegation != second.Delegation {
		t.Fatalf("two calls with one key: %s and %s", first.Delegation, second.Delegation)
	}
	if n := len(f.asking.Messages()); n != 1 {
		t.Errorf("the agent got the work %d times", n)
	}
	var other mcpserver.Status
	call(t, cs, mcpserver.ToolDelegate, map[string]any{"text": "count", "skill": "ask", "idempotencyKey": "job-8"}, &other)
	if other.Delegation == first.Delegation {
		t.Errorf("another key named the same delegation")
	}
}

func TestTools_BadArguments(t *testing.T) {
	f := startFleet(t)
	cs := connect(t, f.base, versions[0], nil)
	for _, tc := range []struct {
		tool string
		args map[string]any
		want string
	}{
		{mcpserver.ToolDelegate, map[string]any{"skill": "reply"}, "text"},
		{mcpserver.ToolDelegate, map[string]any{"text": "x", "waitSeconds": 99}, "waitSeconds"},
		{mcpserver.ToolDelegate, map[string]any{"text": "x", "deadline": "tomorrow"}, "deadline"},
		{mcpserver.ToolStatus, map[string]any{"delegation": "no-such-id"}, "not found"},
		{mcpserver.ToolSteer, map[string]any{"delegation": "no-such-id", "text": "x"}, "not found"},
		{mcpserver.ToolWait, map[string]any{"delegation": "x", "afterSeq": -1}, "afterSeq"},
	} {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		var msg string
		switch {
		case err != nil:
			msg = err.Error()
		case res.IsError:
			msg = textOf(res)
		default:
			t.Errorf("%s %v: answered %q", tc.tool, tc.args, textOf(res))
			continue
		}
		if !strings.Contains(msg, tc.want) {
			t.Errorf("%s %v: %q does not name %q", tc.tool, tc.args, msg, tc.want)
		}
	}
	// Steering work that ended is refused, naming why.
	var done mcpserver.Status
	call(t, cs, mcpserver.ToolDelegate, map[string]any{"text": "hi", "agent": "reply"}, &done)
	res := call(t, cs, mcpserver.ToolSteer, map[string]any{"delegation": done.Delegation, "text": "faster"}, nil)
	if !res.IsError || !strings.Contains(textOf(res), "ended") {
		t.Errorf("steering ended work: %q", textOf(res))
	}
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "orchd_nothing"}); err == nil || !strings.Contains(err.Error(), "orchd_nothing") {
		t.Errorf("an unknown tool: %v", err)
	}
}

func TestDelegate_ProgressWhileWaiting(t *testing.T) {
	hang := testagent.Start(t, testagent.Options{Name: "hanger", Skill: "hang", Streaming: true}, testagent.Hang())
	cfg, err := orchestrator.LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MCP.Heartbeat = orchestrator.Duration(time.Second)
	cfg.Agents = []registry.Spec{{ID: "hang", URL: hang.URL}}
	base := orchdtest.Start(t, cfg)
	for _, v := range versions {
		t.Run(v, func(t *testing.T) {
			var mu sync.Mutex
			var got []*mcp.ProgressNotificationParams
			cs := connect(t, base, v, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
				mu.Lock()
				got = append(got, req.Params)
				mu.Unlock()
			}})
			params := &mcp.CallToolParams{Name: mcpserver.ToolDelegate, Arguments: map[string]any{"text": "wait", "agent": "hang", "waitSeconds": 3}}
			params.SetProgressToken("p-1")
			start := time.Now()
			res, err := cs.CallTool(t.Context(), params)
			if err != nil {
				t.Fatal(err)
			}
			if took := time.Since(start); took < 3*time.Second {
				t.Errorf("answered after %s, before waitSeconds", took)
			}
			if !strings.Contains(textOf(res), "Still working") {
				t.Errorf("the answer: %q", textOf(res))
			}
			mu.Lock()
			defer mu.Unlock()
			beats := 0
			for i, p := range got {
				if p.ProgressToken != "p-1" || (i > 0 && p.Progress <= got[i-1].Progress) {
					t.Errorf("notification %d: %+v after %+v", i, p, got[max(i-1, 0)])
				}
				if strings.Contains(p.Message, "still waiting") {
					beats++
				}
			}
			// 3 s of waiting with a 1 s heartbeat; a busy machine may lose one.
			if beats < 1 || beats > 3 {
				t.Errorf("%d heartbeats in 3s: %+v", beats, got)
			}
		})
	}
}

func TestDelegate_ReissuedAfterADroppedCall(t *testing.T) {
	hang := testagent.Start(t, testagent.Options{Name: "hanger", Skill: "hang", Streaming: true}, testagent.Hang())
	base := orchdtest.Node(t, "mcp-node", nil, registry.Spec{ID: "hang", URL: hang.URL})
	cs := connect(t, base, versions[0], nil)
	args := map[string]any{"text": "wait", "agent": "hang", "idempotencyKey": "once", "waitSeconds": 20}
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: mcpserver.ToolDelegate, Arguments: args}); err == nil {
		t.Fatal("the dropped call answered")
	}
	args["waitSeconds"] = 0
	var st mcpserver.Status
	call(t, cs, mcpserver.ToolDelegate, args, &st)
	var list struct {
		Delegations []struct {
			ID string `json:"id"`
		} `json:"delegations"`
	}
	resp, err := http.Get(base + "/v1/delegations")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	if len(list.Delegations) != 1 || list.Delegations[0].ID != st.Delegation {
		t.Errorf("delegations %+v, want only %s", list.Delegations, st.Delegation)
	}
	if n := len(hang.Messages()); n != 1 {
		t.Errorf("the agent got the work %d times", n)
	}
}

func TestLimits_OversizedAndDeepParams(t *testing.T) {
	f := startFleet(t)
	cs := connect(t, f.base, versions[0], nil)
	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserver.ToolDelegate,
		Arguments: map[string]any{"text": strings.Repeat("x", 100<<10), "agent": "reply"}})
	if err == nil || !strings.Contains(err.Error(), "http.maxAPIBodyBytes") {
		t.Errorf("100 KiB of arguments: %v", err)
	}
	var deep any = "x"
	for range 100 {
		deep = []any{deep}
	}
	_, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: mcpserver.ToolDelegate,
		Arguments: map[string]any{"text": "x", "agent": "reply", "requires": deep}})
	if err == nil || !strings.Contains(err.Error(), "http.maxJSONDepth") {
		t.Errorf("arguments 100 deep: %v", err)
	}
	// The session still works.
	var st mcpserver.Status
	call(t, cs, mcpserver.ToolDelegate, map[string]any{"text": "hi", "agent": "reply"}, &st)
	if st.State != "completed" {
		t.Errorf("after the refusals: %+v", st)
	}
}

func TestAgents_ListsWhatEachCanDo(t *testing.T) {
	f := startFleet(t)
	cs := connect(t, f.base, versions[0], nil)
	var out mcpserver.AgentsOutput
	res := call(t, cs, mcpserver.ToolAgents, nil, &out)
	if res.IsError || len(out.Agents) != 4 {
		t.Fatalf("got %+v", out)
	}
	byID := map[string]mcpserver.AgentSummary{}
	for _, a := range out.Agents {
		byID[a.ID] = a
	}
	steer, reply := byID["steer"], byID["reply"]
	if !steer.Steerable || !steer.Interruptible || !slices.Equal(steer.Skills, []string{"steer"}) || !steer.Healthy || !slices.Contains(steer.Versions, "1.0") {
		t.Errorf("the steerable agent: %+v", steer)
	}
	if reply.Steerable || reply.Interruptible || reply.Name != "replier" {
		t.Errorf("the replying agent: %+v", reply)
	}
}
