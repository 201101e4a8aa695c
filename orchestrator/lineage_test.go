package orchestrator

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// getAs reads the delegation at base as the caller with token.
func getAs(t *testing.T, token, base, id string) delegation.Record {
	t.Helper()
	var rec delegation.Record
	if code, _ := callAs(t, token, "GET", base+"/v1/delegations/"+id, "", &rec); code != 200 {
		t.Fatalf("GET delegation = %d", code)
	}
	return rec
}

// waitLineage reads the delegation at base until ok says its record is
// as wanted, and returns it.
func waitLineage(t *testing.T, base, id, what string, ok func(delegation.Record) error) delegation.Record {
	t.Helper()
	var rec delegation.Record
	testwait.Succeeds(t, 10*time.Second, what, func() error {
		rec = getAs(t, "", base, id)
		return ok(rec)
	})
	return rec
}

// leafIs checks that the last hop of rec's lineage is the agent with id
// and name at the state, its task named.
func leafIs(rec delegation.Record, hops int, agent, name string, state a2a.TaskState) error {
	l := rec.Lineage
	switch {
	case l == nil:
		return fmt.Errorf("no lineage yet (state %s)", rec.State)
	case len(l.Hops) != hops:
		return fmt.Errorf("lineage has %d hops, want %d: %+v", len(l.Hops), hops, l.Hops)
	}
	leaf := l.Hops[hops-1]
	if leaf.Agent != agent || leaf.AgentName != name || leaf.State != state || leaf.TaskID == "" || leaf.CardDigest == "" {
		return fmt.Errorf("leaf hop %+v, want agent %s (%s) %s with its task and card digest", leaf, agent, name, state)
	}
	return nil
}

// A → B → D → agent: A's API shows every hop's agent, state and timings
// down to the leaf agent as the work goes, before any steer, and the
// console's tree page shows the leaf too.
func TestLineage_RootSeesTheLeafBeforeAnySteer(t *testing.T) {
	t.Parallel()
	hold := make(chan struct{})
	leaf := testagent.Start(t, testagent.Options{Name: "Leaf researcher", Skill: "research", Streaming: true}, testagent.Stream(1, 1, 8, hold))
	d := orchdNode(t, "d", "research", registry.Spec{ID: "leaf", URL: leaf.URL})
	b := orchdNode(t, "b", "research", registry.Spec{ID: "d", URL: d})
	a := orchdNode(t, "a", "research", registry.Spec{ID: "b", URL: b})

	var rec delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("delegate at A = %d %+v", code, rec)
	}
	working := waitLineage(t, a, rec.ID, "A's lineage naming the leaf WORKING", func(r delegation.Record) error {
		if err := leafIs(r, 2, "leaf", "Leaf researcher", a2a.TaskStateWorking); err != nil {
			return err
		}
		if s := r.Lineage.Hops[0].State; s != a2a.TaskStateWorking {
			return fmt.Errorf("B's hop is %s", s)
		}
		return nil
	})
	mid := working.Lineage.Hops[0]
	if mid.Orchd != "b" || mid.Name != "orchd b" || mid.Agent != "d" || mid.AgentName != "orchd d" || mid.State != a2a.TaskStateWorking ||
		mid.TaskID == "" || mid.Delegation == "" || mid.CreatedAt.IsZero() || mid.UpdatedAt.Before(mid.CreatedAt) {
		t.Errorf("B's hop at A: %+v", mid)
	}
	if low := working.Lineage.Hops[1]; low.Orchd != "d" || low.CreatedAt.IsZero() {
		t.Errorf("D's hop at A: %+v", low)
	}
	if working.Downstream.Name != "orchd b" {
		t.Errorf("A's downstream hop is named %q, want orchd b", working.Downstream.Name)
	}
	if sigs := leaf.Signals(); len(sigs) != 0 {
		t.Fatalf("a steer went down the chain: %+v", sigs)
	}

	_, _, page := browse(t, "GET", a+"/ui/delegations/"+rec.ID, "", nil)
	wantIn(t, "the tree page", page, "Leaf researcher", `data-role="agent below"`, "orchd d", "working")
	if strings.Contains(page, `id="below-unknown"`) {
		t.Errorf("the tree page still waits for a steer to name the hops below")
	}

	close(hold)
	done := waitLineage(t, a, rec.ID, "A's lineage naming the leaf COMPLETED", func(r delegation.Record) error {
		return leafIs(r, 2, "leaf", "Leaf researcher", a2a.TaskStateCompleted)
	})
	if done.State != a2a.TaskStateCompleted {
		t.Errorf("A's delegation is %s", done.State)
	}
	if h := done.Lineage.Hops[1]; !h.UpdatedAt.After(working.Lineage.Hops[1].UpdatedAt) {
		t.Errorf("the leaf's hop kept its time: %v then %v", working.Lineage.Hops[1].UpdatedAt, h.UpdatedAt)
	}
}

