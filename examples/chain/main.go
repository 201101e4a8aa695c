// Command chain runs a delegation chain on this machine and walks through
// what orchd does with it, steering included:
//
//	orchd A  →  orchd B  →  C (steerable, interruptible)
//	                     →  D (neither: research and draft)
//	                     →  E (speaks only A2A 0.3)
//	                     →  F (speaks only a future A2A 2.0)
//
// A knows only B; B knows the workers and A. Every process listens on an
// ephemeral port on 127.0.0.1, and everything stops when the walk-through
// ends. It exits non-zero if any step does not turn out as described.
//
//	go run ./examples/chain
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/orchestrator"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "chain:", err)
		os.Exit(1)
	}
}

// worker is an a2a-go agent. Ordinary work takes a moment and produces one
// artifact. Work starting with "long:" runs until it is canceled or, on a
// steerable worker, a steer says "finish"; such a worker takes steers and
// interrupts through the steering package.
type worker struct {
	name  string
	steer *steering.Steering // nil for a worker that cannot be steered
}

func (w worker) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		say := func(s string) *a2a.Message {
			return a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(s))
		}
		var inbox *steering.Inbox
		if w.steer != nil {
			inbox = w.steer.Open(ec)
			defer inbox.Close()
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, say(w.name+" is on it")), nil) {
			return
		}
		long := ec.StoredTask != nil || strings.HasPrefix(text(ec.Message), "long:")
		if !long {
			time.Sleep(20 * time.Millisecond)
			if yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart(w.name+"'s findings")), nil) {
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, say(w.name+" is done")), nil)
			}
			return
		}
		var ready <-chan struct{}
		if inbox != nil {
			ready = inbox.Ready()
		}
		var took []string
		for {
			select {
			case <-ctx.Done():
				return
			case <-ready:
			}
			for _, sig := range inbox.Take() {
				if sig.Control == steering.Interrupt {
					inbox.Close()
					yield(inbox.Interrupted(ec, w.name+" stopped"), nil)
					return
				}
				took = append(took, text(sig.Message))
				if !yield(steering.Acknowledged(ec, sig), nil) {
					return
				}
				if text(sig.Message) == "finish" {
					for _, late := range inbox.Close() {
						took = append(took, text(late.Message))
					}
					yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, say(w.name+" finished after: "+strings.Join(took, ", "))), nil)
					return
				}
			}
		}
	}
}

func (w worker) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func text(m *a2a.Message) string {
	var out []string
	for _, p := range m.Parts {
		if t, ok := p.Content.(a2a.Text); ok {
			out = append(out, string(t))
		}
	}
	return strings.Join(out, " ")
}

// serveWorker starts a worker agent with the comma-separated skills. version is the A2A version its one
// JSON-RPC interface declares; "0.3" is served with a2a-go's 0.3 handlers.
// A steerable worker advertises and implements the steering extension.
func serveWorker(name, skill, version string, steerable bool) *httptest.Server {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	card := &a2a.AgentCard{
		Name: name, Description: "a worker in the chain example", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: srv.URL + "/a2a", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: a2a.ProtocolVersion(version)}},
		Capabilities:        a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
	}
	for _, sk := range strings.Split(skill, ",") {
		card.Skills = append(card.Skills, a2a.AgentSkill{ID: sk, Name: sk, Tags: []string{sk}})
	}
	w := worker{name: name}
	var opts []a2asrv.RequestHandlerOption
	if steerable {
		store := taskstore.NewInMemory(&taskstore.InMemoryStoreConfig{Authenticator: a2asrv.NewTaskStoreAuthenticator()})
		w.steer = steering.New(steering.Config{Modes: steering.Modes{Steerable: true, Interruptible: true}, Name: name, Tasks: store})
		card.Capabilities.Extensions = []a2a.AgentExtension{w.steer.Extension()}
		opts = append(opts, a2asrv.WithTaskStore(store), a2asrv.WithCallInterceptors(w.steer.Interceptor()),
			a2asrv.WithExecutorContextInterceptor(w.steer.ExecutorInterceptor()))
	}
	handler := a2asrv.NewHandler(w, append(opts, a2asrv.WithLogger(slog.New(slog.DiscardHandler)))...)
	if version == "0.3" {
		mux.Handle("/a2a", a2av0.NewJSONRPCHandler(handler))
		mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card)))
	} else {
		mux.Handle("/a2a", steering.Echo(a2asrv.NewJSONRPCHandler(handler)))
		mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	}
	return srv
}

