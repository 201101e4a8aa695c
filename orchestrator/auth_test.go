package orchestrator

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testcmp"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// Tokens the auth tests' callers present.
const (
	aliceToken = "alice-acme-0123456789"
	bobToken   = "bob-globex-0123456789"
	rootToken  = "root-admin-0123456789"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// authTokens is an auth section with alice (tenant acme), bob (tenant
// globex) and root (admin), the last two kept only as hashes.
func authTokens() AuthConfig {
	return AuthConfig{Config: auth.Config{Tokens: []auth.TokenConfig{
		{Token: aliceToken, Principal: "alice", Tenant: "acme"},
		{SHA256: sha256Hex(bobToken), Principal: "bob", Tenant: "globex"},
		{SHA256: sha256Hex(rootToken), Principal: "root", Roles: []string{"admin"}},
	}}}
}

func TestAuth_APIAuthenticatesAndKeepsDelegationsToTheirOwners(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true, Extensions: chainReader}, testagent.Hang())
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Telemetry.Prometheus = true
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)

	// Health, the card and the API's description stay open; everything
	// else needs credentials.
	if code, _ := callAs(t, "", "GET", base+"/healthz", "", nil); code != 200 {
		t.Errorf("healthz without credentials = %d", code)
	}
	if code, _ := callAs(t, "", "GET", base+"/openapi.yaml", "", nil); code != 200 {
		t.Errorf("openapi.yaml without credentials = %d", code)
	}
	if code, _ := callAs(t, "", "GET", base+"/.well-known/agent-card.json", "", nil); code != 200 {
		t.Errorf("card without credentials = %d", code)
	}
	var e httpapi.ErrorBody
	code, h := callAs(t, "", "GET", base+"/v1/agents", "", &e)
	if diff := cmp.Diff(refusal{401, "unauthenticated"}, refusalOf(code, e)); diff != "" {
		t.Errorf("agents without credentials (-want +got):\n%s", diff)
	}
	if got := h.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
		t.Errorf("agents without credentials: WWW-Authenticate %q, want Bearer", got)
	}
	code, _ = callAs(t, "wrong-secret-token", "GET", base+"/v1/agents", "", &e)
	if diff := cmp.Diff(refusal{401, "unauthenticated"}, refusalOf(code, e)); diff != "" {
		t.Errorf("agents with a wrong token (-want +got):\n%s", diff)
	}
	if strings.Contains(e.Error.Message, "wrong-secret-token") {
		t.Errorf("agents with a wrong token: the refusal shows the token: %q", e.Error.Message)
	}
	if code, _ := callAs(t, "", "GET", base+"/metrics", "", nil); code != 401 {
		t.Errorf("metrics without credentials = %d", code)
	}
	if code, _ := callAs(t, aliceToken, "GET", base+"/metrics", "", &e); code != 403 || e.Error.Code != "permission_denied" {
		t.Errorf("metrics as alice = %d %+v", code, e)
	}
	if code, _ := callAs(t, rootToken, "GET", base+"/metrics", "", nil); code != 200 {
		t.Errorf("metrics as the admin = %d", code)
	}
	// Registering agents is for admins.
	if code, _ := callAs(t, aliceToken, "POST", base+"/v1/agents", `{"url": "http://127.0.0.1:1"}`, &e); code != 403 {
		t.Errorf("register as alice = %d %+v", code, e)
	}
	if code, _ := callAs(t, aliceToken, "GET", base+"/v1/agents/worker", "", nil); code != 200 {
		t.Errorf("read an agent as alice = %d", code)
	}

	var rec delegation.Record
	if code, _ := callAs(t, aliceToken, "POST", base+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
		t.Fatalf("delegate as alice = %d %+v", code, rec)
	}
	if diff := cmp.Diff(&delegation.Principal{ID: "alice", Tenant: "acme", Method: auth.MethodToken}, rec.Owner); diff != "" {
		t.Errorf("owner (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&delegation.Principal{ID: "alice"}, rec.Chain.OnBehalfOf, testcmp.Only[delegation.Principal]("ID")); diff != "" {
		t.Errorf("chain's onBehalfOf (-want +got):\n%s", diff)
	}
	// The agent hears whom the work is for.
	worker.WaitCalls(t, "SendStreamingMessage", 1)
	if chain, _, _ := delegation.ChainFrom(worker.Messages()[0].Metadata); chain.OnBehalfOf == nil || chain.OnBehalfOf.Tenant != "acme" {
		t.Errorf("chain at the agent = %+v", chain)
	}

	// Bob is told nothing of alice's work: not found, as for no delegation.
	for _, req := range []struct{ method, path string }{
		{"GET", "/v1/delegations/" + rec.ID},
		{"GET", "/v1/delegations/" + rec.ID + "/events"},
		{"POST", "/v1/delegations/" + rec.ID + ":cancel"},
		{"POST", "/v1/delegations/" + rec.ID + ":steer"},
		{"POST", "/v1/delegations/" + rec.ID + "/messages"},
	} {
		var got httpapi.ErrorBody
		if code, _ := callAs(t, bobToken, req.method, base+req.path, `{"text": "mine now"}`, &got); code != 404 || got.Error.Code != "not_found" {
			t.Errorf("%s %s as bob = %d %+v", req.method, req.path, code, got)
		}
	}
	listed := func(token string) []string {
		t.Helper()
		var l httpapi.DelegationList
		if code, _ := callAs(t, token, "GET", base+"/v1/delegations", "", &l); code != 200 {
			t.Fatalf("list = %d", code)
		}
		var ids []string
		for _, r := range l.Delegations {
			ids = append(ids, r.ID)
		}
		return ids
	}
	if ids := listed(bobToken); slices.Contains(ids, rec.ID) {
		t.Errorf("bob lists %v", ids)
	}
	if ids := listed(aliceToken); !slices.Equal(ids, []string{rec.ID}) {
		t.Errorf("alice lists %v", ids)
	}
	if ids := listed(rootToken); !slices.Contains(ids, rec.ID) {
		t.Errorf("the admin lists %v", ids)
	}
	if code, _ := callAs(t, rootToken, "GET", base+"/v1/delegations/"+rec.ID, "", nil); code != 200 {
		t.Errorf("read as the admin = %d", code)
	}
	var canceled delegation.Record
	if code, _ := callAs(t, aliceToken, "POST", base+"/v1/delegations/"+rec.ID+":cancel", "", &canceled); code != 200 || canceled.State != a2a.TaskStateCanceled {
		t.Errorf("cancel as alice = %d %+v", code, canceled.State)
	}
}