// forging is an agent that claims a lineage of its own on its task and
// its status updates, as an orchd reports one, and then works until
// canceled: a ghost hop below it that does not exist.
func forging() testagent.Behaviour {
	return func(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		md := func() map[string]any {
			return map[string]any{delegation.ExtensionURI: map[string]any{"delegation": "forged", "lineage": map[string]any{
				"hops": []any{map[string]any{"orchd": "orchd-forged", "agent": "ghost", "state": "TASK_STATE_COMPLETED"}}}}}
		}
		task := a2a.NewSubmittedTask(ec, ec.Message)
		task.Metadata = md()
		if !yield(task, nil) {
			return
		}
		st := a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("forged")))
		st.Metadata = md()
		if !yield(st, nil) {
			return
		}
		<-ctx.Done()
	}
}

// A lineage is believed only from a hop whose card declares the
// delegation extension and that the root trusts: every such hop on a
// daemon without authentication, else only agents configured as peers.
// An agent claiming a lineage otherwise is a leaf.
func TestLineage_ForgedLineageIsIgnored(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name                          string
		authenticated, peer, declares bool
		believed                      bool
	}{
		{name: "authenticated root, agent not a peer", authenticated: true, declares: true},
		{name: "authenticated root, agent a peer", authenticated: true, peer: true, declares: true, believed: true},
		{name: "open root, agent not declaring the extension"},
		{name: "open root, agent declaring the extension", declares: true, believed: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := testagent.Options{Name: "Forger", Skill: "research", Streaming: true}
			if tt.declares {
				o.Extensions = chainReader
			}
			forger := testagent.Start(t, o, forging())
			cfg := nodeConfig(t, "a", "research", registry.Spec{ID: "forger", URL: forger.URL, Peer: tt.peer})
			token := ""
			if tt.authenticated {
				cfg.Auth, token = authTokens(), aliceToken
			}
			a := startDaemon(t, cfg)
			var rec delegation.Record
			if code, _ := callAs(t, token, "POST", a+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
				t.Fatalf("delegate = %d %+v", code, rec)
			}
			testwait.Succeeds(t, 10*time.Second, "the forger's status reaching A", func() error {
				rec = getAs(t, token, a, rec.ID)
				if rec.State != a2a.TaskStateWorking || rec.LastEvent < 1 {
					return fmt.Errorf("it is %s after event %d", rec.State, rec.LastEvent)
				}
				return nil
			})
			switch {
			case tt.believed && (rec.Lineage == nil || len(rec.Lineage.Hops) != 1 || rec.Lineage.Hops[0].Agent != "ghost"):
				t.Errorf("lineage %+v, want the one the agent reported", rec.Lineage)
			case !tt.believed && rec.Lineage != nil:
				t.Errorf("lineage %+v believed from an agent that is not trusted", rec.Lineage)
			}
			if code, _ := callAs(t, token, "POST", a+"/v1/delegations/"+rec.ID+":cancel", "", nil); code != 200 {
				t.Errorf("cancel = %d", code)
			}
		})
	}
}