// node is a running orchd.
type node struct {
	url  string
	stop func()
}

func startOrchd(self string, skills []string, policyDir string, agents ...registry.Spec) (*node, error) {
	cfg, err := orchestrator.LoadConfig("")
	if err != nil {
		return nil, err
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.Delegation.Self = self
	cfg.Agent.Name = "orchd " + strings.ToUpper(self)
	for _, s := range skills {
		cfg.Agent.Skills = append(cfg.Agent.Skills, orchestrator.SkillConfig{ID: s, Tags: []string{"orchestrator"}})
	}
	cfg.Agents = agents
	if policyDir != "" {
		cfg.Policies.Paths = []string{policyDir}
	}
	log := slog.New(slog.DiscardHandler)
	d, err := orchestrator.New(cfg, log)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	for d.Addr() == nil {
		select {
		case err := <-done:
			cancel()
			return nil, err
		case <-time.After(5 * time.Millisecond):
		}
	}
	stop := func() { cancel(); <-done } //nolint:errcheck // Run ends with the cancellation it was asked for
	return &node{url: "http://" + d.Addr().String(), stop: stop}, nil
}

func run() error {
	c := serveWorker("C", "research", "1.0", true)
	defer c.Close()
	d := serveWorker("D", "research,draft", "1.0", false)
	defer d.Close()
	e := serveWorker("E", "legacy", "0.3", false)
	defer e.Close()
	f := serveWorker("F", "future", "2.0", false)
	defer f.Close()

	// B's policy: research goes only to steerable agents. A's policy: only
	// the acme tenant may delegate.
	dir, err := os.MkdirTemp("", "orchd-chain")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bPolicies, aPolicies := filepath.Join(dir, "b"), filepath.Join(dir, "a")
	for p, body := range map[string]string{
		bPolicies: `policy: steerable-research
default: allow
rules:
  - name: research-needs-steering
    when: request.skill == "research"
    deny: '!agent.supports("steerable")'
    reasonExpression: '"research needs a steerable agent and " + agent.id + " is not"'
`,
		aPolicies: `policy: acme-only
default: allow
rules:
  - name: acme-only
    deny: 'has(request.metadata.tenant) && request.metadata.tenant != "acme"'
    reasonExpression: '"tenant " + string(request.metadata.tenant) + " may not delegate here"'
`,
	} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(p, "policy.yaml"), []byte(body), 0o644); err != nil {
			return err
		}
	}

	b, err := startOrchd("b", []string{"research", "draft", "legacy", "future", "loop"}, bPolicies,
		registry.Spec{ID: "c", URL: c.URL}, registry.Spec{ID: "d", URL: d.URL},
		registry.Spec{ID: "e", URL: e.URL}, registry.Spec{ID: "f", URL: f.URL})
	if err != nil {
		return fmt.Errorf("start B: %w", err)
	}
	defer b.stop()
	a, err := startOrchd("a", []string{"loop"}, aPolicies, registry.Spec{ID: "b", URL: b.url})
	// (A registers B once; B's card lists every skill B routes.)
	if err != nil {
		return fmt.Errorf("start A: %w", err)
	}
	defer a.stop()
	// B routes "loop" back to A: A → B → A is a cycle.
	if err := post(b.url+"/v1/agents", map[string]string{"id": "a", "url": a.url}, nil); err != nil {
		return fmt.Errorf("register A at B: %w", err)
	}
	fmt.Printf("orchd A at %s knows B; orchd B at %s knows C, D, E, F and A\n\n", a.url, b.url)

	steps := []struct {
		title string
		req   delegation.Request
		want  a2a.TaskState // "" means refused at A
		check string        // text the outcome must contain
	}{
		{"1. research A→B→C: B's policy refuses D, C is steerable", delegation.Request{Text: "survey agent steering", Skill: "research"},
			a2a.TaskStateCompleted, "research needs a steerable agent and d is not"},
		{"2. a future-only agent: F is refused for its version at B", delegation.Request{Text: "use the 2.0 wire", Skill: "future"},
			a2a.TaskStateRejected, "f: protocol: speaks only 2.0 over JSONRPC; orchd speaks 0.3, 1.0"},
		{"3. a policy refusal at A, before anything is sent", delegation.Request{Text: "x", Skill: "research", Metadata: map[string]any{"tenant": "globex"}},
			"", "tenant globex may not delegate here"},
		{"4. a cycle: B would route back to A", delegation.Request{Text: "go round", Skill: "loop"},
			a2a.TaskStateRejected, "orchd A (a) is already in the delegation path orchd A (a) → orchd B (b)"},
		{"5. an A2A 0.3 round trip through E", delegation.Request{Text: "old-school", Skill: "legacy"},
			a2a.TaskStateCompleted, "E's findings"},
	}
	var failed []string
	for _, s := range steps {
		fmt.Println(s.title)
		outcome, state, err := delegate(a.url, s.req)
		if err != nil {
			return err
		}
		if at, err := refusedAt(b.url); state == a2a.TaskStateCompleted && err == nil && at != "" {
			outcome += "\n" + at
		}
		fmt.Println("   " + strings.ReplaceAll(outcome, "\n", "\n   "))
		if state != s.want || !strings.Contains(outcome, s.check) {
			failed = append(failed, s.title)
			fmt.Printf("   UNEXPECTED: want %s containing %q\n", orRefused(s.want), s.check)
		}
		fmt.Println()
	}
	if err := steer(a.url); err != nil {
		failed = append(failed, err.Error())
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d steps did not turn out as described: %s", len(failed), strings.Join(failed, "; "))
	}
	fmt.Println("all eight steps turned out as described")
	return nil
}