// bearer is an http.RoundTripper that sends a bearer token.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// a2aAs is an A2A client of orchd at base authenticating with token.
func a2aAs(t *testing.T, base, token string) *a2aclient.Client {
	t.Helper()
	hc := &http.Client{Transport: bearer{token}}
	return securedClient(t, base, a2aclient.WithJSONRPCTransport(hc))
}

// securedClient is an a2a-go client of an orchd that declares security,
// built from the card at the 0.2-era path: a2a-go v2.4.0 cannot read the
// 1.0 card's security requirements (docs/a2a.md, "Card per version").
func securedClient(t *testing.T, base string, opts ...a2aclient.FactoryOption) *a2aclient.Client {
	t.Helper()
	return testagent.ClientAt(t, base, "/.well-known/agent.json", opts...)
}

// taskIDs lists the tasks' ids, in order.
func taskIDs(tasks []*a2a.Task) []a2a.TaskID {
	ids := make([]a2a.TaskID, len(tasks))
	for i, task := range tasks {
		ids[i] = task.ID
	}
	return ids
}

func TestAuth_A2ATasksBelongToTheirCallers(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true, Extensions: chainReader}, testagent.Work(10*time.Millisecond))
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)

	// orchd's card says how to authenticate.
	var card map[string]any
	if code := call(t, "GET", base+"/.well-known/agent-card.json", "", &card); code != 200 {
		t.Fatalf("card = %d", code)
	}
	for _, field := range []string{"securitySchemes", "securityRequirements"} {
		if card[field] == nil {
			t.Errorf("the card has no %s", field)
		}
	}

	alice, bob := a2aAs(t, base, aliceToken), a2aAs(t, base, bobToken)
	res, err := alice.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey"))})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage = %T", res)
	}
	list, err := alice.ListTasks(t.Context(), &a2a.ListTasksRequest{})
	if err != nil {
		t.Fatalf("alice's ListTasks: %v", err)
	}
	if diff := cmp.Diff([]a2a.TaskID{task.ID}, taskIDs(list.Tasks)); diff != "" {
		t.Errorf("alice's ListTasks (-want +got):\n%s", diff)
	}
	list, err = bob.ListTasks(t.Context(), &a2a.ListTasksRequest{})
	if err != nil || len(list.Tasks) != 0 {
		t.Errorf("bob's ListTasks = %+v, %v", list, err)
	}
	if _, err := bob.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's GetTask = %v, want task not found", err)
	}

	// No credentials, or bad ones: A2A's unauthenticated error.
	anon := securedClient(t, base)
	if _, err := anon.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x"))}); !errors.Is(err, a2a.ErrUnauthenticated) {
		t.Errorf("anonymous SendMessage = %v, want unauthenticated", err)
	}
	forged := a2aAs(t, base, "not-a-token-of-ours")
	if _, err := forged.ListTasks(t.Context(), &a2a.ListTasksRequest{}); !errors.Is(err, a2a.ErrUnauthenticated) || strings.Contains(err.Error(), "not-a-token-of-ours") {
		t.Errorf("ListTasks with a bad token = %v, want unauthenticated", err)
	}
}