// With authentication on both sides, B reports its lineage only to an
// orchd whose chain it believes (auth.peers), and A believes it only from
// an agent it marks as a peer: A → B → leaf shows the leaf at A only when
// both trust each other.
func TestLineage_OnlyBetweenPeers(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name              string
		bTrustsA, aMarksB bool
	}{
		{name: "B does not trust A", aMarksB: true},
		{name: "A does not mark B as a peer", bTrustsA: true},
		{name: "peers both ways", bTrustsA: true, aMarksB: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			leaf := testagent.Start(t, testagent.Options{Name: "Leaf", Skill: "research", Streaming: true}, testagent.Hang())
			const peerToken = "orchd-a-to-b-0123456789"
			b := nodeConfig(t, "b", "research", registry.Spec{ID: "leaf", URL: leaf.URL})
			b.Auth = AuthConfig{Config: auth.Config{Tokens: []auth.TokenConfig{{SHA256: sha256Hex(peerToken), Principal: "orchd-a"}}}}
			if tt.bTrustsA {
				b.Auth.Peers = []string{"token:orchd-a"}
			}
			bURL := startDaemon(t, b)
			tokenFile := t.TempDir() + "/b.token"
			writeFile(t, tokenFile, peerToken+"\n")
			a := nodeConfig(t, "a", "research", registry.Spec{ID: "b", URL: bURL, Peer: tt.aMarksB,
				Credentials: &credentials.Config{Bearer: &credentials.Bearer{TokenFile: tokenFile}}})
			a.Auth = authTokens()
			aURL := startDaemon(t, a)

			var rec delegation.Record
			if code, _ := callAs(t, aliceToken, "POST", aURL+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
				t.Fatalf("delegate = %d %+v", code, rec)
			}
			leaf.WaitCalls(t, "SendStreamingMessage", 1)
			believed := tt.bTrustsA && tt.aMarksB
			testwait.Succeeds(t, 10*time.Second, "A's record working", func() error {
				rec = getAs(t, aliceToken, aURL, rec.ID)
				switch {
				case rec.State != a2a.TaskStateWorking:
					return fmt.Errorf("it is %s", rec.State)
				case believed:
					return leafIs(rec, 1, "leaf", "Leaf", a2a.TaskStateWorking)
				}
				return nil
			})
			if !believed && rec.Lineage != nil {
				t.Errorf("lineage %+v at A, want none", rec.Lineage)
			}
			if code, _ := callAs(t, aliceToken, "POST", aURL+"/v1/delegations/"+rec.ID+":cancel", "", nil); code != 200 {
				t.Errorf("cancel = %d", code)
			}
		})
	}
}

