package interop

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/orchdtest"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testcmp"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// nodeSDK is one @a2a-js/sdk release under test: its peers and client live
// in dir.
type nodeSDK struct {
	// name names the release in subtest names.
	name string
	// dir holds package.json, agents.mjs and client.mjs.
	dir string
	// prefix starts the card names of its agents ("js-complete").
	prefix string
	// version is the A2A version its agents serve and its client speaks;
	// it is also the layout of its agents' cards.
	version string
}

var nodeSDKs = []nodeSDK{
	{name: "v1", dir: "peers/node", prefix: "js", version: "1.0"},
	{name: "v03", dir: "peers/node-v03", prefix: "js03", version: "0.3"},
}

// nodeBehaviours are the agents every peer process starts.
var nodeBehaviours = []string{"complete", "stream", "ask", "slow", "steer"}

// id is the registry id of the release's agent with behaviour b: its card
// name.
func (s nodeSDK) id(b string) string { return s.prefix + "-" + b }

// state spells a task state the way the release writes it on the wire and
// its client prints it: TASK_STATE_WORKING for A2A 1.0, working for 0.3.
func (s nodeSDK) state(st a2a.TaskState) string {
	if s.version == "1.0" {
		return string(st)
	}
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(string(st), "TASK_STATE_")), "_", "-")
}

// nodeSetup skips without node and npm (unless ORCHD_INTEROP=require) and
// installs the pinned packages of both releases.
func nodeSetup(t *testing.T) {
	t.Helper()
	requireTool(t, "node")
	requireTool(t, "npm")
	setup(t, "peers/node/install.sh")
}

// TestNodeAgents runs the agents of both @a2a-js/sdk releases behind one
// orchd and checks, through orchd's HTTP API, what orchd makes of their
// cards, which it picks under version constraints, and every kind of
// delegation: completion, streamed artifacts, input required, cancel,
// steering, and refused steering.
func TestNodeAgents(t *testing.T) {
	nodeSetup(t)
	urls := map[string]map[string]string{}
	var specs []registry.Spec
	for _, sdk := range nodeSDKs {
		urls[sdk.name] = startPeers(t, sdk.dir, "node", "agents.mjs")
		for _, b := range nodeBehaviours {
			if urls[sdk.name][b] == "" {
				t.Fatalf("%s peers did not list %s: %v", sdk.name, b, urls[sdk.name])
			}
			specs = append(specs, registry.Spec{ID: sdk.id(b), URL: urls[sdk.name][b]})
		}
	}
	base := orchdtest.Node(t, "orchd", nil, specs...)

	t.Run("versions", func(t *testing.T) {
		t.Parallel()
		nodeVersionDecisions(t, base)
	})
	for _, sdk := range nodeSDKs {
		peers := urls[sdk.name]
		t.Run(sdk.name, func(t *testing.T) {
			t.Parallel()
			for _, sc := range []struct {
				name string
				run  func(t *testing.T, base string, sdk nodeSDK, peers map[string]string)
			}{
				{"profiles", nodeProfiles},
				{"complete", nodeComplete},
				{"stream", nodeStream},
				{"ask", nodeAsk},
				{"cancel", nodeCancel},
				{"steer", nodeSteer},
				{"refuse_steering", nodeRefuseSteering},
			} {
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					sc.run(t, base, sdk, peers)
				})
			}
		})
	}
}

// nodeProfile is the part of an agent's profile the tests check.
type nodeProfile struct {
	Name               string `json:"name"`
	CardFormat         string `json:"cardFormat"`
	Compatible         bool   `json:"compatible"`
	IncompatibleReason string `json:"incompatibleReason"`
	Protocols          []struct {
		Version string `json:"version"`
		Binding string `json:"binding"`
		URL     string `json:"url"`
		Tenant  string `json:"tenant"`
	} `json:"protocols"`
	Capabilities map[string]struct {
		Tier     int  `json:"tier"`
		Declared bool `json:"declared"`
	} `json:"capabilities"`
	Steering struct {
		Steerable     bool `json:"steerable"`
		Interruptible bool `json:"interruptible"`
	} `json:"steering"`
	Skills []struct {
		ID string `json:"id"`
	} `json:"skills"`
	Warnings []string `json:"warnings"`
}

