package orchestrator

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testcmp"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// orchdNode starts a daemon named self that routes skill to agents.
func orchdNode(t testing.TB, self, skill string, agents ...registry.Spec) string {
	t.Helper()
	return startDaemon(t, nodeConfig(t, self, skill, agents...))
}

// nodeConfig is the configuration of an orchd node of a chain: its name,
// the skill it offers and its agents, on the memory store.
func nodeConfig(t testing.TB, self, skill string, agents ...registry.Spec) Config {
	t.Helper()
	cfg := loadDefaults(t)
	cfg.Delegation.Self = self
	cfg.Delegation.PollInterval = Duration(20 * time.Millisecond)
	cfg.Agent.Name = "orchd " + self
	cfg.Agent.Skills = []SkillConfig{{ID: skill, Tags: []string{"orchestrator"}}}
	cfg.Agents = agents
	return cfg
}

func TestChain_ABC(t *testing.T) {
	t.Parallel()
	c := testagent.Start(t, testagent.Options{Name: "C", Skill: "research", Streaming: true, Extensions: chainReader}, testagent.Work(20*time.Millisecond))
	b := orchdNode(t, "b", "research", registry.Spec{ID: "c", URL: c.URL})
	a := orchdNode(t, "a", "research", registry.Spec{ID: "b", URL: b})

	var rec delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "survey steering", "skill": "research", "requires": ["streaming"]}`, &rec); code != 201 {
		t.Fatalf("delegate at A = %d %+v", code, rec)
	}
	done := waitFor(t, a, rec.ID, a2a.TaskStateCompleted)
	if done.Downstream.Agent != "b" {
		t.Errorf("A delegated to %q, want b", done.Downstream.Agent)
	}
	if done.Result == nil {
		t.Errorf("A's record has no result: %+v", done)
	} else if got := testagent.Text(done.Result); got != "done" {
		t.Errorf("A's result %q, want done", got)
	}
	if len(done.Artifacts) != 1 || len(done.Artifacts[0].Parts) != 2 {
		t.Errorf("C's artifact did not reach A whole: %+v", done.Artifacts)
	}
	msgs := c.Messages()
	if len(msgs) != 1 {
		t.Fatalf("C received %d messages", len(msgs))
	}
	chain, ok, err := delegation.ChainFrom(msgs[0].Metadata)
	if err != nil || !ok {
		t.Fatalf("chain at C: sent %v, %v", ok, err)
	}
	want := delegation.Chain{Path: []string{"a", "b"}, Depth: 2, Skill: "research", Requires: []string{"streaming"}, RootTask: rec.ID}
	if diff := cmp.Diff(want, chain, testcmp.Only[delegation.Chain]("Path", "Depth", "Skill", "Requires", "RootTask")); diff != "" {
		t.Errorf("chain at C (-want +got):\n%s", diff)
	}
	if testagent.Text(msgs[0]) != "survey steering" {
		t.Errorf("C got %q", testagent.Text(msgs[0]))
	}
}

// chainReader declares the delegation extension on a test agent's card:
// orchd sends the chain context only to agents that declare it.
var chainReader = []a2a.AgentExtension{{URI: delegation.ExtensionURI}}

func TestChain_CycleRefused(t *testing.T) {
	t.Parallel()
	// B routes research back to A: A → B → A must be refused.
	var aURL string
	b := orchdNode(t, "b", "research")
	a := orchdNode(t, "a", "research", registry.Spec{ID: "b", URL: b})
	aURL = a
	if code := call(t, "POST", b+"/v1/agents", `{"id": "a", "url": "`+aURL+`"}`, nil); code != 201 {
		t.Fatalf("register A at B = %d", code)
	}
	var rec delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "loop", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("delegate at A = %d", code)
	}
	failed := waitFor(t, a, rec.ID, a2a.TaskStateRejected)
	for _, want := range []string{"hop b", "TASK_STATE_REJECTED", "orchd a (a) is already in the delegation path orchd a (a) → orchd b (b)"} {
		if !strings.Contains(failed.Error, want) {
			t.Errorf("error %q does not say %q", failed.Error, want)
		}
	}
}

func TestA2AEndpoint_CardVersionAndExtensions(t *testing.T) {
	t.Parallel()
	base := orchdNode(t, "solo", "research")

	resp, err := http.Get(base + "/.well-known/agent-card.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != 200 {
		t.Fatalf("card: %d", resp.StatusCode)
	}
	if etag == "" || !strings.Contains(resp.Header.Get("Cache-Control"), "max-age=") {
		t.Fatalf("card: no ETag or no max-age in headers %v", resp.Header)
	}
	p, err := capability.Build(body, capability.Options{})
	if err != nil {
		t.Fatal(err)
	}
	type profile struct {
		Name                  string
		Versions              []string
		Protocols             int
		Delegation, Streaming bool
		Skill                 string
	}
	want := profile{Name: "orchd solo", Versions: []string{"0.3", "1.0"}, Protocols: 4, Delegation: true, Streaming: true, Skill: "research"}
	got := profile{Name: p.Name, Versions: p.Versions(""), Protocols: len(p.Protocols), Delegation: p.HasExtension(delegation.ExtensionURI),
		Streaming: p.Supports(capability.Streaming)}
	if len(p.Skills) > 0 {
		got.Skill = p.Skills[0].ID
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("orchd's own profile (-want +got):\n%s", diff)
	}
	req, _ := http.NewRequest("GET", base+"/.well-known/agent-card.json", nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("revalidation = %d, want 304", resp.StatusCode)
	}

	rpc := func(path, method, version, extensions string) (int, http.Header) {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": map[string]any{"id": "no-such-task"}})
		req, _ := http.NewRequest("POST", base+path, bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/json")
		if version != "" {
			req.Header.Set("A2A-Version", version)
		}
		if extensions != "" {
			req.Header.Set("A2A-Extensions", extensions)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Error *struct {
				Code int `json:"code"`
			} `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if out.Error == nil {
			return 0, resp.Header
		}
		return out.Error.Code, resp.Header
	}
	tests := []struct {
		name, path, method, version string
		want                        int
	}{
		{"1.0 on the 1.0 interface", pathJSONRPC, "GetTask", "1.0", -32001},
		{"9.9 on the 1.0 interface", pathJSONRPC, "GetTask", "9.9", -32009},
		{"no version is served as the interface's", pathJSONRPC, "GetTask", "", -32001},
		{"0.3 on the 1.0 interface", pathJSONRPC, "GetTask", "0.3", -32009},
		{"0.3 client on the 0.3 interface", pathJSONRPC03, "tasks/get", "", -32001},
		{"1.0 on the 0.3 interface", pathJSONRPC03, "tasks/get", "1.0", -32009},
	}
	for _, tt := range tests {
		if code, _ := rpc(tt.path, tt.method, tt.version, ""); code != tt.want {
			t.Errorf("%s: error code %d, want %d", tt.name, code, tt.want)
		}
	}
	_, h := rpc(pathJSONRPC, "GetTask", "1.0", "urn:unknown, "+delegation.ExtensionURI)
	if got := h.Get("A2A-Extensions"); got != delegation.ExtensionURI {
		t.Errorf("echoed extensions = %q, want only the supported one", got)
	}
}