func TestAuth_ChainContextFromAnUntrustedCallerIsIgnored(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true, Extensions: chainReader}, testagent.Work(10*time.Millisecond))
	cfg := loadDefaults(t)
	cfg.Delegation.Self = "hub"
	cfg.Auth = authTokens()
	cfg.Auth.Peers = []string{"token:root"} // alice is no peer
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)

	// Alice forges a chain that, believed, would be refused as a cycle
	// through this hub, work for bob's tenant and skip the requirement.
	forgedChain := func() *a2a.Message {
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey"))
		delegation.Chain{Path: []string{"gateway", "hub"}, Depth: 2, MaxDepth: 8, Skill: "research",
			Verified: []string{"root", "root"}, OnBehalfOf: &delegation.Principal{ID: "bob", Tenant: "globex"}}.Attach(m)
		return m
	}
	res, err := a2aAs(t, base, aliceToken).SendMessage(t.Context(), &a2a.SendMessageRequest{Message: forgedChain()})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("SendMessage = %+v", res)
	}
	md, _ := task.Metadata[delegation.ExtensionURI].(map[string]any)
	note, _ := md["chainIgnored"].(string)
	id, _ := md["delegation"].(string)
	if !strings.Contains(note, `"alice"`) || !strings.Contains(note, "not a trusted orchd peer") {
		t.Errorf("task metadata = %v", task.Metadata)
	}
	var rec delegation.Record
	if code, _ := callAs(t, aliceToken, "GET", base+"/v1/delegations/"+id, "", &rec); code != 200 {
		t.Fatalf("read delegation %q = %d", id, code)
	}
	want := delegation.Record{ChainIgnored: note, Owner: &delegation.Principal{ID: "alice"},
		Chain: delegation.Chain{Path: []string{"hub"}, Depth: 1, OnBehalfOf: &delegation.Principal{ID: "alice"}}}
	if diff := cmp.Diff(want, rec, testcmp.Only[delegation.Record]("ChainIgnored", "Owner", "Chain"),
		testcmp.Only[delegation.Chain]("Path", "Depth", "OnBehalfOf"), testcmp.Only[delegation.Principal]("ID")); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	chain, _, _ := delegation.ChainFrom(worker.Messages()[0].Metadata)
	wantChain := delegation.Chain{Path: []string{"hub"}, OnBehalfOf: &delegation.Principal{ID: "alice", Tenant: "acme"}}
	if diff := cmp.Diff(wantChain, chain, testcmp.Only[delegation.Chain]("Path", "OnBehalfOf", "Verified"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("chain at the agent (-want +got):\n%s", diff)
	}

	// From a trusted peer the same chain is believed: the cycle is found.
	res, err = a2aAs(t, base, rootToken).SendMessage(t.Context(), &a2a.SendMessageRequest{Message: forgedChain()})
	if err != nil {
		t.Fatal(err)
	}
	if task, ok := res.(*a2a.Task); !ok {
		t.Errorf("from a peer: %T, want a task", res)
	} else if task.Status.State != a2a.TaskStateRejected || !strings.Contains(testagent.Text(task.Status.Message), "delegation cycle") {
		t.Errorf("from a peer: %s %q, want REJECTED for a delegation cycle", task.Status.State, testagent.Text(task.Status.Message))
	}
}