// nodeProfiles checks the profile orchd built from each agent's card:
// format, versions per binding, streaming only on the stream agent, the
// steering modes only on the steer agent, the one skill.
func nodeProfiles(t *testing.T, base string, sdk nodeSDK, peers map[string]string) {
	for _, b := range nodeBehaviours {
		var p nodeProfile
		if code, msg := getJSON(t, base+"/v1/agents/"+sdk.id(b), &p); code != http.StatusOK {
			t.Fatalf("profile of %s: %d %s", sdk.id(b), code, msg)
		}
		want := nodeProfile{Name: sdk.id(b), CardFormat: sdk.version, Compatible: true}
		if diff := cmp.Diff(want, p, testcmp.Only[nodeProfile]("Name", "CardFormat", "Compatible", "IncompatibleReason")); diff != "" {
			t.Errorf("%s: profile (-want +got):\n%s", b, diff)
		}
		var protocols []string
		for _, pr := range p.Protocols {
			protocols = append(protocols, fmt.Sprintf("%s %s %s %q", pr.Version, pr.Binding, pr.URL, pr.Tenant))
		}
		if want := []string{fmt.Sprintf("%s JSONRPC %s/a2a/jsonrpc %q", sdk.version, peers[b], "")}; !slices.Equal(protocols, want) {
			t.Errorf("%s: protocols %q, want %q", b, protocols, want)
		}
		_, streaming := p.Capabilities["streaming"]
		_, steerable := p.Capabilities["steerable"]
		_, interruptible := p.Capabilities["interruptible"]
		_, extension := p.Capabilities[steering.URI]
		// The 1.x SDK writes "tenant": "" on every interface: no tenant.
		if _, mt := p.Capabilities["multi_tenant"]; mt {
			t.Errorf("%s: multi_tenant capability from an empty tenant", b)
		}
		if streaming != (b == "stream") {
			t.Errorf("%s: streaming capability %v", b, streaming)
		}
		steer := b == "steer"
		type modes struct{ Steerable, Interruptible, Extension, ModeSteerable, ModeInterruptible bool }
		got := modes{steerable, interruptible, extension, p.Steering.Steerable, p.Steering.Interruptible}
		if diff := cmp.Diff(modes{steer, steer, steer, steer, steer}, got); diff != "" {
			t.Errorf("%s: steering capabilities and modes (-want +got):\n%s", b, diff)
		}
		if len(p.Skills) != 1 || p.Skills[0].ID != b {
			t.Errorf("%s: skills %+v, want the one skill %q", b, p.Skills, b)
		}
		if len(p.Warnings) > 0 {
			t.Errorf("%s: warnings %q", b, p.Warnings)
		}
	}
}

// nodeVersionDecisions checks which release's agent orchd picks under
// protocol constraints and required capabilities, and the reasons it gives
// for the others.
func nodeVersionDecisions(t *testing.T, base string) {
	for _, tc := range []struct {
		name string
		req  map[string]any
		// chosen is the agent picked, or "" when the request is refused.
		chosen string
		// refused maps every agent that must be refused to a phrase of
		// its reason.
		refused map[string]string
	}{
		{"1.0 only", map[string]any{"skill": "complete", "protocol": ">= 1.0"},
			"js-complete", map[string]string{"js03-complete": "protocol: speaks 0.3, the request needs >= 1.0"}},
		{"0.3 only", map[string]any{"skill": "complete", "protocol": "~> 0.3"},
			"js03-complete", map[string]string{"js-complete": "protocol: speaks 1.0, the request needs ~> 0.3"}},
		{"0.3 agent pinned, 1.0 required", map[string]any{"agent": "js03-complete", "protocol": ">= 1.0"},
			"", map[string]string{"js03-complete": "protocol: speaks 0.3, the request needs >= 1.0"}},
		{"steerable required", map[string]any{"skill": "slow", "requires": []string{"steerable"}},
			"", map[string]string{"js-slow": "lacks required capability steerable", "js03-slow": "lacks required capability steerable"}},
		{"steerable 0.3", map[string]any{"skill": "steer", "requires": []string{"steerable", "interruptible"}, "protocol": "< 1.0"},
			"js03-steer", map[string]string{"js-steer": "protocol: speaks 1.0, the request needs < 1.0"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.req["text"] = "which agent?"
			code, rec, dec := tryDelegate(t, base, tc.req)
			if tc.chosen != "" {
				if code != http.StatusCreated {
					t.Fatalf("delegate: %d, want 201 (decision %+v)", code, dec)
				}
				t.Cleanup(func() { postJSON(t, base+"/v1/delegations/"+rec.ID+":cancel", nil, nil) })
				if rec.Downstream.Agent != tc.chosen {
					t.Errorf("went to %q, want %q", rec.Downstream.Agent, tc.chosen)
				}
				if dec == nil || dec.Chosen != tc.chosen {
					t.Errorf("decision %+v, want %q chosen", dec, tc.chosen)
				}
			} else if code != http.StatusUnprocessableEntity {
				t.Fatalf("delegate: %d, want 422 refused", code)
			}
			if dec == nil {
				t.Fatal("no decision")
			}
			if tc.chosen != "" && !slices.ContainsFunc(dec.Candidates, func(c delegation.Candidate) bool { return c.Agent == tc.chosen && c.Allowed }) {
				t.Errorf("%s is not an allowed candidate: %+v", tc.chosen, dec.Candidates)
			}
			for agent, why := range tc.refused {
				i := slices.IndexFunc(dec.Candidates, func(c delegation.Candidate) bool { return c.Agent == agent })
				if i < 0 {
					t.Errorf("%s is not a candidate: %+v", agent, dec.Candidates)
					continue
				}
				c := dec.Candidates[i]
				if c.Allowed || !slices.ContainsFunc(c.Reasons, func(r string) bool { return strings.Contains(r, why) }) {
					t.Errorf("%s: allowed %v, reasons %q; want refused for %q", agent, c.Allowed, c.Reasons, why)
				}
			}
		})
	}
}