func TestChain_InputAndCancelCrossHops(t *testing.T) {
	t.Parallel()
	asker := testagent.Start(t, testagent.Options{Name: "Asker", Skill: "ask", Streaming: true}, testagent.Ask())
	slow := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true}, testagent.Hang())
	b := orchdNode(t, "b", "ask", registry.Spec{ID: "asker", URL: asker.URL}, registry.Spec{ID: "slow", URL: slow.URL})
	a := orchdNode(t, "a", "ask", registry.Spec{ID: "b", URL: b})

	// C asks a question; it reaches the caller at A, and the answer goes
	// back down to the same task at C.
	var rec delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "when?", "skill": "ask"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waiting := waitFor(t, a, rec.ID, a2a.TaskStateInputRequired)
	if waiting.Downstream.Agent != "b" || waiting.Downstream.TaskID == "" {
		t.Errorf("record while waiting: %+v", waiting)
	}
	if code := call(t, "POST", a+"/v1/delegations/"+rec.ID+"/messages", `{"text": "2026"}`, &rec); code != 200 {
		t.Fatalf("input at A = %d", code)
	}
	done := waitFor(t, a, rec.ID, a2a.TaskStateCompleted)
	if done.Result == nil || testagent.Text(done.Result) != "answered: 2026" {
		t.Errorf("result at A = %+v", done.Result)
	}
	if msgs := asker.Messages(); len(msgs) != 2 {
		t.Errorf("C got %d messages, want the work and the answer", len(msgs))
	} else if msgs[1].TaskID == "" || testagent.Text(msgs[1]) != "2026" {
		t.Errorf("C got the answer %q on task %q, want 2026 on its task", testagent.Text(msgs[1]), msgs[1].TaskID)
	}

	// Cancel at A reaches C through B.
	b2 := orchdNode(t, "b2", "slow", registry.Spec{ID: "slow", URL: slow.URL})
	a2 := orchdNode(t, "a2", "slow", registry.Spec{ID: "b2", URL: b2})
	if code := call(t, "POST", a2+"/v1/delegations", `{"text": "forever", "skill": "slow"}`, &rec); code != 201 {
		t.Fatalf("delegate slow = %d", code)
	}
	waitFor(t, a2, rec.ID, a2a.TaskStateWorking)
	if code := call(t, "POST", a2+"/v1/delegations/"+rec.ID+":cancel", "", &rec); code != 200 || rec.State != a2a.TaskStateCanceled {
		t.Errorf("cancel at A = %d %s (%s)", code, rec.State, rec.Error)
	}
	testwait.Until(t, 10*time.Second, "C seeing the cancel", func() bool { return slow.Cancels() > 0 })
	if slow.Cancels() != 1 {
		t.Errorf("C saw %d cancels, want 1", slow.Cancels())
	}
}