// Tenants stay apart along a chain: A authenticates alice (acme) and bob
// (globex) and passes their work to B with its own credentials; B trusts A
// as a peer, so its policies see the root caller's tenant and route each
// tenant's work to that tenant's agent, and never the other's.
func TestAuth_TenantsStayApartAcrossTheChain(t *testing.T) {
	t.Parallel()
	acme := testagent.Start(t, testagent.Options{Name: "Acme research", Skill: "research", Streaming: true, Extensions: chainReader}, testagent.Work(10*time.Millisecond))
	globex := testagent.Start(t, testagent.Options{Name: "Globex research", Skill: "research", Streaming: true, Extensions: chainReader}, testagent.Work(10*time.Millisecond))

	dir := t.TempDir()
	policy := dir + "/tenants.yaml"
	writeFile(t, policy, `policy: tenant-agents
default: deny
rules:
  - name: own-tenant
    allow: agent.id == caller.tenant + "-research"
`)
	const peerToken = "orchd-a-to-b-0123456789"
	b := loadDefaults(t)
	b.Delegation.Self = "b"
	b.Agent.Skills = []SkillConfig{{ID: "research"}}
	b.Policies.Paths = []string{policy}
	b.Auth = AuthConfig{Config: auth.Config{Tokens: []auth.TokenConfig{{SHA256: sha256Hex(peerToken), Principal: "orchd-a"}}}, Peers: []string{"token:orchd-a"}}
	b.Agents = []registry.Spec{{ID: "acme-research", URL: acme.URL}, {ID: "globex-research", URL: globex.URL}}
	bURL := startDaemon(t, b)

	tokenFile := dir + "/b.token"
	writeFile(t, tokenFile, peerToken+"\n")
	a := loadDefaults(t)
	a.Delegation.Self = "a"
	a.Auth = authTokens()
	a.Agents = []registry.Spec{{ID: "b", URL: bURL, Credentials: &credentials.Config{Bearer: &credentials.Bearer{TokenFile: tokenFile}}}}
	aURL := startDaemon(t, a)

	for _, tc := range []struct {
		token, tenant string
		agent         *testagent.Agent
		other         *testagent.Agent
	}{
		{aliceToken, "acme", acme, globex},
		{bobToken, "globex", globex, acme},
	} {
		var rec delegation.Record
		if code, _ := callAs(t, tc.token, "POST", aURL+"/v1/delegations", `{"text": "survey for `+tc.tenant+`", "skill": "research"}`, &rec); code != 201 {
			t.Fatalf("%s: delegate at A = %d %+v", tc.tenant, code, rec)
		}
		testwait.Succeeds(t, 10*time.Second, tc.tenant+"'s delegation at A completed", func() error {
			switch {
			case rec.State == a2a.TaskStateCompleted:
				return nil
			case rec.State.Terminal():
				t.Fatalf("%s: delegation at A = %+v", tc.tenant, rec)
			}
			callAs(t, tc.token, "GET", aURL+"/v1/delegations/"+rec.ID, "", &rec)
			return fmt.Errorf("it is %s", rec.State)
		})
		var got *a2a.Message
		for _, m := range tc.agent.Messages() {
			if testagent.Text(m) == "survey for "+tc.tenant {
				got = m
			}
		}
		if got == nil {
			t.Fatalf("%s's agent did not get its work", tc.tenant)
		}
		for _, m := range tc.other.Messages() {
			if testagent.Text(m) == "survey for "+tc.tenant {
				t.Errorf("%s's work reached the other tenant's agent", tc.tenant)
			}
		}
		chain, _, err := delegation.ChainFrom(got.Metadata)
		if err != nil {
			t.Fatalf("%s: chain at the agent: %v", tc.tenant, err)
		}
		want := delegation.Chain{Path: []string{"a", "b"}, Verified: []string{"token:orchd-a", ""}, OnBehalfOf: &delegation.Principal{Tenant: tc.tenant}}
		if diff := cmp.Diff(want, chain, testcmp.Only[delegation.Chain]("Path", "Verified", "OnBehalfOf"), testcmp.Only[delegation.Principal]("Tenant")); diff != "" {
			t.Errorf("%s: chain at the agent (-want +got):\n%s", tc.tenant, diff)
		}
	}
}