// nodeComplete delegates to the complete agent and checks its artifact.
func nodeComplete(t *testing.T, base string, sdk nodeSDK, _ map[string]string) {
	rec := nodeDelegate(t, base, sdk.id("complete"), "hello")
	rec = waitDelegation(t, base, rec.ID, func(r delegation.Record) bool { return r.State.Terminal() })
	if rec.State != a2a.TaskStateCompleted || rec.Downstream.TaskID == "" {
		t.Fatalf("ended %s (%s), downstream task %q", rec.State, rec.Error, rec.Downstream.TaskID)
	}
	if got := artifactTexts(rec.Artifacts); !slices.Equal(got, []string{"done: hello"}) {
		t.Errorf("artifacts %q, want [done: hello]", got)
	}
}

// nodeStream delegates to the streaming agent and checks that its three
// chunks reach the delegation's events as they come, appended.
func nodeStream(t *testing.T, base string, sdk nodeSDK, _ map[string]string) {
	rec := nodeDelegate(t, base, sdk.id("stream"), "stream it")
	checkStreamed(t, base, rec.ID)
}

// nodeAsk answers the ask agent's question through orchd.
func nodeAsk(t *testing.T, base string, sdk nodeSDK, _ map[string]string) {
	rec := nodeDelegate(t, base, sdk.id("ask"), "when?")
	rec = waitDelegation(t, base, rec.ID, func(r delegation.Record) bool {
		return r.State != a2a.TaskStateSubmitted && r.State != a2a.TaskStateWorking
	})
	if rec.State != a2a.TaskStateInputRequired {
		t.Fatalf("state %s (%s), want INPUT_REQUIRED", rec.State, rec.Error)
	}
	asked := events(t, base, rec.ID, func(ev delegation.Event) bool { return ev.State == a2a.TaskStateInputRequired })
	if q := asked[len(asked)-1]; q.Message == nil || testagent.Text(q.Message) != "which year?" {
		t.Errorf("the INPUT_REQUIRED event carries %+v, want the question \"which year?\"", q.Message)
	}
	task := rec.Downstream.TaskID
	if code, msg := postJSON(t, base+"/v1/delegations/"+rec.ID+"/messages", map[string]any{"text": "1999"}, nil); code != http.StatusOK {
		t.Fatalf("answer: %d %s", code, msg)
	}
	rec = waitDelegation(t, base, rec.ID, func(r delegation.Record) bool { return r.State.Terminal() })
	if got := artifactTexts(rec.Artifacts); rec.State != a2a.TaskStateCompleted || !slices.Equal(got, []string{"answer: 1999"}) {
		t.Errorf("ended %s (%s) with artifacts %q, want COMPLETED with [answer: 1999]", rec.State, rec.Error, got)
	}
	if rec.Downstream.TaskID != task {
		t.Errorf("the answer went to task %s, want the same task %s", rec.Downstream.TaskID, task)
	}
	if code, _ := postJSON(t, base+"/v1/delegations/"+rec.ID+"/messages", map[string]any{"text": "again"}, nil); code != http.StatusConflict {
		t.Errorf("input after completion: %d, want 409", code)
	}
}

