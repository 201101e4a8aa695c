package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/orchdtest"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testcmp"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// pythonDir holds the Python peers: requirements.txt, install.sh, the
// agents and the client.
const pythonDir = "peers/python"

// pythonBehaviours are the agents agents.py starts, each registered with
// orchd as "py-" and the behaviour.
var pythonBehaviours = []string{"complete", "stream", "ask", "slow", "steer"}

// pythonPeers installs the pinned Python packages (once per test process)
// and returns the venv's interpreter.
func pythonPeers(t *testing.T) string {
	t.Helper()
	requireTool(t, "python3")
	setup(t, filepath.Join(pythonDir, "install.sh"))
	py, err := filepath.Abs(filepath.Join(pythonDir, ".venv", "bin", "python"))
	if err != nil {
		t.Fatal(err)
	}
	return py
}

// pythonAgents starts the five a2a-sdk agents and an orchd that knows them.
func pythonAgents(t *testing.T) (orchd string, peers map[string]string) {
	t.Helper()
	py := pythonPeers(t)
	peers = startPeers(t, pythonDir, py, "agents.py")
	var specs []registry.Spec
	for _, b := range pythonBehaviours {
		if peers[b] == "" {
			t.Fatalf("agents.py listed no %q agent: %v", b, peers)
		}
		specs = append(specs, registry.Spec{ID: "py-" + b, URL: peers[b]})
	}
	return orchdtest.Node(t, "orchd", nil, specs...), peers
}

// pyReceived is what a Python agent recorded of each call that reached it
// (GET /received).
type pyReceived struct {
	Method     string   `json:"method"`
	TaskID     string   `json:"taskId"`
	Text       string   `json:"text"`
	Control    string   `json:"control"`
	Version    string   `json:"version"`
	Extensions []string `json:"extensions"`
}

// pyReceivedBy reads what a Python agent recorded.
func pyReceivedBy(t *testing.T, peer string) []pyReceived {
	t.Helper()
	var out []pyReceived
	if code, msg := getJSON(t, peer+"/received", &out); code != http.StatusOK {
		t.Fatalf("%s/received: %d %s", peer, code, msg)
	}
	return out
}

// pyReceivedFor keeps the calls about one downstream task.
func pyReceivedFor(all []pyReceived, task a2a.TaskID) []pyReceived {
	var out []pyReceived
	for _, r := range all {
		if r.TaskID == string(task) {
			out = append(out, r)
		}
	}
	return out
}

// pyReceivedText keeps the calls whose message text is text.
func pyReceivedText(all []pyReceived, text string) []pyReceived {
	var out []pyReceived
	for _, r := range all {
		if r.Text == text {
			out = append(out, r)
		}
	}
	return out
}

// pyPeerTask reads a task straight from a Python agent over A2A 1.0
// JSON-RPC, returning its state.
func pyPeerTask(t *testing.T, rpcURL string, id a2a.TaskID) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": map[string]any{"id": id}})
	req, err := http.NewRequest(http.MethodPost, rpcURL, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("A2A-Version", "1.0")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Result *struct {
			Status struct {
				State string `json:"state"`
			} `json:"status"`
		} `json:"result"`
		Error *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("GetTask %s at %s: %v", id, rpcURL, err)
	}
	if out.Error != nil || out.Result == nil {
		t.Fatalf("GetTask %s at %s: %+v", id, rpcURL, out.Error)
	}
	return out.Result.Status.State
}