// TestA2AEndpoint_MessageAnswersStayMessages checks that work an agent
// answers with a message is answered by orchd with a message too, over
// A2A 1.0 and 0.3, and creates no upstream task.
func TestA2AEndpoint_MessageAnswersStayMessages(t *testing.T) {
	t.Parallel()
	echo := testagent.Start(t, testagent.Options{Name: "Echo", Skill: "echo"}, testagent.Reply("pong"))
	base := orchdNode(t, "solo", "echo", registry.Spec{ID: "echo", URL: echo.URL})
	for _, v := range []string{"1.0", "0.3"} {
		card, err := (&agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}).Resolve(t.Context(), base, askDual())
		if err != nil {
			t.Fatal(err)
		}
		var ifaces []*a2a.AgentInterface
		for _, it := range card.SupportedInterfaces {
			if string(it.ProtocolVersion) == v && it.ProtocolBinding == a2a.TransportProtocolJSONRPC {
				ifaces = append(ifaces, it)
			}
		}
		card.SupportedInterfaces = ifaces
		c, err := a2aclient.NewFromCard(t.Context(), card, a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{}))
		if err != nil {
			t.Fatal(err)
		}
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("ping"))
		msg.Metadata = map[string]any{a2aserver.SkillMetadataKey: "echo"}
		res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg})
		if err != nil {
			t.Fatalf("A2A %s: %v", v, err)
		}
		m, ok := res.(*a2a.Message)
		if !ok {
			t.Errorf("A2A %s: answer %T, want the agent's message", v, res)
		} else if testagent.Text(m) != "pong" || m.TaskID != "" {
			t.Errorf("A2A %s: answer %q on task %q, want pong and no task", v, testagent.Text(m), m.TaskID)
		}
	}
}

// TestA2AEndpoint_CancelAnswersTheCanceledTask cancels tasks orchd mirrors
// over A2A: the answer is the CANCELED task, never an error, however the
// cancel and the mirror's own ending interleave.
func TestA2AEndpoint_CancelAnswersTheCanceledTask(t *testing.T) {
	t.Parallel()
	slow := testagent.Start(t, testagent.Options{Name: "Slow", Skill: "slow", Streaming: true}, testagent.Hang())
	base := orchdNode(t, "solo", "slow", registry.Spec{ID: "slow", URL: slow.URL})
	card, err := (&agentcard.Resolver{}).Resolve(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(t.Context(), card)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("forever"))
		msg.Metadata = map[string]any{a2aserver.SkillMetadataKey: "slow"}
		res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
		if err != nil {
			t.Fatal(err)
		}
		task, ok := res.(*a2a.Task)
		if !ok {
			t.Fatalf("send answered %T", res)
		}
		got, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID})
		if err != nil || got.Status.State != a2a.TaskStateCanceled {
			t.Fatalf("cancel %d: %v, task %+v", i, err, got)
		}
	}
}

// TestA2AEndpoint_RESTv03ErrorsForEveryClient checks the error bodies of
// orchd's 0.3 HTTP+JSON interface: a2a-go's google.rpc.Status for a2a-go's
// own client, plus the JSON-RPC code and error name other 0.3 clients read.
func TestA2AEndpoint_RESTv03ErrorsForEveryClient(t *testing.T) {
	t.Parallel()
	base := orchdNode(t, "solo", "none")
	resp, err := http.Get(base + pathREST03 + "/v1/tasks/no-such-task")
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Type    string `json:"type"`
		Error   struct {
			Code    int `json:"code"`
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	err = json.NewDecoder(resp.Body).Decode(&body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET unknown task: %d: %v", resp.StatusCode, err)
	}
	type notFound struct {
		Status, Code, ErrorCode int
		Type, Reason            string
	}
	got := notFound{Status: resp.StatusCode, Code: body.Code, ErrorCode: body.Error.Code, Type: body.Type}
	if len(body.Error.Details) > 0 {
		got.Reason = body.Error.Details[0].Reason
	}
	want := notFound{Status: http.StatusNotFound, Code: -32001, ErrorCode: http.StatusNotFound, Type: "TaskNotFoundError", Reason: "TASK_NOT_FOUND"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("GET unknown task (-want +got):\n%s", diff)
	}
	if body.Message == "" {
		t.Fatal("GET unknown task: no message")
	}

	// a2a-go's own 0.3 client still reads the error.
	card, err := (&agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}).Resolve(t.Context(), base, askDual())
	if err != nil {
		t.Fatal(err)
	}
	var rest []*a2a.AgentInterface
	for _, it := range card.SupportedInterfaces {
		if it.ProtocolVersion == "0.3" && it.ProtocolBinding == a2a.TransportProtocolHTTPJSON {
			rest = append(rest, it)
		}
	}
	card.SupportedInterfaces = rest
	c, err := a2aclient.NewFromCard(t.Context(), card, a2av0.WithRESTTransport(a2av0.RESTTransportConfig{}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: "no-such-task"}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("a2a-go's 0.3 REST client: %v, want ErrTaskNotFound", err)
	}
}