// nodeCancel cancels work at the slow agent through orchd: both the
// delegation and the agent's own task end CANCELED.
func nodeCancel(t *testing.T, base string, sdk nodeSDK, peers map[string]string) {
	rec := nodeWorking(t, base, sdk.id("slow"))
	if code, msg := postJSON(t, base+"/v1/delegations/"+rec.ID+":cancel", nil, nil); code != http.StatusOK {
		t.Fatalf("cancel: %d %s", code, msg)
	}
	rec = waitDelegation(t, base, rec.ID, func(r delegation.Record) bool { return r.State.Terminal() })
	if rec.State != a2a.TaskStateCanceled {
		t.Errorf("delegation ended %s (%s), want CANCELED", rec.State, rec.Error)
	}
	if task := nodePeerTask(t, sdk, peers["slow"], string(rec.Downstream.TaskID)); task.Status.State != sdk.state(a2a.TaskStateCanceled) {
		t.Errorf("the agent's task is %s, want %s", task.Status.State, sdk.state(a2a.TaskStateCanceled))
	}
}

// nodeSteer steers and interrupts the hand-steerable agent through orchd,
// then resumes it.
func nodeSteer(t *testing.T, base string, sdk nodeSDK, peers map[string]string) {
	rec := nodeWorking(t, base, sdk.id("steer"))
	t.Cleanup(func() { postJSON(t, base+"/v1/delegations/"+rec.ID+":cancel", nil, nil) })
	task := string(rec.Downstream.TaskID)
	for i, sig := range []struct {
		control, text string
		state         a2a.TaskState
	}{
		{"steer", "turn left", a2a.TaskStateWorking},
		{"interrupt", "stop there", a2a.TaskStateInputRequired},
	} {
		var r steering.Receipt
		if code, msg := postJSON(t, base+"/v1/delegations/"+rec.ID+":"+sig.control, map[string]any{"text": sig.text}, &r); code != http.StatusOK {
			t.Fatalf("%s: %d %s", sig.control, code, msg)
		}
		seq := int64(i + 1)
		want := []steering.Hop{{Agent: "orchd", Seq: seq}, {Agent: sdk.id("steer"), Seq: seq}}
		if string(r.Control) != sig.control || !slices.Equal(r.Hops, want) {
			t.Errorf("%s receipt %+v, want hops %+v", sig.control, r, want)
		}
		var now delegation.Record
		getJSON(t, base+"/v1/delegations/"+rec.ID, &now)
		if now.State != sig.state {
			t.Errorf("after the %s the delegation is %s, want %s", sig.control, now.State, sig.state)
		}
	}
	marked := events(t, base, rec.ID, func(ev delegation.Event) bool {
		return ev.State == a2a.TaskStateInputRequired && ev.Metadata[steering.InterruptedKey] == true
	})
	if len(marked) == 0 {
		t.Error("no event marks the delegation interrupted")
	}

	var log []struct {
		Control string `json:"control"`
		Text    string `json:"text"`
		TaskID  string `json:"taskId"`
	}
	if code, msg := getJSON(t, peers["steer"]+"/steering/log", &log); code != http.StatusOK {
		t.Fatalf("steering log: %d %s", code, msg)
	}
	var took []string
	for _, l := range log {
		if l.TaskID == task {
			took = append(took, l.Control+" "+l.Text)
		}
	}
	if want := []string{"steer turn left", "interrupt stop there"}; !slices.Equal(took, want) {
		t.Errorf("the agent took %q, want %q", took, want)
	}
	pt := nodePeerTask(t, sdk, peers["steer"], task)
	if pt.Status.State != sdk.state(a2a.TaskStateInputRequired) || pt.Metadata[steering.InterruptedKey] != true {
		t.Errorf("the agent's task is %s with metadata %v, want %s marked interrupted", pt.Status.State, pt.Metadata, sdk.state(a2a.TaskStateInputRequired))
	}
	if h := pt.texts(); !slices.Contains(h, "turn left") || !slices.Contains(h, "stop there") {
		t.Errorf("the agent's task history %q lacks the signals", h)
	}

	if code, msg := postJSON(t, base+"/v1/delegations/"+rec.ID+"/messages", map[string]any{"text": "carry on"}, nil); code != http.StatusOK {
		t.Fatalf("resume: %d %s", code, msg)
	}
	rec = waitDelegation(t, base, rec.ID, func(r delegation.Record) bool { return r.State == a2a.TaskStateWorking || r.State.Terminal() })
	if rec.State != a2a.TaskStateWorking || string(rec.Downstream.TaskID) != task {
		t.Errorf("after resuming: %s on task %s, want WORKING on %s", rec.State, rec.Downstream.TaskID, task)
	}
}