// An orchd given a signing key signs its card; another orchd pinning the
// public key verifies it, and its policies can require it.
func TestAuth_SignedCardOfAPeerVerifies(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	priv, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir+"/card.key", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: priv})))
	writeFile(t, dir+"/card.pub", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})))
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	otherPub, _ := x509.MarshalPKIXPublicKey(&other.PublicKey)
	writeFile(t, dir+"/other.pub", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: otherPub})))

	b := loadDefaults(t)
	b.Delegation.Self = "b"
	b.Agent.Skills = []SkillConfig{{ID: "research"}}
	b.Agent.SigningKey = dir + "/card.key"
	b.Agent.SigningKeyID = "orchd-b-2026"
	bURL := startDaemon(t, b)

	var card map[string]any
	if code := call(t, "GET", bURL+"/.well-known/agent-card.json", "", &card); code != 200 || card["signatures"] == nil {
		t.Fatalf("card = %d, signatures %v", code, card["signatures"])
	}
	a := loadDefaults(t)
	a.Agents = []registry.Spec{{ID: "b", URL: bURL, CardKeys: []string{dir + "/card.pub"}}, {ID: "b-wrong-key", URL: bURL + "/.well-known/agent-card.json", CardKeys: []string{dir + "/other.pub"}}}
	aURL := startDaemon(t, a)
	var ag registry.Agent
	if code := call(t, "GET", aURL+"/v1/agents/b", "", &ag); code != 200 {
		t.Fatalf("b pinned to its key = %d", code)
	}
	if diff := cmp.Diff(capability.Signature{Present: true, Verified: true, KeyID: "orchd-b-2026"}, ag.Signature,
		testcmp.Only[capability.Signature]("Present", "Verified", "KeyID")); diff != "" {
		t.Errorf("b pinned to its key (-want +got):\n%s", diff)
	}
	if code := call(t, "GET", aURL+"/v1/agents/b-wrong-key", "", &ag); code != 200 {
		t.Fatalf("b pinned to another key = %d", code)
	}
	if diff := cmp.Diff(capability.Signature{Present: true, Verified: false}, ag.Signature,
		testcmp.Only[capability.Signature]("Present", "Verified")); diff != "" {
		t.Errorf("b pinned to another key (-want +got):\n%s", diff)
	} else if ag.Signature.Error == "" {
		t.Errorf("b pinned to another key: no error says why it is not verified: %+v", ag.Signature)
	}
	// Key files are named in the config only, never through the API.
	var e httpapi.ErrorBody
	if code := call(t, "POST", aURL+"/v1/agents", `{"url": "`+bURL+`/x", "cardKeys": ["/etc/passwd"]}`, &e); code != 400 || !strings.Contains(e.Error.Message, "cardKeys") {
		t.Errorf("cardKeys through the API = %d %+v", code, e)
	}
}