// TestPythonAgents runs orchd in front of the five a2a-sdk agents and
// checks discovery, decisions, delegation, input, cancel and steering.
func TestPythonAgents(t *testing.T) {
	orchd, peers := pythonAgents(t)

	t.Run("CardsAndProfiles", func(t *testing.T) {
		t.Parallel()
		type want struct {
			streaming bool
			protocols []string
			steering  capability.Steering
		}
		table := map[string]want{
			"py-complete": {protocols: []string{"0.3 JSONRPC", "1.0 JSONRPC"}},
			"py-stream":   {streaming: true, protocols: []string{"1.0 JSONRPC"}},
			"py-ask":      {protocols: []string{"1.0 JSONRPC"}},
			"py-slow":     {protocols: []string{"1.0 JSONRPC"}},
			"py-steer":    {streaming: true, protocols: []string{"1.0 JSONRPC"}, steering: capability.Steering{Steerable: true, Interruptible: true}},
		}
		for id, w := range table {
			var p capability.Profile
			if code, msg := getJSON(t, orchd+"/v1/agents/"+id, &p); code != http.StatusOK {
				t.Fatalf("profile %s: %d %s", id, code, msg)
			}
			behaviour := strings.TrimPrefix(id, "py-")
			want := capability.Profile{Name: id, CardFormat: "1.0", ClientCompatible: true, CardVersion: "1.0.0"}
			if diff := cmp.Diff(want, p, testcmp.Only[capability.Profile]("Name", "CardFormat", "ClientCompatible", "IncompatibleReason", "CardVersion")); diff != "" {
				t.Errorf("%s: profile (-want +got):\n%s", id, diff)
			}
			var protocols []string
			for _, pr := range p.Protocols {
				protocols = append(protocols, pr.Version+" "+pr.Binding)
				if pr.URL != peers[behaviour]+"/a2a/jsonrpc" {
					t.Errorf("%s: protocol %s %s at %s, want the peer's real port %s", id, pr.Version, pr.Binding, pr.URL, peers[behaviour])
				}
			}
			slices.Sort(protocols)
			if !slices.Equal(protocols, w.protocols) {
				t.Errorf("%s: protocols %v, want %v", id, protocols, w.protocols)
			}
			if p.Supports("streaming") != w.streaming {
				t.Errorf("%s: streaming %v, want %v", id, p.Supports("streaming"), w.streaming)
			}
			if diff := cmp.Diff(w.steering, p.Steering); diff != "" {
				t.Errorf("%s: steering (-want +got):\n%s", id, diff)
			}
			if p.Supports("steerable") != w.steering.Steerable || p.Supports(steering.URI) != w.steering.Steerable {
				t.Errorf("%s: capabilities steerable %v, %s %v; want both %v", id, p.Supports("steerable"), steering.URI, p.Supports(steering.URI), w.steering.Steerable)
			}
			if len(p.Skills) != 1 || p.Skills[0].ID != behaviour {
				t.Errorf("%s: skills %+v, want the one skill %q", id, p.Skills, behaviour)
			}
			if len(p.Warnings) > 0 {
				t.Errorf("%s: warnings %v", id, p.Warnings)
			}
		}
		// The SDK serves a weak ETag; a refresh revalidates against it and
		// keeps the card.
		var before, after struct {
			Digest   string `json:"digest"`
			ETag     string `json:"etag"`
			Healthy  bool   `json:"healthy"`
			Failures int    `json:"failures"`
		}
		getJSON(t, orchd+"/v1/agents/py-steer", &before)
		if code, msg := postJSON(t, orchd+"/v1/agents/py-steer:refresh", nil, &after); code != http.StatusOK {
			t.Fatalf("refresh: %d %s", code, msg)
		}
		if !strings.HasPrefix(before.ETag, `W/"`) {
			t.Errorf("the SDK's ETag %q is not weak", before.ETag)
		}
		kept := before
		kept.Healthy, kept.Failures = true, 0
		if diff := cmp.Diff(kept, after); diff != "" {
			t.Errorf("refresh, want the same card, healthy (-want +got):\n%s", diff)
		}
	})

	t.Run("Decisions", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			skill, protocol string
			requires        []string
			// reason is the refusal expected among the candidate's
			// reasons; empty means the delegation is accepted.
			reason string
		}{
			{skill: "complete", protocol: ">= 1.0, < 2.0"},
			{skill: "complete", protocol: "= 0.3"},
			{skill: "ask", protocol: "~> 1.0"},
			{skill: "stream", protocol: "= 0.3", reason: "protocol: speaks 1.0, the request needs = 0.3"},
			{skill: "slow", protocol: ">= 2.0", reason: "protocol: speaks 1.0, the request needs >= 2.0"},
			{skill: "slow", requires: []string{"steerable"}, reason: "lacks required capability steerable"},
			{skill: "stream", requires: []string{"interruptible"}, reason: "lacks required capability interruptible"},
			{skill: "steer", requires: []string{"steerable", "interruptible", "streaming"}},
		} {
			body := map[string]any{"text": "decide", "skill": tc.skill, "protocol": tc.protocol, "requires": tc.requires}
			code, rec, dec := tryDelegate(t, orchd, body)
			reasons := map[string][]string{}
			if dec != nil {
				for _, c := range dec.Candidates {
					reasons[c.Agent] = c.Reasons
				}
			}
			if tc.reason == "" {
				if code != http.StatusCreated || rec.Downstream.Agent != "py-"+tc.skill {
					t.Errorf("%v: %d to %q (reasons %v), want 201 to py-%s", body, code, rec.Downstream.Agent, reasons, tc.skill)
				}
				switch {
				case code != http.StatusCreated:
				case tc.skill == "complete":
					waitDelegation(t, orchd, rec.ID, inState(a2a.TaskStateCompleted))
				default:
					postJSON(t, orchd+"/v1/delegations/"+rec.ID+":cancel", nil, nil)
				}
				continue
			}
			if code != http.StatusUnprocessableEntity || !slices.Contains(reasons["py-"+tc.skill], tc.reason) {
				t.Errorf("%v: %d, reasons %v; want 422 refused with py-%s's reason %q", body, code, reasons, tc.skill, tc.reason)
			}
		}
		// The one agent that serves both versions is spoken to in 1.0, the
		// newest both sides speak, even when the request only asked that
		// it could speak 0.3.
		for _, r := range pyReceivedText(pyReceivedBy(t, peers["complete"]), "decide") {
			if r.Method != "SendMessage" || r.Version != "1.0" {
				t.Errorf("py-complete received %s with A2A-Version %q, want SendMessage in 1.0", r.Method, r.Version)
			}
		}
	})

	t.Run("Over03", func(t *testing.T) {
		t.Parallel()
		// py-complete also serves A2A 0.3 (the SDK's compatibility mode);
		// orchd speaks 1.0 to it when it may. To make orchd speak 0.3 to
		// the same SDK server, register a copy of its card that lists only
		// the 0.3 interface.
		var card map[string]any
		if code, msg := getJSON(t, peers["complete"]+"/.well-known/agent-card.json", &card); code != http.StatusOK {
			t.Fatalf("card: %d %s", code, msg)
		}
		var only03 []any
		for _, i := range card["supportedInterfaces"].([]any) {
			if i.(map[string]any)["protocolVersion"] == "0.3" {
				only03 = append(only03, i)
			}
		}
		card["supportedInterfaces"] = only03
		card["name"] = "py-complete-v03"
		raw, _ := json.Marshal(card)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(raw)
		}))
		t.Cleanup(srv.Close)
		var p capability.Profile
		if code, msg := postJSON(t, orchd+"/v1/agents", map[string]any{"url": srv.URL + "/card.json", "id": "py-complete-v03"}, &p); code != http.StatusCreated {
			t.Fatalf("register the 0.3 card: %d %s", code, msg)
		}
		if !p.ClientCompatible {
			t.Fatalf("the 0.3 agent is not compatible: %s", p.IncompatibleReason)
		}
		if len(p.Protocols) != 1 || p.Protocols[0].Version != "0.3" {
			t.Fatalf("profile protocols %+v, want one 0.3 protocol", p.Protocols)
		}
		rec := delegate(t, orchd, map[string]any{"text": "old wire", "agent": "py-complete-v03"})
		rec = waitDelegation(t, orchd, rec.ID, func(r delegation.Record) bool { return r.State.Terminal() })
		if got := artifactTexts(rec.Artifacts); rec.State != a2a.TaskStateCompleted || !slices.Equal(got, []string{"done: old wire"}) {
			t.Errorf("delegation %s (%s) with artifacts %q, want COMPLETED with [done: old wire]", rec.State, rec.Error, got)
		}
		calls := pyReceivedText(pyReceivedBy(t, peers["complete"]), "old wire")
		if len(calls) != 1 || calls[0].Version != "0.3" {
			t.Errorf("py-complete received %+v, want one message over 0.3", calls)
		}
	})

	t.Run("Complete", func(t *testing.T) {
		t.Parallel()
		rec := delegate(t, orchd, map[string]any{"text": "the report", "skill": "complete"})
		rec = waitDelegation(t, orchd, rec.ID, inState(a2a.TaskStateCompleted))
		if got := artifactTexts(rec.Artifacts); !slices.Equal(got, []string{"done: the report"}) {
			t.Errorf("artifacts %q, want [done: the report]", got)
		}
		if rec.Downstream.Agent != "py-complete" || rec.Downstream.TaskID == "" {
			t.Errorf("downstream %+v, want a task at py-complete", rec.Downstream)
		}
	})

	t.Run("StreamMirrorsEvents", func(t *testing.T) {
		t.Parallel()
		rec := delegate(t, orchd, map[string]any{"text": "stream it", "skill": "stream"})
		checkStreamed(t, orchd, rec.ID)
		calls := pyReceivedText(pyReceivedBy(t, peers["stream"]), "stream it")
		if len(calls) != 1 || calls[0].Method != "SendStreamingMessage" {
			t.Errorf("py-stream received %+v, want one SendStreamingMessage (its card declares streaming)", calls)
		}
	})

	t.Run("InputRequired", func(t *testing.T) {
		t.Parallel()
		rec := delegate(t, orchd, map[string]any{"text": "when?", "skill": "ask"})
		evs := events(t, orchd, rec.ID, func(ev delegation.Event) bool { return ev.State == a2a.TaskStateInputRequired })
		if last := evs[len(evs)-1]; last.Message == nil || testagent.Text(last.Message) != "which year?" {
			t.Errorf("INPUT_REQUIRED event with message %+v, want the agent's question %q", last.Message, "which year?")
		}
		rec = waitDelegation(t, orchd, rec.ID, inState(a2a.TaskStateInputRequired))
		var after delegation.Record
		if code, msg := postJSON(t, orchd+"/v1/delegations/"+rec.ID+"/messages", map[string]any{"text": "1999"}, &after); code != http.StatusOK {
			t.Fatalf("answer: %d %s", code, msg)
		}
		done := waitDelegation(t, orchd, rec.ID, inState(a2a.TaskStateCompleted))
		if got := artifactTexts(done.Artifacts); !slices.Equal(got, []string{"answer: 1999"}) {
			t.Errorf("artifacts %q, want [answer: 1999]", got)
		}
		if done.Downstream.TaskID != rec.Downstream.TaskID {
			t.Errorf("answered task %s, want the same downstream task %s", done.Downstream.TaskID, rec.Downstream.TaskID)
		}
		var texts []string
		for _, r := range pyReceivedFor(pyReceivedBy(t, peers["ask"]), rec.Downstream.TaskID) {
			texts = append(texts, r.Text)
		}
		if !slices.Equal(texts, []string{"1999"}) {
			t.Errorf("py-ask received %q with the task id, want the answer [1999] on the same task", texts)
		}
	})

	t.Run("CancelPropagates", func(t *testing.T) {
		t.Parallel()
		rec := delegate(t, orchd, map[string]any{"text": "take your time", "skill": "slow"})
		rec = waitDelegation(t, orchd, rec.ID, func(r delegation.Record) bool { return r.State == a2a.TaskStateWorking })
		start := time.Now()
		if code, msg := postJSON(t, orchd+"/v1/delegations/"+rec.ID+":cancel", nil, nil); code != http.StatusOK {
			t.Fatalf("cancel: %d %s", code, msg)
		}
		rec = waitDelegation(t, orchd, rec.ID, inState(a2a.TaskStateCanceled))
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("cancel took %v, want it prompt", took)
		}
		if got := pyPeerTask(t, peers["slow"]+"/a2a/jsonrpc", rec.Downstream.TaskID); got != "TASK_STATE_CANCELED" {
			t.Errorf("the peer's task is %s, want TASK_STATE_CANCELED", got)
		}
		var methods []string
		for _, r := range pyReceivedFor(pyReceivedBy(t, peers["slow"]), rec.Downstream.TaskID) {
			methods = append(methods, r.Method)
		}
		if !slices.Equal(methods, []string{"CancelTask"}) {
			t.Errorf("py-slow received %v for the task, want [CancelTask]", methods)
		}
	})

	t.Run("Steering", func(t *testing.T) {
		t.Parallel()
		rec := delegate(t, orchd, map[string]any{"text": "walk", "skill": "steer"})
		rec = waitDelegation(t, orchd, rec.ID, inState(a2a.TaskStateWorking))
		for i, text := range []string{"go left", "faster"} {
			var r steering.Receipt
			if code, msg := postJSON(t, orchd+"/v1/delegations/"+rec.ID+":steer", map[string]any{"text": text}, &r); code != http.StatusOK {
				t.Fatalf("steer %q: %d %s", text, code, msg)
			}
			seq := int64(i + 1)
			if want := []steering.Hop{{Agent: "orchd", Seq: seq}, {Agent: "py-steer", Seq: seq}}; !slices.Equal(r.Hops, want) || r.Control != steering.Steer {
				t.Errorf("steer %q: receipt %+v, want hops %v", text, r, want)
			}
		}
		if now := waitDelegation(t, orchd, rec.ID, func(delegation.Record) bool { return true }); now.State != a2a.TaskStateWorking {
			t.Errorf("after steering the delegation is %s, want still WORKING", now.State)
		}
		var r steering.Receipt
		if code, msg := postJSON(t, orchd+"/v1/delegations/"+rec.ID+":interrupt", map[string]any{"text": "stop"}, &r); code != http.StatusOK {
			t.Fatalf("interrupt: %d %s", code, msg)
		}
		if want := []steering.Hop{{Agent: "orchd", Seq: 3}, {Agent: "py-steer", Seq: 3}}; !slices.Equal(r.Hops, want) || r.Control != steering.Interrupt {
			t.Errorf("interrupt: receipt %+v, want hops %v", r, want)
		}
		// The interrupt is acknowledged once the delegation settled.
		var now delegation.Record
		getJSON(t, orchd+"/v1/delegations/"+rec.ID, &now)
		if now.State != a2a.TaskStateInputRequired {
			t.Errorf("after the interrupt the delegation is %s, want INPUT_REQUIRED", now.State)
		}
		// The hop's interrupted state and orchd's interrupt event both reach
		// the event log, in either order: a streaming hop reports its new
		// state before it acknowledges the interrupt.
		var kinds []string
		interrupted := false
		events(t, orchd, rec.ID, func(ev delegation.Event) bool {
			if ev.Kind == "steer" || ev.Kind == "interrupt" {
				kinds = append(kinds, ev.Kind)
			}
			interrupted = interrupted || (ev.State == a2a.TaskStateInputRequired && ev.Metadata[steering.InterruptedKey] == true)
			return interrupted && len(kinds) == 3
		})
		if !slices.Equal(kinds, []string{"steer", "steer", "interrupt"}) {
			t.Errorf("steering events %v, want [steer steer interrupt]", kinds)
		}
		var log []struct{ Control, Text string }
		if code, msg := getJSON(t, peers["steer"]+"/steering/log", &log); code != http.StatusOK {
			t.Fatalf("steering log: %d %s", code, msg)
		}
		if want := []struct{ Control, Text string }{{"steer", "go left"}, {"steer", "faster"}, {"interrupt", "stop"}}; !slices.Equal(log, want) {
			t.Errorf("py-steer took %v, want %v", log, want)
		}
		for _, c := range pyReceivedFor(pyReceivedBy(t, peers["steer"]), rec.Downstream.TaskID) {
			if !slices.Contains(c.Extensions, steering.URI) {
				t.Errorf("signal %q reached py-steer without activating %s (A2A-Extensions %v)", c.Text, steering.URI, c.Extensions)
			}
		}
		// The next message resumes the same downstream task.
		if code, msg := postJSON(t, orchd+"/v1/delegations/"+rec.ID+"/messages", map[string]any{"text": "carry on"}, nil); code != http.StatusOK {
			t.Fatalf("resume: %d %s", code, msg)
		}
		waitDelegation(t, orchd, rec.ID, inState(a2a.TaskStateWorking))
		if got := pyPeerTask(t, peers["steer"]+"/a2a/jsonrpc", rec.Downstream.TaskID); got != "TASK_STATE_WORKING" {
			t.Errorf("the peer's task is %s after resuming, want TASK_STATE_WORKING", got)
		}
		postJSON(t, orchd+"/v1/delegations/"+rec.ID+":cancel", nil, nil)
		waitDelegation(t, orchd, rec.ID, inState(a2a.TaskStateCanceled))
	})

	t.Run("SteeringRefused", func(t *testing.T) {
		t.Parallel()
		rec := delegate(t, orchd, map[string]any{"text": "no steering here", "skill": "slow"})
		rec = waitDelegation(t, orchd, rec.ID, inState(a2a.TaskStateWorking))
		for _, tc := range []struct{ control, mode string }{{"steer", "steerable"}, {"interrupt", "interruptible"}} {
			code, msg := postJSON(t, orchd+"/v1/delegations/"+rec.ID+":"+tc.control, map[string]any{"text": "turn"}, nil)
			want := fmt.Sprintf("hop py-slow does not advertise the %s mode of %s", tc.mode, steering.URI)
			if code != http.StatusConflict || !strings.Contains(msg, want) {
				t.Errorf("%s: %d %q, want 409 naming the hop: %q", tc.control, code, msg, want)
			}
		}
		if calls := pyReceivedFor(pyReceivedBy(t, peers["slow"]), rec.Downstream.TaskID); len(calls) > 0 {
			t.Errorf("py-slow received %+v for the task, want nothing delivered", calls)
		}
		if now := waitDelegation(t, orchd, rec.ID, func(delegation.Record) bool { return true }); now.State != a2a.TaskStateWorking {
			t.Errorf("after the refusals the delegation is %s, want still WORKING", now.State)
		}
		postJSON(t, orchd+"/v1/delegations/"+rec.ID+":cancel", nil, nil)
		waitDelegation(t, orchd, rec.ID, inState(a2a.TaskStateCanceled))
	})
}