// nodeRefuseSteering steers and interrupts work at the slow agent, whose
// card does not advertise the extension: orchd refuses, naming the hop,
// and delivers nothing.
func nodeRefuseSteering(t *testing.T, base string, sdk nodeSDK, peers map[string]string) {
	rec := nodeWorking(t, base, sdk.id("slow"))
	t.Cleanup(func() { postJSON(t, base+"/v1/delegations/"+rec.ID+":cancel", nil, nil) })
	text := map[string]string{"steer": "refused steer " + sdk.name, "interrupt": "refused interrupt " + sdk.name}
	mode := map[string]string{"steer": "steerable", "interrupt": "interruptible"}
	for _, c := range []string{"steer", "interrupt"} {
		code, msg := postJSON(t, base+"/v1/delegations/"+rec.ID+":"+c, map[string]any{"text": text[c]}, nil)
		want := fmt.Sprintf("hop %s does not advertise the %s mode of %s", sdk.id("slow"), mode[c], steering.URI)
		if code != http.StatusConflict || !strings.Contains(msg, want) {
			t.Errorf("%s: %d %q, want 409 naming the hop: %q", c, code, msg, want)
		}
	}
	var now delegation.Record
	getJSON(t, base+"/v1/delegations/"+rec.ID, &now)
	if now.State != a2a.TaskStateWorking {
		t.Errorf("after the refusals the delegation is %s, want WORKING", now.State)
	}
	pt := nodePeerTask(t, sdk, peers["slow"], string(rec.Downstream.TaskID))
	if pt.Status.State != sdk.state(a2a.TaskStateWorking) {
		t.Errorf("the agent's task is %s, want %s", pt.Status.State, sdk.state(a2a.TaskStateWorking))
	}
	for _, h := range pt.texts() {
		if h == text["steer"] || h == text["interrupt"] {
			t.Errorf("the agent received %q", h)
		}
	}
	var log []struct {
		Text string `json:"text"`
	}
	getJSON(t, peers["steer"]+"/steering/log", &log)
	for _, l := range log {
		if l.Text == text["steer"] || l.Text == text["interrupt"] {
			t.Errorf("the steer agent took %q", l.Text)
		}
	}
}

// TestNodeClient runs the client of each @a2a-js/sdk release against
// orchd's own A2A interfaces of its version (1.0 for the 1.x client, 0.3 for
// the 0.3.x client), over JSON-RPC and HTTP+JSON, with a2a-go test agents
// behind orchd, and checks what the client saw: the card, the interface it
// chose, tasks, a message answer, a stream, an input-required round trip, a
// cancel and TaskNotFound.
func TestNodeClient(t *testing.T) {
	nodeSetup(t)
	work := testagent.Start(t, testagent.Options{Name: "work", Skill: "work", Streaming: true}, testagent.Work(20*time.Millisecond))
	reply := testagent.Start(t, testagent.Options{Name: "reply", Skill: "reply"}, testagent.Reply("hi there"))
	ask := testagent.Start(t, testagent.Options{Name: "ask", Skill: "ask", Streaming: true}, testagent.Ask())
	hang := testagent.Start(t, testagent.Options{Name: "hang", Skill: "hang", Streaming: true}, testagent.Hang())
	base := orchdtest.Node(t, "orchd", []string{"work", "reply", "ask", "hang"},
		registry.Spec{ID: "work", URL: work.URL}, registry.Spec{ID: "reply", URL: reply.URL},
		registry.Spec{ID: "ask", URL: ask.URL}, registry.Spec{ID: "hang", URL: hang.URL})

	for _, sdk := range nodeSDKs {
		for _, binding := range []string{"JSONRPC", "HTTP+JSON"} {
			t.Run(sdk.name+"/"+binding, func(t *testing.T) {
				t.Parallel()
				nodeClient(t, sdk, binding, base)
			})
		}
	}
}