// A question asked at the leaf of A → B → leaf reaches A, whose lineage
// names the hop that asked (the deepest one waiting), and the answer sent
// at A reaches that task at the leaf.
func TestLineage_LeafQuestionIsAnsweredAtTheRoot(t *testing.T) {
	t.Parallel()
	asker := testagent.Start(t, testagent.Options{Name: "Asker", Skill: "ask", Streaming: true}, testagent.Ask())
	b := orchdNode(t, "b", "ask", registry.Spec{ID: "asker", URL: asker.URL})
	a := orchdNode(t, "a", "ask", registry.Spec{ID: "b", URL: b})

	var rec delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "when?", "skill": "ask"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waiting := waitLineage(t, a, rec.ID, "A waiting, its lineage naming the asker", func(r delegation.Record) error {
		if r.State != a2a.TaskStateInputRequired {
			return fmt.Errorf("A is %s", r.State)
		}
		return leafIs(r, 1, "asker", "Asker", a2a.TaskStateInputRequired)
	})
	if q := waiting.Lineage.Hops[0]; q.Orchd != "b" {
		t.Errorf("the asking hop is below %q, want b", q.Orchd)
	}
	asked := waiting.Lineage.Hops[0].TaskID

	if code := call(t, "POST", a+"/v1/delegations/"+rec.ID+"/messages", `{"text": "2026"}`, &rec); code != 200 {
		t.Fatalf("answer at A = %d", code)
	}
	done := waitLineage(t, a, rec.ID, "A's lineage naming the asker COMPLETED", func(r delegation.Record) error {
		return leafIs(r, 1, "asker", "Asker", a2a.TaskStateCompleted)
	})
	if done.Result == nil || testagent.Text(done.Result) != "answered: 2026" {
		t.Errorf("result at A = %+v", done.Result)
	}
	msgs := asker.Messages()
	if len(msgs) != 2 || msgs[1].TaskID != asked || testagent.Text(msgs[1]) != "2026" {
		t.Fatalf("the asker got %d messages; want the answer 2026 on the task that asked, %s", len(msgs), asked)
	}
}

// authorizing wants authentication (AUTH_REQUIRED, "sign in") and goes
// on once signed is closed, out of band, as an a2a-go agent does: its
// execution runs on through AUTH_REQUIRED. It then completes.
func authorizing(signed <-chan struct{}) testagent.Behaviour {
	return func(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateAuthRequired, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("sign in"))), nil) {
			return
		}
		select {
		case <-signed:
		case <-ctx.Done():
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("signed in"))), nil)
	}
}

// signingAgent is an a2a-go agent that asks to be signed in
// (AUTH_REQUIRED, "sign in") and takes the caller's next message to the
// task as the credential: a2a-go runs the execution on through
// AUTH_REQUIRED, so its interceptor hands the message to the running
// execution and answers with the task WORKING, as orchd's own does. The
// execution then completes with "signed in with " and the message.
type signingAgent struct {
	a2asrv.PassthroughCallInterceptor
	mu     sync.Mutex
	tokens map[a2a.TaskID]chan string
	got    []*a2a.Message
}

func (s *signingAgent) inbox(id a2a.TaskID) chan string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tokens[id] == nil {
		s.tokens[id] = make(chan string, 1)
	}
	return s.tokens[id]
}

func (s *signingAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateAuthRequired, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("sign in"))), nil) {
			return
		}
		select {
		case tok := <-s.inbox(ec.TaskID):
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("signed in with "+tok))), nil)
		case <-ctx.Done():
		}
	}
}

func (s *signingAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

func (s *signingAgent) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	smr, ok := req.Payload.(*a2a.SendMessageRequest)
	if !ok || smr.Message == nil || smr.Message.TaskID == "" {
		return ctx, nil, nil
	}
	s.mu.Lock()
	s.got = append(s.got, smr.Message)
	s.mu.Unlock()
	s.inbox(smr.Message.TaskID) <- testagent.Text(smr.Message)
	return ctx, &a2a.Task{ID: smr.Message.TaskID, ContextID: smr.Message.ContextID, Status: a2a.TaskStatus{State: a2a.TaskStateWorking}}, nil
}

// startSigning serves a signingAgent with its card (streaming) on 127.0.0.1.
func startSigning(t *testing.T) (*signingAgent, string) {
	t.Helper()
	s := &signingAgent{tokens: map[a2a.TaskID]chan string{}}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	card := &a2a.AgentCard{Name: "Vault", Description: "signs in", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL+"/rpc", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: true},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "vault", Name: "vault", Tags: []string{"vault"}}}}
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(s, a2asrv.WithCallInterceptors(s))))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	return s, srv.URL
}