// pyClientReport is what client.py prints.
type pyClientReport struct {
	Card struct {
		Name       string   `json:"name"`
		Streaming  bool     `json:"streaming"`
		Extensions []string `json:"extensions"`
		Skills     []string `json:"skills"`
		Interfaces []struct {
			URL, Binding, Version string
		} `json:"interfaces"`
	} `json:"card"`
	Interfaces map[string]pyClientRun `json:"interfaces"`
}

// pyClientRun is one interface's results; a step that failed carries Error.
type pyClientRun struct {
	Fatal *pyClientStep `json:"fatal"`
	Send  pyClientStep  `json:"send"`
	Get   pyClientStep  `json:"get"`
	// CancelDone should fail with TaskNotCancelableError.
	CancelDone pyClientStep `json:"cancelDone"`
	// GetUnknown should fail with TaskNotFoundError.
	GetUnknown pyClientStep `json:"getUnknown"`
	Reply      pyClientStep `json:"reply"`
	// Cancel cancels a task orchd is working on.
	Cancel pyClientStep `json:"cancel"`
	// Steer steers and interrupts a task orchd is working on.
	Steer  pySteerStep  `json:"steer"`
	Stream pyClientStep `json:"stream"`
}

// pySteerStep is what client.py saw steering a task over A2A.
type pySteerStep struct {
	Started     string        `json:"started"`
	Unactivated pyClientStep  `json:"unactivated"`
	Steer       pySignalAck   `json:"steer"`
	Interrupt   pySignalAck   `json:"interrupt"`
	Error       *pyClientStep `json:"error"`
}