// A delegation belongs to the identity that created it, its
// authentication method and issuer included: a JWT whose sub and tenant
// are those of the static token's alice@acme is someone else.
func TestAuth_DelegationOwnersIncludeTheMethod(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true, Extensions: chainReader}, testagent.Hang())
	idp := newTestIssuer(t)
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Auth.JWT = idp.config()
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)
	jwtAlice := idp.tokenFor(t, "alice", "orchd", "acme", time.Minute)

	var byToken, byJWT delegation.Record
	if code, _ := callAs(t, aliceToken, "POST", base+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &byToken); code != 201 {
		t.Fatalf("delegate with alice's token = %d %+v", code, byToken)
	}
	if code, _ := callAs(t, jwtAlice, "POST", base+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &byJWT); code != 201 {
		t.Fatalf("delegate with alice's JWT = %d %+v", code, byJWT)
	}
	if diff := cmp.Diff(&delegation.Principal{ID: "alice", Tenant: "acme", Method: auth.MethodToken}, byToken.Owner); diff != "" {
		t.Errorf("owner by the token (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&delegation.Principal{ID: "alice", Tenant: "acme", Method: auth.MethodJWT, Issuer: testIssuerName}, byJWT.Owner); diff != "" {
		t.Errorf("owner by the JWT (-want +got):\n%s", diff)
	}
	for _, c := range []struct {
		who, token string
		other      delegation.Record
	}{{"the JWT", jwtAlice, byToken}, {"the token", aliceToken, byJWT}} {
		for _, req := range []struct{ method, path string }{
			{"GET", "/v1/delegations/" + c.other.ID},
			{"POST", "/v1/delegations/" + c.other.ID + ":cancel"},
			{"POST", "/v1/delegations/" + c.other.ID + ":steer"},
		} {
			var e httpapi.ErrorBody
			if code, _ := callAs(t, c.token, req.method, base+req.path, `{"text": "mine now"}`, &e); code != 404 {
				t.Errorf("%s %s as %s = %d %+v", req.method, req.path, c.who, code, e)
			}
		}
		var l httpapi.DelegationList
		if code, _ := callAs(t, c.token, "GET", base+"/v1/delegations", "", &l); code != 200 {
			t.Fatalf("list as %s = %d", c.who, code)
		}
		mine := byToken.ID
		if c.other.ID == byToken.ID {
			mine = byJWT.ID
		}
		if diff := cmp.Diff([]string{mine}, recordIDs(l.Delegations)); diff != "" {
			t.Errorf("list as %s (-want +got):\n%s", c.who, diff)
		}
	}
	for _, rec := range []delegation.Record{byToken, byJWT} {
		var done delegation.Record
		token := aliceToken
		if rec.ID == byJWT.ID {
			token = jwtAlice
		}
		if code, _ := callAs(t, token, "POST", base+"/v1/delegations/"+rec.ID+":cancel", "", &done); code != 200 || done.State != a2a.TaskStateCanceled {
			t.Errorf("cancel by its owner = %d %+v", code, done.State)
		}
	}
}

// An A2A task belongs to exactly one caller. The principal "acme/alice",
// with no tenant, is not alice of tenant acme, and neither is a JWT whose
// sub and tenant are hers: none of them reads, lists or cancels her task.
func TestAuth_TaskOwnersAreUnambiguous(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true, Extensions: chainReader}, testagent.Hang())
	idp := newTestIssuer(t)
	const slashToken = "acme-slash-alice-0123456789"
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Auth.Tokens = append(cfg.Auth.Tokens, auth.TokenConfig{SHA256: sha256Hex(slashToken), Principal: "acme/alice"})
	cfg.Auth.JWT = idp.config()
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)

	alice := a2aAs(t, base, aliceToken)
	res, err := alice.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey")),
		Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage = %T", res)
	}
	others := []struct {
		name  string
		token string
	}{
		{"the principal acme/alice", slashToken},
		{"a JWT for alice of acme", idp.tokenFor(t, "alice", "orchd", "acme", time.Minute)},
	}
	for _, o := range others {
		c := a2aAs(t, base, o.token)
		if got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("%s: GetTask = %+v, %v; want task not found", o.name, got, err)
		}
		if list, err := c.ListTasks(t.Context(), &a2a.ListTasksRequest{}); err != nil || len(list.Tasks) != 0 {
			t.Errorf("%s: ListTasks = %+v, %v; want none", o.name, list, err)
		}
		if got, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("%s: CancelTask = %+v, %v; want task not found", o.name, got, err)
		}
	}
	if n := worker.Cancels(); n != 0 {
		t.Errorf("the agent was asked to cancel %d times", n)
	}
	if list, err := alice.ListTasks(t.Context(), &a2a.ListTasksRequest{}); err != nil {
		t.Errorf("alice's ListTasks: %v", err)
	} else if diff := cmp.Diff([]a2a.TaskID{task.ID}, taskIDs(list.Tasks)); diff != "" {
		t.Errorf("alice's ListTasks (-want +got):\n%s", diff)
	}
	if got, err := alice.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID}); err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Errorf("alice's CancelTask = %+v, %v", got, err)
	}
}