// An authentication request at the leaf of A → B → leaf reaches A, whose
// lineage names the hop that asked, and the answer sent at A reaches that
// task at the leaf through B, whose a2a-go execution of its own task runs
// on through AUTH_REQUIRED.
func TestLineage_LeafAuthRequestIsAnsweredAtTheRoot(t *testing.T) {
	t.Parallel()
	vault, vaultURL := startSigning(t)
	b := orchdNode(t, "b", "vault", registry.Spec{ID: "vault", URL: vaultURL})
	a := orchdNode(t, "a", "vault", registry.Spec{ID: "b", URL: b})

	var rec delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "open", "skill": "vault"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waiting := waitLineage(t, a, rec.ID, "A waiting for authentication, its lineage naming the vault", func(r delegation.Record) error {
		if r.State != a2a.TaskStateAuthRequired {
			return fmt.Errorf("A is %s", r.State)
		}
		return leafIs(r, 1, "vault", "Vault", a2a.TaskStateAuthRequired)
	})
	asked := waiting.Lineage.Hops[0].TaskID
	if code := call(t, "POST", a+"/v1/delegations/"+rec.ID+"/messages", `{"text": "token 42"}`, &rec); code != 200 {
		t.Fatalf("answer at A = %d %+v", code, rec)
	}
	done := waitLineage(t, a, rec.ID, "A completed, its lineage naming the vault COMPLETED", func(r delegation.Record) error {
		if r.State != a2a.TaskStateCompleted {
			return fmt.Errorf("A is %s", r.State)
		}
		return leafIs(r, 1, "vault", "Vault", a2a.TaskStateCompleted)
	})
	if done.Result == nil || testagent.Text(done.Result) != "signed in with token 42" {
		t.Errorf("result at A = %+v", done.Result)
	}
	vault.mu.Lock()
	got := slices.Clone(vault.got)
	vault.mu.Unlock()
	if len(got) != 1 || got[0].TaskID != asked {
		t.Errorf("the vault got %d answers; want one, on the task that asked, %s", len(got), asked)
	}
}

// An agent that takes no message while it waits for authentication (an
// a2a-go agent with no interceptor for it) refuses the answer, and the
// refusal reaches A naming every hop; the work still waits, followed at
// every hop, so when the agent is authorized out of band and goes on, A
// completes.
func TestLineage_LeafRefusingTheAuthAnswerIsNamedAtTheRoot(t *testing.T) {
	t.Parallel()
	signed := make(chan struct{})
	leaf := testagent.Start(t, testagent.Options{Name: "Vault", Skill: "vault", Streaming: true}, authorizing(signed))
	b := orchdNode(t, "b", "vault", registry.Spec{ID: "vault", URL: leaf.URL})
	a := orchdNode(t, "a", "vault", registry.Spec{ID: "b", URL: b})

	var rec delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "open", "skill": "vault"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waitLineage(t, a, rec.ID, "A waiting for authentication", func(r delegation.Record) error {
		return leafIs(r, 1, "vault", "Vault", a2a.TaskStateAuthRequired)
	})
	var answer struct {
		Error struct{ Message string } `json:"error"`
	}
	if code := call(t, "POST", a+"/v1/delegations/"+rec.ID+"/messages", `{"text": "token 42"}`, &answer); code != 500 ||
		!strings.Contains(answer.Error.Message, "send input to b: send input to vault: task execution is already in progress") {
		t.Errorf("an answer at A = %d %q, want the vault's refusal naming b and the vault", code, answer.Error.Message)
	}
	if n := len(leaf.Messages()); n != 1 {
		t.Errorf("the vault's executor got %d messages, want the work alone", n)
	}
	close(signed)
	done := waitLineage(t, a, rec.ID, "A completed once the vault went on", func(r delegation.Record) error {
		if r.State != a2a.TaskStateCompleted {
			return fmt.Errorf("A is %s", r.State)
		}
		return leafIs(r, 1, "vault", "Vault", a2a.TaskStateCompleted)
	})
	if done.Result == nil || testagent.Text(done.Result) != "signed in" {
		t.Errorf("result at A = %+v", done.Result)
	}
}

