package mcpserver_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/orchd/orchd/internal/orchdtest"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/mcpserver"
	"github.com/orchd/orchd/registry"
)

// rawClient speaks 2026-07-28 to /mcp over plain HTTP, one request at a
// time, for what go-sdk's client has no call for: a tools/call answered
// with a task, the Tasks extension's methods, the steering extension's.
type rawClient struct {
	t    *testing.T
	url  string
	exts []string
	ids  atomic.Int64
	// wildcard accepts application/* rather than naming
	// application/json, and orchd then leaves its own methods to the
	// SDK's route (ownmethods.go).
	wildcard bool
}

// rpcError is a JSON-RPC error answer.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Message) }

// newRaw returns a client of the orchd at base declaring the extensions
// exts and form elicitation on every request.
func newRaw(t *testing.T, base string, exts ...string) *rawClient {
	return &rawClient{t: t, url: base + mcpserver.Path, exts: exts}
}

// call sends method with params, name in the Mcp-Name header (none when
// empty), and decodes the result into out; it returns the JSON-RPC error
// of an error answer.
func (c *rawClient) call(method, name string, params map[string]any, out any) *rpcError {
	c.t.Helper()
	exts := map[string]any{}
	for _, e := range c.exts {
		exts[e] = map[string]any{}
	}
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw-test-client", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": map[string]any{"extensions": exts, "elicitation": map[string]any{"form": map[string]any{}}},
	}
	id := c.ids.Add(1)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		c.t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.wildcard {
		req.Header.Set("Accept", "application/*, text/event-stream")
	}
	req.Header.Set("MCP-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var msg struct {
		ID     int64           `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	found := false
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() && !found {
			data, ok := strings.CutPrefix(sc.Text(), "data: ")
			if !ok {
				continue
			}
			if err := json.Unmarshal([]byte(data), &msg); err == nil && msg.ID == id && (msg.Result != nil || msg.Error != nil) {
				found = true
			}
		}
	} else if err := json.NewDecoder(resp.Body).Decode(&msg); err == nil && msg.ID == id {
		found = true
	}
	if !found {
		c.t.Fatalf("%s: HTTP %d, no answer with id %d", method, resp.StatusCode, id)
	}
	if msg.Error != nil {
		return msg.Error
	}
	if out != nil {
		if err := json.Unmarshal(msg.Result, out); err != nil {
			c.t.Fatalf("%s: result %s: %v", method, msg.Result, err)
		}
	}
	return nil
}

// mustCall is call failing the test on an error answer.
func (c *rawClient) mustCall(method, name string, params map[string]any, out any) {
	c.t.Helper()
	if err := c.call(method, name, params, out); err != nil {
		c.t.Fatalf("%s %v: %v", method, params, err)
	}
}

// task is what the tests read of tasks/get.
type task struct {
	ResultType    string `json:"resultType"`
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	InputRequests map[string]struct {
		Method string `json:"method"`
		Params struct {
			Mode    string `json:"mode"`
			Message string `json:"message"`
		} `json:"params"`
	} `json:"inputRequests"`
	Result *struct {
		IsError bool `json:"isError"`
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"result"`
	Meta map[string]json.RawMessage `json:"_meta"`
}

// isWorking reports whether tk's delegation is WORKING, which its status
// does not tell from SUBMITTED.
func isWorking(tk task) bool {
	var meta struct {
		State string `json:"state"`
	}
	_ = json.Unmarshal(tk.Meta[mcpserver.ExtSteering], &meta)
	return meta.State == "working"
}

// startTask calls orchd_delegate with args as a task and returns its id.
func (c *rawClient) startTask(args map[string]any) string {
	c.t.Helper()
	var created task
	c.mustCall("tools/call", mcpserver.ToolDelegate, map[string]any{"name": mcpserver.ToolDelegate, "arguments": args}, &created)
	if created.ResultType != "task" || created.TaskID == "" || created.Status == "" {
		c.t.Fatalf("not a task: %+v", created)
	}
	return created.TaskID
}