// nodeClient runs sdk's client over binding against the orchd at base and
// checks its report.
func nodeClient(t *testing.T, sdk nodeSDK, binding, base string) {
	out := nodeRunClient(t, sdk, base, binding)
	st := sdk.state
	task := func(step string, got nodeClientTask, state a2a.TaskState, status string, artifacts []string) {
		t.Helper()
		if got.Error != "" {
			t.Errorf("%s: %s %v: %s", step, got.Error, got.Code, got.Message)
			return
		}
		want := nodeClientTask{Kind: "task", State: st(state), Status: status, Artifacts: artifacts}
		if diff := cmp.Diff(want, got, testcmp.Only[nodeClientTask]("Kind", "State", "Status", "Artifacts"), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", step, diff)
		}
	}

	// The card, and the interface the SDK chose from it.
	c := out.Card
	type card struct {
		Name                  string
		Streaming             bool
		Skills                []string
		Steering, Delegations bool
	}
	want := card{Name: "orchd", Streaming: true, Skills: []string{"work", "reply", "ask", "hang"}, Steering: true, Delegations: true}
	got := card{c.Name, c.Streaming, c.Skills, slices.Contains(c.Extensions, steering.URI), slices.Contains(c.Extensions, delegation.ExtensionURI)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("card (-want +got):\n%s", diff)
	}
	rest := binding == "HTTP+JSON"
	endpoint := map[string]string{"JSONRPC": "/a2a/jsonrpc", "HTTP+JSON": "/a2a/rest"}[binding]
	version := "1.0"
	if sdk.version == "1.0" {
		want := nodeClientInterface{URL: base + endpoint, Binding: binding, Version: "1.0"}
		if !slices.Contains(c.Interfaces, want) {
			t.Errorf("interfaces %+v, want %+v among them", c.Interfaces, want)
		}
		if out.Transport.Protocol != binding || out.Transport.Version != "1.0" {
			t.Errorf("transport %+v, want %s 1.0 chosen", out.Transport, binding)
		}
	} else {
		endpoint = map[string]string{"JSONRPC": "/a2a/v0.3/jsonrpc", "HTTP+JSON": "/a2a/v0.3/rest"}[binding]
		version = ""
		rpc := base + "/a2a/v0.3/jsonrpc"
		type view struct{ ProtocolVersion, URL, PreferredTransport string }
		if diff := cmp.Diff(view{"0.3", rpc, "JSONRPC"}, view{c.ProtocolVersion, c.URL, c.PreferredTransport}); diff != "" {
			t.Errorf("0.3 view of the card (-want +got):\n%s", diff)
		}
		if rest := (nodeClientInterface{URL: base + "/a2a/v0.3/rest", Binding: "HTTP+JSON"}); !slices.Contains(c.Interfaces, rest) {
			t.Errorf("0.3 view of the card: additionalInterfaces %+v, want %+v among them", c.Interfaces, rest)
		}
		// The 1.0 card at the well-known path, which a client sending no
		// A2A-Version gets, has no 0.3 url: the SDK finds no transport in
		// it, and reads /.well-known/agent.json (docs/a2a.md).
		if !strings.Contains(out.WellKnown, "No compatible transport") {
			t.Errorf("the 0.3 client at the well-known path: %q, want no compatible transport", out.WellKnown)
		}
	}
	if len(out.Calls) < 10 {
		t.Errorf("the client made %d calls: %+v", len(out.Calls), out.Calls)
	}
	for i, call := range out.Calls {
		status := http.StatusOK
		if i == len(out.Calls)-1 && rest { // the unknown task
			status = http.StatusNotFound
		}
		if !(call.Path == endpoint || rest && strings.HasPrefix(call.Path, endpoint+"/")) {
			t.Errorf("call %+v; want it to %s", call, endpoint)
		}
		if call.Version != version || call.Status != status {
			t.Errorf("call %+v; want A2A-Version %q, answered %d", call, version, status)
		}
	}

	task("send", out.Send, a2a.TaskStateCompleted, "done", []string{"part one, part two"})
	if out.Reply.Kind != "message" || out.Reply.Text != "hi there" {
		t.Errorf("reply: %+v, want the message \"hi there\"", out.Reply)
	}

	s := out.Stream
	kinds := map[string]string{"task": "task", "status": "statusUpdate", "artifact": "artifactUpdate"}
	if sdk.version == "0.3" {
		kinds = map[string]string{"task": "task", "status": "status-update", "artifact": "artifact-update"}
	}
	streamed := []string{"part one, part two"}
	if sdk.version == "0.3" && binding == "HTTP+JSON" {
		// @a2a-js/sdk 0.3.x reads an HTTP+JSON artifact update without its
		// append flag (FromProto.taskArtifactUpdateEvent), so the client
		// takes the appended chunk for the whole artifact, as it does from
		// any agent streaming chunks (docs/interop.md).
		streamed = []string{"part two"}
	}
	if s.Error != "" {
		t.Errorf("stream: %s %v: %s", s.Error, s.Code, s.Message)
	}
	if ev := s.Events; len(ev) < 3 || ev[0] != kinds["task"] || ev[len(ev)-1] != kinds["status"] || !slices.Contains(ev, kinds["artifact"]) {
		t.Errorf("stream events %q; want %s, …, %s, …, %s", ev, kinds["task"], kinds["artifact"], kinds["status"])
	}
	if s.State != st(a2a.TaskStateCompleted) || !slices.Equal(s.Artifacts, streamed) {
		t.Errorf("stream ended %s with artifacts %q; want %s with %q", s.State, s.Artifacts, st(a2a.TaskStateCompleted), streamed)
	}

	task("get", out.Get, a2a.TaskStateCompleted, "done", []string{"part one, part two"})
	if out.Get.ID != out.Send.ID {
		t.Errorf("get returned task %s, want %s", out.Get.ID, out.Send.ID)
	}

	task("ask, first", out.Ask.First, a2a.TaskStateInputRequired, "which year?", []string{})
	task("ask, answer", out.Ask.Second, a2a.TaskStateCompleted, "answered: 1999", []string{})
	if out.Ask.Second.ID != out.Ask.First.ID {
		t.Errorf("the answer went to task %s, want %s", out.Ask.Second.ID, out.Ask.First.ID)
	}

	if cs := out.Cancel.Started; cs.Error != "" || (cs.State != st(a2a.TaskStateSubmitted) && cs.State != st(a2a.TaskStateWorking)) {
		t.Errorf("cancel, start: %+v", cs)
	}
	task("cancel", out.Cancel.Canceled, a2a.TaskStateCanceled, "", []string{})
	task("cancel, get", out.Cancel.After, a2a.TaskStateCanceled, "", []string{})

	u := out.Unknown
	switch {
	case !rest:
		type notFound struct {
			Error          string
			Code, WireCode int
		}
		if diff := cmp.Diff(notFound{"TaskNotFoundError", -32001, -32001}, notFound{u.Error, u.Code, u.WireCode}); diff != "" {
			t.Errorf("unknown task (-want +got):\n%s", diff)
		}
	default:
		// Over 0.3 too: orchd adds the JSON-RPC code the 0.3.x client
		// reads to a2a-go's google.rpc.Status body (docs/interop.md).
		type notFound struct {
			Error      string
			WireStatus int
			WireReason string
		}
		if diff := cmp.Diff(notFound{"TaskNotFoundError", http.StatusNotFound, "TASK_NOT_FOUND"}, notFound{u.Error, u.WireStatus, u.WireReason}); diff != "" {
			t.Errorf("unknown task (-want +got):\n%s", diff)
		}
	}
}