// pySignalAck is orchd's acknowledgement of one steering signal.
type pySignalAck struct {
	State       string   `json:"state"`
	Interrupted bool     `json:"interrupted"`
	Hops        []string `json:"hops"`
	InHistory   bool     `json:"inHistory"`
}

// pyClientStep is the outcome of one step of client.py.
type pyClientStep struct {
	Kind         string   `json:"kind"`
	State        string   `json:"state"`
	Artifacts    []string `json:"artifacts"`
	Kinds        []string `json:"kinds"`
	Text         string   `json:"text"`
	SameTask     bool     `json:"sameTask"`
	Started      string   `json:"started"`
	After        string   `json:"after"`
	HistoryRoles []string `json:"historyRoles"`
	Error        string   `json:"error"`
	Message      string   `json:"message"`
	Code         int      `json:"code"`
}

// TestPythonClient runs client.py (the a2a-sdk client) against an orchd
// fronting two a2a-go agents, one working on a task and one answering
// with a message, and checks what it saw on each of orchd's interfaces.
func TestPythonClient(t *testing.T) {
	py := pythonPeers(t)
	work := testagent.Start(t, testagent.Options{Name: "go-work", Skill: "work", Streaming: true}, testagent.Work(20*time.Millisecond))
	reply := testagent.Start(t, testagent.Options{Name: "go-reply", Skill: "reply"}, testagent.Reply("pong"))
	hang := testagent.Start(t, testagent.Options{Name: "go-hang", Skill: "hang", Streaming: true}, testagent.Hang())
	steer := testagent.Start(t, testagent.Options{Name: "go-steer", Skill: "steer", Streaming: true, Steering: true}, testagent.Steerable())
	orchd := orchdtest.Node(t, "orchd", []string{"work", "reply", "hang", "steer"},
		registry.Spec{ID: "go-work", URL: work.URL}, registry.Spec{ID: "go-reply", URL: reply.URL},
		registry.Spec{ID: "go-hang", URL: hang.URL}, registry.Spec{ID: "go-steer", URL: steer.URL})

	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "client.py", orchd)
	cmd.Dir = pythonDir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.py: %v\n%s", err, stderr.String())
	}
	var rep pyClientReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("client.py printed %s: %v", out, err)
	}
	t.Logf("client.py saw: %s", out)

	var ifaces []string
	for _, i := range rep.Card.Interfaces {
		ifaces = append(ifaces, i.Version+" "+i.Binding+" "+strings.TrimPrefix(i.URL, orchd))
	}
	wantIfaces := []string{"1.0 JSONRPC /a2a/jsonrpc", "1.0 HTTP+JSON /a2a/rest", "0.3 JSONRPC /a2a/v0.3/jsonrpc", "0.3 HTTP+JSON /a2a/v0.3/rest"}
	type card struct {
		Name              string
		Streaming         bool
		Steering          bool
		Skills, Interface []string
	}
	want := card{Name: "orchd", Streaming: true, Steering: true, Skills: []string{"work", "reply", "hang", "steer"}, Interface: wantIfaces}
	got := card{rep.Card.Name, rep.Card.Streaming, slices.Contains(rep.Card.Extensions, steering.URI), rep.Card.Skills, ifaces}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("card (-want +got):\n%s", diff)
	}

	for _, iface := range []string{"1.0 JSONRPC", "1.0 HTTP+JSON", "0.3 JSONRPC", "0.3 HTTP+JSON"} {
		t.Run(strings.ReplaceAll(iface, " ", "_"), func(t *testing.T) {
			run, ok := rep.Interfaces[iface]
			if !ok {
				t.Fatalf("client.py did not try %s", iface)
			}
			if run.Fatal != nil {
				t.Fatalf("%s: %+v", iface, run.Fatal)
			}
			done := pyClientStep{Kind: "task", State: "TASK_STATE_COMPLETED", Artifacts: []string{"part one, part two"}}
			if diff := cmp.Diff(done, run.Send, testcmp.Only[pyClientStep]("Error", "Kind", "State", "Artifacts")); diff != "" {
				t.Errorf("blocking send (-want +got):\n%s", diff)
			}
			done.SameTask = true
			if diff := cmp.Diff(done, run.Get, testcmp.Only[pyClientStep]("Error", "SameTask", "State", "Artifacts")); diff != "" {
				t.Errorf("get task, want the same task (-want +got):\n%s", diff)
			}
			if s := run.CancelDone; s.Error != "TaskNotCancelableError" || s.Code != -32002 {
				t.Errorf("cancel a completed task: %+v, want TaskNotCancelableError (-32002)", s)
			}
			if s := run.GetUnknown; s.Error != "TaskNotFoundError" || s.Code != -32001 {
				t.Errorf("get unknown task: %+v, want TaskNotFoundError (-32001)", s)
			}
			if st := run.Steer; st.Unactivated.Error != "UnsupportedOperationError" || st.Unactivated.Code != -32004 {
				t.Errorf("steer without activating the extension: %+v, want UnsupportedOperationError (-32004)", st.Unactivated)
			}
			canceled := pyClientStep{State: "TASK_STATE_CANCELED", After: "TASK_STATE_CANCELED"}
			if diff := cmp.Diff(canceled, run.Cancel, testcmp.Only[pyClientStep]("Error", "State", "After")); diff != "" {
				t.Errorf("cancel a running task (-want +got):\n%s", diff)
			}
			if s := run.Cancel.Started; s != "TASK_STATE_SUBMITTED" && s != "TASK_STATE_WORKING" {
				t.Errorf("cancel a running task: it started %s, want SUBMITTED or WORKING", s)
			}
			st := run.Steer
			if st.Error != nil || st.Started != "TASK_STATE_WORKING" {
				t.Errorf("steering: started %s, error %+v; want a WORKING task", st.Started, st.Error)
			}
			steered := pySignalAck{State: "TASK_STATE_WORKING", InHistory: true, Hops: []string{"orchd#1", "go-steer#1"}}
			if diff := cmp.Diff(steered, st.Steer, testcmp.Only[pySignalAck]("State", "InHistory", "Hops")); diff != "" {
				t.Errorf("steer (-want +got):\n%s", diff)
			}
			interrupted := pySignalAck{State: "TASK_STATE_INPUT_REQUIRED", Interrupted: true, InHistory: true, Hops: []string{"orchd#2", "go-steer#2"}}
			if diff := cmp.Diff(interrupted, st.Interrupt); diff != "" {
				t.Errorf("interrupt (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(pyClientStep{Kind: "message", Text: "pong"}, run.Reply, testcmp.Only[pyClientStep]("Error", "Kind", "Text")); diff != "" {
				t.Errorf("send answered by a message (-want +got):\n%s", diff)
			}
			s := run.Stream
			done.SameTask = false
			if diff := cmp.Diff(done, s, testcmp.Only[pyClientStep]("Error", "State", "Artifacts")); diff != "" {
				t.Errorf("stream (-want +got):\n%s", diff)
			}
			if k := s.Kinds; len(k) == 0 || k[0] != "task" || k[len(k)-1] != "status_update" || !slices.Contains(k, "artifact_update") {
				t.Errorf("stream events %q, want task, …, artifact_update, …, status_update", k)
			}
		})
	}
}