// An agent authorized out of band goes on by itself: every orchd follows
// its task through AUTH_REQUIRED, so A completes with it, and a cancel
// at A while it waits reaches it.
func TestLineage_LeafAuthorizedOutOfBandGoesOn(t *testing.T) {
	t.Parallel()
	signed, stuck := make(chan struct{}), make(chan struct{})
	leaf := testagent.Start(t, testagent.Options{Name: "Vault", Skill: "vault", Streaming: true}, func(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
		if testagent.Text(ec.Message) == "stuck" {
			authorizing(stuck)(ctx, ec, yield)
			return
		}
		authorizing(signed)(ctx, ec, yield)
	})
	b := orchdNode(t, "b", "vault", registry.Spec{ID: "vault", URL: leaf.URL})
	a := orchdNode(t, "a", "vault", registry.Spec{ID: "b", URL: b})

	var rec, other delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "open", "skill": "vault"}`, &rec); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "stuck", "skill": "vault"}`, &other); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	for _, id := range []string{rec.ID, other.ID} {
		waitLineage(t, a, id, "A waiting for authentication", func(r delegation.Record) error {
			return leafIs(r, 1, "vault", "Vault", a2a.TaskStateAuthRequired)
		})
	}
	close(signed)
	waitLineage(t, a, rec.ID, "A completed once the vault went on", func(r delegation.Record) error {
		if r.State != a2a.TaskStateCompleted {
			return fmt.Errorf("A is %s", r.State)
		}
		return leafIs(r, 1, "vault", "Vault", a2a.TaskStateCompleted)
	})
	if code := call(t, "POST", a+"/v1/delegations/"+other.ID+":cancel", "", &other); code != 200 || other.State != a2a.TaskStateCanceled {
		t.Errorf("cancel at A = %d %s (%s)", code, other.State, other.Error)
	}
	testwait.Until(t, 10*time.Second, "the vault seeing the cancel", func() bool { return leaf.Cancels() > 0 })
}

// The root keeps the lineage in its store: A, killed with SIGKILL while
// the leaf works, shows it again once started on the same state
// directory, and goes on believing B's, so the leaf's end reaches A's
// record too.
func TestLineage_RootKeepsItAcrossAKillNine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a daemon as a process and kills it")
	}
	t.Parallel()
	hold := make(chan struct{})
	leaf := testagent.Start(t, testagent.Options{Name: "Leaf", Skill: "research", Streaming: true}, testagent.Stream(1, 1, 8, hold))
	b := orchdNode(t, "b", "research", registry.Spec{ID: "leaf", URL: leaf.URL})
	a := childDaemon(t, t.TempDir(), "agents:\n  - id: b\n    url: "+b+"\n")

	var rec delegation.Record
	if code := call(t, "POST", a.base+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("delegate at A = %d %+v", code, rec)
	}
	before := waitLineage(t, a.base, rec.ID, "A's lineage naming the leaf WORKING", func(r delegation.Record) error {
		return leafIs(r, 1, "leaf", "Leaf", a2a.TaskStateWorking)
	})
	a.kill()
	a.start()
	var after delegation.Record
	if code := call(t, "GET", a.base+"/v1/delegations/"+rec.ID, "", &after); code != 200 {
		t.Fatalf("GET after the restart = %d", code)
	}
	if after.Lineage == nil || len(after.Lineage.Hops) != 1 || after.Lineage.Hops[0].TaskID != before.Lineage.Hops[0].TaskID {
		t.Errorf("lineage after the restart %+v, want the one before it, %+v", after.Lineage, before.Lineage)
	}
	close(hold)
	waitLineage(t, a.base, rec.ID, "A's lineage naming the leaf COMPLETED after the restart", func(r delegation.Record) error {
		return leafIs(r, 1, "leaf", "Leaf", a2a.TaskStateCompleted)
	})
}