// A peer is named by how it authenticates: with auth.peers
// [token:orchd-a], the static token of orchd-a is believed, and a JWT
// whose sub is "orchd-a" or "token:orchd-a" is not.
func TestAuth_PeersAreNamedWithTheirMethod(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true, Extensions: chainReader}, testagent.Work(10*time.Millisecond))
	idp := newTestIssuer(t)
	const peerToken = "orchd-a-to-b-0123456789"
	cfg := loadDefaults(t)
	cfg.Delegation.Self = "b"
	cfg.Auth = authTokens()
	cfg.Auth.Tokens = append(cfg.Auth.Tokens, auth.TokenConfig{SHA256: sha256Hex(peerToken), Principal: "orchd-a"})
	cfg.Auth.JWT = idp.config()
	cfg.Auth.Peers = []string{"token:orchd-a"}
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)

	// The chain names bob of globex as the caller the work is for.
	send := func(token string) delegation.Record {
		t.Helper()
		m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey"))
		delegation.Chain{Path: []string{"a"}, Depth: 1, MaxDepth: 8, Skill: "research",
			OnBehalfOf: &delegation.Principal{ID: "bob", Tenant: "globex"}}.Attach(m)
		res, err := a2aAs(t, base, token).SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m})
		if err != nil {
			t.Fatal(err)
		}
		task, ok := res.(*a2a.Task)
		if !ok {
			t.Fatalf("SendMessage = %T", res)
		}
		md, _ := task.Metadata[delegation.ExtensionURI].(map[string]any)
		id, _ := md["delegation"].(string)
		var rec delegation.Record
		if code, _ := callAs(t, rootToken, "GET", base+"/v1/delegations/"+id, "", &rec); code != 200 {
			t.Fatalf("read delegation %q = %d", id, code)
		}
		return rec
	}
	for _, sub := range []string{"orchd-a", "token:orchd-a"} {
		rec := send(idp.tokenFor(t, sub, "orchd", "", time.Minute))
		if rec.ChainIgnored == "" {
			t.Errorf("from a JWT for %q: the chain was believed, as the peer's", sub)
		}
		// Its own work, not bob's of globex as the peer's would be.
		if diff := cmp.Diff(&delegation.Principal{ID: sub, Method: auth.MethodJWT}, rec.Owner, testcmp.Only[delegation.Principal]("ID", "Method")); diff != "" {
			t.Errorf("from a JWT for %q: owner (-want +got):\n%s", sub, diff)
		} else if rec.Owner.Tenant == "globex" {
			t.Errorf("from a JWT for %q: owner %+v has the tenant the peer's chain named", sub, rec.Owner)
		}
		if diff := cmp.Diff([]string{"b"}, rec.Chain.Path); diff != "" {
			t.Errorf("from a JWT for %q: chain path (-want +got):\n%s", sub, diff)
		}
	}
	rec := send(peerToken)
	if rec.ChainIgnored != "" {
		t.Errorf("from the peer's token: the chain was not believed: %s", rec.ChainIgnored)
	}
	if diff := cmp.Diff([]string{"a", "b"}, rec.Chain.Path); diff != "" {
		t.Errorf("from the peer's token: chain path (-want +got):\n%s", diff)
	}
	if v := rec.Chain.Verified; len(v) == 0 || v[0] != "token:orchd-a" {
		t.Errorf("from the peer's token: chain verified %q, want token:orchd-a first", v)
	}
	// The work is bob's of globex as the peer vouches for him: not the
	// bob a credential of this orchd would authenticate.
	if want := (delegation.Principal{ID: "bob", Tenant: "globex", Method: a2aserver.MethodPeer, Issuer: "token:orchd-a"}); rec.Owner == nil || *rec.Owner != want {
		t.Errorf("owner of the peer's work = %+v, want %+v", rec.Owner, want)
	}
	if code, _ := callAs(t, bobToken, "GET", base+"/v1/delegations/"+rec.ID, "", nil); code != 404 {
		t.Errorf("bob's own token reads the work the peer passed on for a bob: %d", code)
	}

	// A bare name, as auth.peers held before, could be any method's.
	cfg.Auth.Peers = []string{"orchd-a"}
	_, err := New(cfg, nil)
	if err == nil {
		t.Fatal("New with a bare peer: no error")
	}
	for _, want := range []string{`auth.peers[0] "orchd-a"`, "token:orchd-a"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("New with a bare peer = %v, want it to say %s", err, want)
		}
	}
}