// poll reads the task until done accepts it, for at most 20 s.
func (c *rawClient) poll(id string, done func(task) bool) task {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var tk task
		c.mustCall(mcpserver.MethodTaskGet, id, map[string]any{"taskId": id}, &tk)
		if done(tk) {
			return tk
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s stayed %+v", id, tk)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestTasks_DelegateBecomesATask(t *testing.T) {
	f := startFleet(t)
	c := newRaw(t, f.base, mcpserver.ExtTasks)
	id := c.startTask(map[string]any{"text": "say hello", "agent": "reply"})
	tk := c.poll(id, func(tk task) bool { return tk.Status != "working" })
	if tk.Status != "completed" || tk.ResultType != "complete" || tk.Result == nil || tk.Result.IsError ||
		len(tk.Result.Content) == 0 || !strings.Contains(tk.Result.Content[0].Text, "hello from the agent") {
		t.Fatalf("got %+v", tk)
	}
	// Without the extension the same call is an ordinary tool call.
	var res struct {
		ResultType string `json:"resultType"`
		IsError    bool   `json:"isError"`
	}
	newRaw(t, f.base).mustCall("tools/call", mcpserver.ToolDelegate, map[string]any{"name": mcpserver.ToolDelegate,
		"arguments": map[string]any{"text": "say hello", "agent": "reply"}}, &res)
	if res.ResultType != "complete" || res.IsError {
		t.Errorf("without the extension: %+v", res)
	}
	// A failed delegation is a completed task with a tool error.
	id = c.startTask(map[string]any{"text": "x", "agent": "fail"})
	tk = c.poll(id, func(tk task) bool { return tk.Status != "working" })
	if tk.Status != "completed" || tk.Result == nil || !tk.Result.IsError {
		t.Errorf("a failed delegation: %+v", tk)
	}
}

func TestTasks_InputAnsweredByUpdate(t *testing.T) {
	f := startFleet(t)
	c := newRaw(t, f.base, mcpserver.ExtTasks)
	id := c.startTask(map[string]any{"text": "count", "agent": "ask"})
	tk := c.poll(id, func(tk task) bool { return tk.Status == "input_required" })
	if len(tk.InputRequests) != 1 {
		t.Fatalf("input requests: %+v", tk)
	}
	var key string
	for k, r := range tk.InputRequests {
		key = k
		if r.Method != "elicitation/create" || r.Params.Mode != "form" || !strings.Contains(r.Params.Message, "which year?") {
			t.Errorf("the question: %+v", r)
		}
	}
	var ack struct {
		ResultType string `json:"resultType"`
		Meta       map[string]struct {
			Accepted []string `json:"accepted"`
			Ignored  []string `json:"ignored"`
		} `json:"_meta"`
	}
	answer := map[string]any{"action": "accept", "content": map[string]any{"answer": "2024"}}
	c.mustCall(mcpserver.MethodTaskUpdate, id, map[string]any{"taskId": id, "inputResponses": map[string]any{"input-999": answer}}, &ack)
	if got := ack.Meta[mcpserver.ExtSteering]; len(got.Accepted) != 0 || len(got.Ignored) != 1 {
		t.Errorf("an unknown key: %+v", ack)
	}
	c.mustCall(mcpserver.MethodTaskUpdate, id, map[string]any{"taskId": id, "inputResponses": map[string]any{key: answer}}, &ack)
	if got := ack.Meta[mcpserver.ExtSteering]; ack.ResultType != "complete" || len(got.Accepted) != 1 || got.Accepted[0] != key {
		t.Errorf("the answer: %+v", ack)
	}
	tk = c.poll(id, func(tk task) bool { return tk.Status == "completed" })
	if tk.Result == nil || !strings.Contains(tk.Result.Content[0].Text, "answered: 2024") {
		t.Fatalf("got %+v", tk)
	}
	// The same answer again is ignored: the request is resolved.
	c.mustCall(mcpserver.MethodTaskUpdate, id, map[string]any{"taskId": id, "inputResponses": map[string]any{key: answer}}, &ack)
	if got := ack.Meta[mcpserver.ExtSteering]; len(got.Ignored) != 1 {
		t.Errorf("a replayed answer: %+v", ack)
	}
	if n := len(f.asking.Messages()); n != 2 {
		t.Errorf("the agent got %d messages, want the work and one answer", n)
	}
}

func TestTasks_CancelCascades(t *testing.T) {
	f := startFleet(t)
	c := newRaw(t, f.base, mcpserver.ExtTasks)
	id := c.startTask(map[string]any{"text": "work", "agent": "steer"})
	c.poll(id, isWorking)
	c.mustCall(mcpserver.MethodTaskCancel, id, map[string]any{"taskId": id}, nil)
	c.poll(id, func(tk task) bool { return tk.Status == "cancelled" })
	// Cancelling an ended task is acknowledged.
	c.mustCall(mcpserver.MethodTaskCancel, id, map[string]any{"taskId": id}, nil)
}

func TestTasks_Refusals(t *testing.T) {
	f := startFleet(t)
	c := newRaw(t, f.base, mcpserver.ExtTasks)
	id := c.startTask(map[string]any{"text": "say hello", "agent": "reply"})
	for _, tc := range []struct {
		name    string
		client  *rawClient
		method  string
		header  string
		params  map[string]any
		code    int
		message string
	}{
		{"undeclared", newRaw(t, f.base), mcpserver.MethodTaskGet, id, map[string]any{"taskId": id}, -32021, mcpserver.ExtTasks},
		{"another task in Mcp-Name", c, mcpserver.MethodTaskGet, "other", map[string]any{"taskId": id}, -32020, "Mcp-Name"},
		{"unknown task", c, mcpserver.MethodTaskGet, "nope", map[string]any{"taskId": "nope"}, -32602, "not found"},
		{"unknown task update", c, mcpserver.MethodTaskUpdate, "nope", map[string]any{"taskId": "nope", "inputResponses": map[string]any{}}, -32602, "not found"},
		{"tasks/result", c, "tasks/result", id, map[string]any{"taskId": id}, -32601, ""},
		{"arguments", c, "tools/call", mcpserver.ToolDelegate, map[string]any{"name": mcpserver.ToolDelegate, "arguments": map[string]any{"txt": "x"}}, -32602, "txt"},
	} {
		err := tc.client.call(tc.method, tc.header, tc.params, nil)
		if err == nil || err.Code != tc.code || !strings.Contains(err.Message, tc.message) {
			t.Errorf("%s: %v, want %d naming %q", tc.name, err, tc.code, tc.message)
		}
	}
}

// receipt is what the tests read of a steering method's answer.
type receipt struct {
	Receipt struct {
		Control    string `json:"control"`
		TaskID     string `json:"taskId"`
		Generation int64  `json:"generation"`
		Duplicate  bool   `json:"duplicate"`
		Hops       []struct {
			Agent string `json:"agent"`
			Seq   int64  `json:"seq"`
		} `json:"hops"`
	} `json:"receipt"`
}

// hops lists r's hops as agent#seq.
func (r receipt) hops() string {
	var out []string
	for _, h := range r.Receipt.Hops {
		out = append(out, fmt.Sprintf("%s#%d", h.Agent, h.Seq))
	}
	return strings.Join(out, " ")
}

func TestSteeringExtension_ReceiptsAcrossTwoOrchds(t *testing.T) {
	steered := testagent.Start(t, testagent.Options{Name: "c", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	plain := testagent.Start(t, testagent.Options{Name: "d", Skill: "draft", Streaming: true}, testagent.Hang())
	b := orchdtest.Node(t, "b", []string{"research", "draft"}, registry.Spec{ID: "c", URL: steered.URL}, registry.Spec{ID: "d", URL: plain.URL})
	a := orchdtest.Node(t, "a", []string{"research", "draft"}, registry.Spec{ID: "b", URL: b})
	c := newRaw(t, a, mcpserver.ExtTasks, mcpserver.ExtSteering)

	id := c.startTask(map[string]any{"text": "survey", "skill": "research"})
	c.poll(id, isWorking)
	steer := func(method, msgID, text string) (receipt, *rpcError) {
		var r receipt
		err := c.call(method, id, map[string]any{"taskId": id, "messageId": msgID, "content": []any{map[string]any{"type": "text", "text": text}}}, &r)
		return r, err
	}
	r, err := steer(mcpserver.MethodSteer, "s-1", "narrow to 2025")
	if err != nil || r.hops() != "a#1 b#1 c#1" || r.Receipt.Duplicate || r.Receipt.TaskID != id || r.Receipt.Generation == 0 {
		t.Fatalf("steer: %v, %+v", err, r)
	}
	r, err = steer(mcpserver.MethodSteer, "s-1", "narrow to 2025")
	if err != nil || r.hops() != "a#1 b#1 c#1" || !r.Receipt.Duplicate {
		t.Fatalf("the steer again: %v, %+v", err, r)
	}
	r, err = steer(mcpserver.MethodInterrupt, "i-1", "stop")
	if err != nil || r.hops() != "a#2 b#2 c#2" || r.Receipt.Control != "interrupt" {
		t.Fatalf("interrupt: %v, %+v", err, r)
	}
	// Interrupted work waits for input: any Tasks client resumes it.
	tk := c.poll(id, func(tk task) bool { return tk.Status == "input_required" })
	for _, q := range tk.InputRequests {
		if !strings.Contains(q.Params.Message, "interrupted") {
			t.Errorf("the question of interrupted work: %q", q.Params.Message)
		}
	}
	var meta struct {
		Steerable bool `json:"steerable"`
		Requests  []struct {
			Kind  string `json:"kind"`
			State string `json:"state"`
		} `json:"requests"`
		Receipts []json.RawMessage `json:"receipts"`
	}
	if err := json.Unmarshal(tk.Meta[mcpserver.ExtSteering], &meta); err != nil {
		t.Fatal(err)
	}
	if !meta.Steerable || len(meta.Receipts) != 2 || len(meta.Requests) != 1 || meta.Requests[0].Kind != "interrupt" || meta.Requests[0].State != "blocked" {
		t.Errorf("steering state: %+v", meta)
	}
	if got := len(steered.Signals()); got != 2 {
		t.Errorf("the agent took %d signals, want 2", got)
	}

	// A chain through an agent that takes no steers refuses, named.
	id = c.startTask(map[string]any{"text": "draft it", "skill": "draft"})
	c.poll(id, isWorking)
	_, err = steer(mcpserver.MethodSteer, "s-2", "shorter")
	if err == nil || err.Code != -32011 || !strings.Contains(err.Message, "steer") {
		t.Fatalf("a steer to work that takes none: %v", err)
	}
	// Without the extension declared the method is refused, not dropped.
	err = newRaw(t, a, mcpserver.ExtTasks).call(mcpserver.MethodSteer, id, map[string]any{"taskId": id, "messageId": "s-3"}, nil)
	if err == nil || err.Code != -32021 {
		t.Fatalf("undeclared: %v", err)
	}
}

func TestMRTR_RequestStateIsGoodOnce(t *testing.T) {
	f := startFleet(t)
	c := newRaw(t, f.base)
	args := map[string]any{"text": "count", "agent": "ask"}
	type result struct {
		ResultType    string                     `json:"resultType"`
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
		IsError       bool                       `json:"isError"`
		Content       []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	var asked result
	c.mustCall("tools/call", mcpserver.ToolDelegate, map[string]any{"name": mcpserver.ToolDelegate, "arguments": args}, &asked)
	if asked.ResultType != "input_required" || len(asked.InputRequests) != 1 || asked.RequestState == "" {
		t.Fatalf("got %+v", asked)
	}
	var key string
	for k := range asked.InputRequests {
		key = k
	}
	retry := func(state string, answer string) result {
		var r result
		c.mustCall("tools/call", mcpserver.ToolDelegate, map[string]any{"name": mcpserver.ToolDelegate, "arguments": args,
			"requestState": state, "inputResponses": map[string]any{key: map[string]any{"action": "accept", "content": map[string]any{"answer": answer}}}}, &r)
		return r
	}
	// An altered state is refused, and nothing reaches the agent.
	altered := []byte(asked.RequestState)
	altered[len(altered)/3] ^= 1
	if r := retry(string(altered), "1999"); !r.IsError || !strings.Contains(r.Content[0].Text, "requestState") {
		t.Errorf("an altered state: %+v", r)
	}
	if r := retry(asked.RequestState, "2024"); r.IsError || !strings.Contains(r.Content[0].Text, "answered: 2024") {
		t.Fatalf("the answer: %+v", r)
	}
	// The same state again is refused: the question was answered.
	if r := retry(asked.RequestState, "2025"); !r.IsError || !strings.Contains(r.Content[0].Text, "used already") {
		t.Errorf("a replayed state: %+v", r)
	}
	// Other arguments with the state are refused too.
	args["text"] = "something else"
	if r := retry(asked.RequestState, "2026"); !r.IsError || !strings.Contains(r.Content[0].Text, "requestState") {
		t.Errorf("the state with other arguments: %+v", r)
	}
	if n := len(f.asking.Messages()); n != 2 {
		t.Errorf("the agent got %d messages, want the work and one answer", n)
	}
}

// TestOwnMethods_AnswerAsTheSDKRouteDoes: orchd answers its own methods
// without go-sdk (ownmethods.go), and through go-sdk for a request that
// does not name application/json: both answer alike, results and
// refusals.
func TestOwnMethods_AnswerAsTheSDKRouteDoes(t *testing.T) {
	f := startFleet(t)
	own := newRaw(t, f.base, mcpserver.ExtTasks, mcpserver.ExtSteering)
	sdk := newRaw(t, f.base, mcpserver.ExtTasks, mcpserver.ExtSteering)
	sdk.wildcard = true
	done := own.startTask(map[string]any{"text": "say hello", "agent": "reply"})
	own.poll(done, func(tk task) bool { return tk.Status == "completed" })
	asking := own.startTask(map[string]any{"text": "count", "agent": "ask"})
	own.poll(asking, func(tk task) bool { return tk.Status == "input_required" })
	working := own.startTask(map[string]any{"text": "work", "agent": "steer"})
	own.poll(working, isWorking)
	undeclared := newRaw(t, f.base)
	undeclaredSDK := newRaw(t, f.base)
	undeclaredSDK.wildcard = true
	for _, tc := range []struct {
		name        string
		own, sdk    *rawClient
		method, hdr string
		params      map[string]any
	}{
		{"a completed task", own, sdk, mcpserver.MethodTaskGet, done, map[string]any{"taskId": done}},
		{"a task asking", own, sdk, mcpserver.MethodTaskGet, asking, map[string]any{"taskId": asking}},
		{"a working task", own, sdk, mcpserver.MethodTaskGet, working, map[string]any{"taskId": working}},
		{"an unknown task", own, sdk, mcpserver.MethodTaskGet, "nope", map[string]any{"taskId": "nope"}},
		{"another task in Mcp-Name", own, sdk, mcpserver.MethodTaskGet, "other", map[string]any{"taskId": done}},
		{"undeclared", undeclared, undeclaredSDK, mcpserver.MethodTaskGet, done, map[string]any{"taskId": done}},
		{"cancel an ended task", own, sdk, mcpserver.MethodTaskCancel, done, map[string]any{"taskId": done}},
		{"update with no open request", own, sdk, mcpserver.MethodTaskUpdate, done, map[string]any{"taskId": done, "inputResponses": map[string]any{"input-1": map[string]any{"action": "accept"}}}},
		{"steer an ended task", own, sdk, mcpserver.MethodSteer, done, map[string]any{"taskId": done, "messageId": "m-1", "content": []any{map[string]any{"type": "text", "text": "x"}}}},
		{"steer without a message id", own, sdk, mcpserver.MethodSteer, done, map[string]any{"taskId": done}},
	} {
		var a, b json.RawMessage
		errA := tc.own.call(tc.method, tc.hdr, maps.Clone(tc.params), &a)
		errB := tc.sdk.call(tc.method, tc.hdr, maps.Clone(tc.params), &b)
		if diff := cmp.Diff(errB, errA); diff != "" {
			t.Errorf("%s: the errors differ (-sdk +own):\n%s", tc.name, diff)
		}
		var va, vb any
		_ = json.Unmarshal(a, &va)
		_ = json.Unmarshal(b, &vb)
		if diff := cmp.Diff(vb, va); diff != "" {
			t.Errorf("%s: the results differ (-sdk +own):\n%s", tc.name, diff)
		}
	}
}