// nodeClientOutput is what client.mjs prints.
type nodeClientOutput struct {
	Card struct {
		Name               string                `json:"name"`
		ProtocolVersion    string                `json:"protocolVersion"`
		URL                string                `json:"url"`
		PreferredTransport string                `json:"preferredTransport"`
		Interfaces         []nodeClientInterface `json:"interfaces"`
		Streaming          bool                  `json:"streaming"`
		Extensions         []string              `json:"extensions"`
		Skills             []string              `json:"skills"`
	} `json:"card"`
	// WellKnown is what the 0.3.x client made of the card at the
	// well-known path: "usable", or the SDK's error.
	WellKnown string `json:"wellKnown"`
	Transport struct {
		Protocol string `json:"protocol"`
		Version  string `json:"version"`
	} `json:"transport"`
	Send  nodeClientTask `json:"send"`
	Reply struct {
		Kind string `json:"kind"`
		Text string `json:"text"`
	} `json:"reply"`
	Stream struct {
		nodeClientError
		Events    []string `json:"events"`
		State     string   `json:"state"`
		TaskID    string   `json:"taskId"`
		Artifacts []string `json:"artifacts"`
	} `json:"stream"`
	Get nodeClientTask `json:"get"`
	Ask struct {
		nodeClientError
		First  nodeClientTask `json:"first"`
		Second nodeClientTask `json:"second"`
	} `json:"ask"`
	Cancel struct {
		nodeClientError
		Started  nodeClientTask `json:"started"`
		Canceled nodeClientTask `json:"canceled"`
		After    nodeClientTask `json:"after"`
	} `json:"cancel"`
	Unknown struct {
		nodeClientError
		WireStatus int    `json:"wireStatus"`
		WireCode   int    `json:"wireCode"`
		WireReason string `json:"wireReason"`
	} `json:"unknown"`
	Calls []struct {
		Path    string `json:"path"`
		Version string `json:"version"`
		Method  string `json:"method"`
		Status  int    `json:"status"`
	} `json:"calls"`
}