// A daemon without authentication believes a chain context's path, depth
// and deadline, but not whom the work is for: it passes no onBehalfOf
// on, so B, which trusts it as a peer, does the work as that daemon,
// never as the tenant its caller named.
func TestAuth_DaemonWithoutAuthenticationPassesNoOnBehalfOf(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true, Extensions: chainReader}, testagent.Work(10*time.Millisecond))
	const peerToken = "orchd-a-to-b-0123456789"
	b := loadDefaults(t)
	b.Delegation.Self = "b"
	b.Agent.Skills = []SkillConfig{{ID: "research"}}
	b.Auth = authTokens()
	b.Auth.Tokens = append(b.Auth.Tokens, auth.TokenConfig{SHA256: sha256Hex(peerToken), Principal: "orchd-a"})
	b.Auth.Peers = []string{"token:orchd-a"}
	b.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	bURL := startDaemon(t, b)

	tokenFile := t.TempDir() + "/b.token"
	writeFile(t, tokenFile, peerToken+"\n")
	a := loadDefaults(t)
	a.Delegation.Self = "a"
	a.Agents = []registry.Spec{{ID: "b", URL: bURL, Credentials: &credentials.Config{Bearer: &credentials.Bearer{TokenFile: tokenFile}}}}
	aURL := startDaemon(t, a)

	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey"))
	delegation.Chain{Path: []string{"gateway"}, Depth: 1, MaxDepth: 8, Skill: "research",
		OnBehalfOf: &delegation.Principal{ID: "bob", Tenant: "globex"}}.Attach(m)
	res, err := testagent.Client(t, aURL).SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m})
	if err != nil {
		t.Fatal(err)
	}
	if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("SendMessage = %+v", res)
	}
	var atA httpapi.DelegationList
	if code := call(t, "GET", aURL+"/v1/delegations", "", &atA); code != 200 || len(atA.Delegations) != 1 {
		t.Fatalf("at A = %d, %d delegations", code, len(atA.Delegations))
	}
	// gateway's path, no owner, and no onBehalfOf.
	if diff := cmp.Diff(delegation.Record{Chain: delegation.Chain{Path: []string{"gateway", "a"}}}, atA.Delegations[0],
		testcmp.Only[delegation.Record]("Owner", "Chain"), testcmp.Only[delegation.Chain]("Path", "OnBehalfOf")); diff != "" {
		t.Errorf("at A (-want +got):\n%s", diff)
	}
	var atB httpapi.DelegationList
	if code, _ := callAs(t, rootToken, "GET", bURL+"/v1/delegations", "", &atB); code != 200 || len(atB.Delegations) != 1 {
		t.Fatalf("at B = %d %+v", code, atB)
	}
	// The work as orchd-a's.
	want := delegation.Record{Owner: &delegation.Principal{ID: "orchd-a", Method: auth.MethodToken}, Chain: delegation.Chain{Path: []string{"gateway", "a", "b"}}}
	if diff := cmp.Diff(want, atB.Delegations[0], testcmp.Only[delegation.Record]("ChainIgnored", "Owner", "Chain"), testcmp.Only[delegation.Chain]("Path")); diff != "" {
		t.Errorf("at B (-want +got):\n%s", diff)
	}
	chain, _, err := delegation.ChainFrom(worker.Messages()[0].Metadata)
	if err != nil {
		t.Fatalf("chain at the agent: %v", err)
	}
	if diff := cmp.Diff(&delegation.Principal{ID: "orchd-a"}, chain.OnBehalfOf); diff != "" {
		t.Errorf("chain at the agent: onBehalfOf (-want +got):\n%s", diff)
	}
}