// steer walks through steering across the chain.
func steer(a string) error {
	start := func(req delegation.Request) (delegation.Record, error) {
		var rec delegation.Record
		if err := post(a+"/v1/delegations", req, &rec); err != nil {
			return rec, err
		}
		return rec, waitState(a, &rec, a2a.TaskStateWorking)
	}
	var r steering.Receipt
	hops := func(r steering.Receipt) string {
		var out []string
		for _, h := range r.Hops {
			out = append(out, fmt.Sprintf("%s #%d", h.Agent, h.Seq))
		}
		return strings.Join(out, " → ")
	}

	fmt.Println("6. a steer reaches C through B while C keeps working")
	rec, err := start(delegation.Request{Text: "long: survey agent steering", Skill: "research", Requires: []string{"steerable", "interruptible"}})
	if err != nil {
		return fmt.Errorf("step 6: %w", err)
	}
	if err := post(a+"/v1/delegations/"+rec.ID+":steer", map[string]string{"text": "only 2025 papers", "referenceMessageId": "out-1"}, &r); err != nil {
		return fmt.Errorf("step 6: %w", err)
	}
	fmt.Printf("   steer %d accepted by %s\n\n", r.Seq, hops(r))
	if len(r.Hops) != 3 || r.Hops[2].Agent != "C" {
		return fmt.Errorf("step 6: receipt %+v does not reach C", r)
	}

	fmt.Println("7. an interrupt settles through B; the next message resumes the same tasks")
	if err := post(a+"/v1/delegations/"+rec.ID+":interrupt", map[string]string{"text": "stop: the premise changed"}, &r); err != nil {
		return fmt.Errorf("step 7: %w", err)
	}
	if err := get(a+"/v1/delegations/"+rec.ID, &rec); err != nil {
		return fmt.Errorf("step 7: %w", err)
	}
	if rec.State != a2a.TaskStateInputRequired {
		return fmt.Errorf("step 7: after the interrupt A's delegation is %s", rec.State)
	}
	fmt.Printf("   interrupt %d accepted by %s; A's delegation is %s\n", r.Seq, hops(r), rec.State)
	if err := post(a+"/v1/delegations/"+rec.ID+"/messages", map[string]string{"text": "the premise is now 2026"}, nil); err != nil {
		return fmt.Errorf("step 7: %w", err)
	}
	if err := waitState(a, &rec, a2a.TaskStateWorking); err != nil {
		return fmt.Errorf("step 7: %w", err)
	}
	if err := post(a+"/v1/delegations/"+rec.ID+":steer", map[string]string{"text": "finish"}, &r); err != nil {
		return fmt.Errorf("step 7: %w", err)
	}
	if err := waitState(a, &rec, a2a.TaskStateCompleted); err != nil {
		return fmt.Errorf("step 7: %w", err)
	}
	fmt.Printf("   resumed and %s: %s\n\n", rec.State, text(rec.Result))

	fmt.Println("8. a steer for D, which cannot be steered, is refused at B")
	rec, err = start(delegation.Request{Text: "long: draft the summary", Skill: "draft"})
	if err != nil {
		return fmt.Errorf("step 8: %w", err)
	}
	err = post(a+"/v1/delegations/"+rec.ID+":steer", map[string]string{"text": "shorter"}, &r)
	fmt.Printf("   %v\n\n", err)
	_ = post(a+"/v1/delegations/"+rec.ID+":cancel", nil, nil)
	if err == nil {
		return errors.New("step 8: want B to refuse naming d, got no error")
	}
	if !strings.Contains(err.Error(), "hop d does not advertise the steerable mode") {
		return fmt.Errorf("step 8: want B to refuse naming d, got: %w", err)
	}
	return nil
}