// nodeClientError is a step that threw: the SDK's error class, the JSON-RPC
// code it carried, its message.
type nodeClientError struct {
	Error   string `json:"error"`
	Code    int    `json:"code"`
	Message string `json:"message"`
}

type nodeClientInterface struct {
	URL     string `json:"url"`
	Binding string `json:"binding"`
	Version string `json:"version"`
}

// nodeClientTask is a task (or message) as client.mjs summarizes it.
type nodeClientTask struct {
	nodeClientError
	Kind      string   `json:"kind"`
	ID        string   `json:"id"`
	State     string   `json:"state"`
	Status    string   `json:"status"`
	Artifacts []string `json:"artifacts"`
}

// nodeRunClient runs sdk's client.mjs over binding against the orchd at
// base and decodes its one JSON line.
func nodeRunClient(t *testing.T, sdk nodeSDK, base, binding string) nodeClientOutput {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "client.mjs", base, binding)
	cmd.Dir = sdk.dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	raw, err := cmd.Output()
	if err != nil {
		t.Fatalf("client.mjs: %v\nstderr:\n%s", err, stderr.String())
	}
	var out nodeClientOutput
	if err := json.Unmarshal(bytes.TrimSpace(raw), &out); err != nil {
		t.Fatalf("client.mjs printed %q: %v\nstderr:\n%s", raw, err, stderr.String())
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("client.mjs printed %s\nstderr:\n%s", raw, stderr.String())
		}
	})
	return out
}

// nodeDelegate delegates text to the agent with id and returns the new
// delegation.
func nodeDelegate(t *testing.T, base, agent, text string) delegation.Record {
	t.Helper()
	rec := delegate(t, base, map[string]any{"agent": agent, "text": text})
	if rec.Downstream.Agent != agent {
		t.Fatalf("delegated to %q, want %q", rec.Downstream.Agent, agent)
	}
	return rec
}

// nodeWorking delegates to agent and waits until the delegation is WORKING
// on a downstream task.
func nodeWorking(t *testing.T, base, agent string) delegation.Record {
	t.Helper()
	rec := nodeDelegate(t, base, agent, "work on it")
	rec = waitDelegation(t, base, rec.ID, func(r delegation.Record) bool {
		return r.State.Terminal() || r.State == a2a.TaskStateWorking && r.Downstream.TaskID != ""
	})
	if rec.State != a2a.TaskStateWorking {
		t.Fatalf("delegation to %s is %s (%s), want WORKING", agent, rec.State, rec.Error)
	}
	return rec
}

// nodeWireTask is a task as a peer's JSON-RPC GetTask (tasks/get) returns it,
// in either version's JSON.
type nodeWireTask struct {
	ID     string `json:"id"`
	Status struct {
		State string `json:"state"`
	} `json:"status"`
	History []struct {
		Parts []struct {
			Text string `json:"text"`
		} `json:"parts"`
	} `json:"history"`
	Metadata map[string]any `json:"metadata"`
}

// texts lists the text of each history message.
func (w nodeWireTask) texts() []string {
	var out []string
	for _, m := range w.History {
		var b strings.Builder
		for _, p := range m.Parts {
			b.WriteString(p.Text)
		}
		out = append(out, b.String())
	}
	return out
}

// nodePeerTask asks the agent at peer directly for its task id, with its
// history, over its own JSON-RPC interface.
func nodePeerTask(t *testing.T, sdk nodeSDK, peer, id string) nodeWireTask {
	t.Helper()
	method := "GetTask"
	if sdk.version == "0.3" {
		method = "tasks/get"
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method,
		"params": map[string]any{"id": id, "historyLength": 50}})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, peer+"/a2a/jsonrpc", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if sdk.version == "1.0" {
		req.Header.Set("A2A-Version", "1.0")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var rpc struct {
		Result *nodeWireTask   `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rpc); err != nil || rpc.Result == nil {
		t.Fatalf("%s %s at %s: %v %s", method, id, peer, err, rpc.Error)
	}
	return *rpc.Result
}