// waitState polls the delegation until it reaches state.
func waitState(base string, rec *delegation.Record, state a2a.TaskState) error {
	deadline := time.Now().Add(10 * time.Second)
	for rec.State != state {
		if time.Now().After(deadline) {
			return fmt.Errorf("delegation %s stayed %s, want %s (%s)", rec.ID, rec.State, state, rec.Error)
		}
		time.Sleep(10 * time.Millisecond)
		if err := get(base+"/v1/delegations/"+rec.ID, rec); err != nil {
			return err
		}
	}
	return nil
}

func orRefused(s a2a.TaskState) string {
	if s == "" {
		return "a refusal"
	}
	return string(s)
}

// delegate asks A to delegate, waits for the end, and describes it.
func delegate(base string, req delegation.Request) (string, a2a.TaskState, error) {
	var rec delegation.Record
	err := post(base+"/v1/delegations", req, &rec)
	var refused *refusal
	if errors.As(err, &refused) {
		return "refused at A: " + refused.message, "", nil
	}
	if err != nil {
		return "", "", err
	}
	deadline := time.Now().Add(10 * time.Second)
	for !rec.State.Terminal() {
		if time.Now().After(deadline) {
			return "", "", fmt.Errorf("delegation %s stuck in %s", rec.ID, rec.State)
		}
		time.Sleep(20 * time.Millisecond)
		if err := get(base+"/v1/delegations/"+rec.ID, &rec); err != nil {
			return "", "", err
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s via %s: %s", rec.State, rec.Downstream.Agent, rec.Error)
	for _, art := range rec.Artifacts {
		for _, p := range art.Parts {
			if t, ok := p.Content.(a2a.Text); ok {
				fmt.Fprintf(&b, "artifact %q", string(t))
			}
		}
	}
	return strings.TrimSpace(b.String()), rec.State, nil
}

// refusedAt describes the candidates B refused in its latest delegation.
func refusedAt(base string) (string, error) {
	var l httpapi.DelegationList
	if err := get(base+"/v1/delegations", &l); err != nil || len(l.Delegations) == 0 {
		return "", err
	}
	var out []string
	for _, c := range l.Delegations[0].Decision.Candidates {
		if !c.Allowed {
			out = append(out, fmt.Sprintf("B refused %s: %s", c.Agent, strings.Join(c.Reasons, "; ")))
		}
	}
	return strings.Join(out, "\n"), nil
}

type refusal struct{ message string }

func (r *refusal) Error() string { return r.message }

func post(url string, in, out any) error {
	body, err := json.Marshal(in)
	if err != nil {
		return err
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	return decode(resp, out)
}

func get(url string, out any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	return decode(resp, out)
}

func decode(resp *http.Response, out any) error {
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e httpapi.ErrorBody
		_ = json.Unmarshal(b, &e)
		if e.Error.Code == "refused" {
			return &refusal{message: e.Error.Message}
		}
		if e.Error.Message != "" {
			return fmt.Errorf("HTTP %d %s: %s", resp.StatusCode, e.Error.Code, e.Error.Message)
		}
		return fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(b)))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(b, out)
}
