package orchestrator

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testca"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/mcpserver"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
)

// The MCP endpoint behind orchd's authentication and authorization: the
// same callers, tenancy and policies as the API, through go-sdk's client.

// mcpVersions are the protocol versions the tests speak: 2026-07-28, with
// no sessions, and 2025-11-25, with sessions.
var mcpVersions = []string{"2026-07-28", "2025-11-25"}

// mcpCaller is an http.RoundTripper for an MCP client: it sends the bearer
// token it holds (none when it holds ""), which a test may change between
// calls, and keeps the refusals the client got.
type mcpCaller struct {
	base http.RoundTripper
	mu   sync.Mutex
	tok  string
	seen []mcpRefusal
}

// mcpRefusal is a refused request: its status and WWW-Authenticate.
type mcpRefusal struct {
	status    int
	challenge string
}

// newMCPCaller is an mcpCaller sending token over base (nil:
// http.DefaultTransport).
func newMCPCaller(token string, base http.RoundTripper) *mcpCaller {
	if base == nil {
		base = http.DefaultTransport
	}
	return &mcpCaller{base: base, tok: token}
}

func (c *mcpCaller) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	tok := c.tok
	c.mu.Unlock()
	if tok != "" {
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.base.RoundTrip(r)
	if err == nil && resp.StatusCode >= 400 {
		c.mu.Lock()
		c.seen = append(c.seen, mcpRefusal{resp.StatusCode, resp.Header.Get("WWW-Authenticate")})
		c.mu.Unlock()
	}
	return resp, err
}

// use makes the caller send token from now on.
func (c *mcpCaller) use(token string) {
	c.mu.Lock()
	c.tok = token
	c.mu.Unlock()
}

// refusals are the refused requests so far.
func (c *mcpCaller) refusals() []mcpRefusal {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]mcpRefusal(nil), c.seen...)
}

// mcpConnect opens an MCP session with the orchd at base as c's caller,
// speaking version.
func mcpConnect(t *testing.T, base string, c *mcpCaller, version string) (*mcp.ClientSession, error) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "orchd-auth-test", Version: "1"}, nil)
	hc := &http.Client{Transport: c, Timeout: 30 * time.Second}
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + mcpserver.Path, HTTPClient: hc,
		MaxRetries: -1, DisableStandaloneSSE: true}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, nil
}

// mcpSession is mcpConnect for a caller that must get in.
func mcpSession(t *testing.T, base string, c *mcpCaller, version string) *mcp.ClientSession {
	t.Helper()
	cs, err := mcpConnect(t, base, c, version)
	if err != nil {
		t.Fatalf("connect (%s): %v", version, err)
	}
	return cs
}

// mcpAnswer is what a tool call answered: its text, whether it was an
// error (a tool error or a protocol error alike), and its structured
// content.
type mcpAnswer struct {
	text  string
	isErr bool
	data  json.RawMessage
}

func (a mcpAnswer) String() string {
	return fmt.Sprintf("{text %q, isError %v, structured %s}", a.text, a.isErr, a.data)
}

// mcpCall calls tool with args on cs.
func mcpCall(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) mcpAnswer {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return mcpAnswer{text: err.Error(), isErr: true}
	}
	var a mcpAnswer
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			a.text += tc.Text
		}
	}
	a.isErr = res.IsError
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		if err != nil {
			t.Fatal(err)
		}
		a.data = b
	}
	return a
}

// mcpStatus calls tool, which answers a delegation's Status, and fails the
// test unless it answers one.
func mcpStatus(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) mcpserver.Status {
	t.Helper()
	a := mcpCall(t, cs, tool, args)
	var st mcpserver.Status
	if a.isErr || a.data == nil || json.Unmarshal(a.data, &st) != nil || st.Delegation == "" {
		t.Fatalf("%s %v: %q %s", tool, args, a.text, a.data)
	}
	return st
}

// Without credentials the endpoint refuses the client as the API does:
// 401, with orchd's Bearer challenge.
func TestMCPAuth_NoCredentialsRefused(t *testing.T) {
	t.Parallel()
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	base := startDaemon(t, cfg)
	for _, v := range mcpVersions {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			c := newMCPCaller("", nil)
			if _, err := mcpConnect(t, base, c, v); err == nil || !strings.Contains(err.Error(), "Unauthorized") {
				t.Fatalf("connect without credentials: %v", err)
			}
			seen := c.refusals()
			if len(seen) == 0 || seen[0].status != http.StatusUnauthorized || !strings.HasPrefix(seen[0].challenge, `Bearer realm="orchd"`) {
				t.Errorf("refusals %+v, want 401 with orchd's Bearer challenge", seen)
			}
			c = newMCPCaller("wrong-secret-token", nil)
			if _, err := mcpConnect(t, base, c, v); err == nil {
				t.Fatal("connect with a wrong token: got in")
			}
			if seen := c.refusals(); len(seen) == 0 || seen[0].status != http.StatusUnauthorized || !strings.Contains(seen[0].challenge, `error="invalid_token"`) {
				t.Errorf("refusals %+v, want 401 invalid_token", seen)
			}
		})
	}
}

// Another caller's delegation is not found by any tool, in the very words
// a delegation that does not exist is not found in, and an idempotency key
// names a delegation of its caller's only.
func TestMCPAuth_OthersDelegationsAreNotFound(t *testing.T) {
	t.Parallel()
	steered := testagent.Start(t, testagent.Options{Name: "steered", Skill: "steer", Steering: true, Streaming: true}, testagent.Steerable())
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Agents = []registry.Spec{{ID: "steer", URL: steered.URL}}
	base := startDaemon(t, cfg)
	testwait.Until(t, 10*time.Second, "the agent registered", func() bool { return nodeDaemon(base).Registry().Len() > 0 })
	for _, v := range mcpVersions {
		t.Run(v, func(t *testing.T) {
			alice := mcpSession(t, base, newMCPCaller(aliceToken, nil), v)
			bob := mcpSession(t, base, newMCPCaller(bobToken, nil), v)
			mine := mcpStatus(t, alice, mcpserver.ToolDelegate, map[string]any{"text": "work", "agent": "steer", "waitSeconds": 0, "idempotencyKey": "job-" + v})
			if mine.State != "working" && mine.State != "submitted" {
				t.Fatalf("alice's delegation: %+v", mine)
			}
			signals := len(steered.Signals())
			// A made-up id of the same shape as alice's.
			const madeUp = "0b0b0b0b-0b0b-8b0b-8b0b-0b0b0b0b0b0b"
			for _, tc := range []struct {
				tool string
				args map[string]any
			}{
				{mcpserver.ToolStatus, nil},
				{mcpserver.ToolWait, map[string]any{"waitSeconds": 0}},
				{mcpserver.ToolReply, map[string]any{"text": "mine now"}},
				{mcpserver.ToolSteer, map[string]any{"text": "mine now"}},
				{mcpserver.ToolInterrupt, map[string]any{"text": "mine now"}},
				{mcpserver.ToolCancel, nil},
			} {
				answer := func(id string) mcpAnswer {
					args := map[string]any{"delegation": id}
					for k, a := range tc.args {
						args[k] = a
					}
					a := mcpCall(t, bob, tc.tool, args)
					a.text = strings.ReplaceAll(a.text, id, "<id>")
					return a
				}
				got, none := answer(mine.Delegation), answer(madeUp)
				if !got.isErr || !strings.Contains(got.text, "not found") {
					t.Errorf("%s of alice's delegation as bob: %+v, want not found", tc.tool, got)
				}
				if got.text != none.text || got.isErr != none.isErr || string(got.data) != string(none.data) {
					t.Errorf("%s as bob tells alice's delegation from none:\n  alice's: %+v\n  none:    %+v", tc.tool, got, none)
				}
			}
			if n := len(steered.Signals()); n != signals {
				t.Errorf("bob's steer and interrupt reached the agent: %d signals, was %d", n, signals)
			}
			st := mcpStatus(t, alice, mcpserver.ToolStatus, map[string]any{"delegation": mine.Delegation})
			if st.State != "working" && st.State != "submitted" {
				t.Errorf("alice's delegation after bob's calls: %+v", st)
			}

			// The same key names two delegations, one each.
			theirs := mcpStatus(t, bob, mcpserver.ToolDelegate, map[string]any{"text": "work", "agent": "steer", "waitSeconds": 0, "idempotencyKey": "job-" + v})
			if theirs.Delegation == mine.Delegation {
				t.Fatalf("alice's and bob's key named one delegation, %s", mine.Delegation)
			}
			again := mcpStatus(t, alice, mcpserver.ToolDelegate, map[string]any{"text": "work", "agent": "steer", "waitSeconds": 0, "idempotencyKey": "job-" + v})
			if again.Delegation != mine.Delegation {
				t.Errorf("alice's key named %s, then %s", mine.Delegation, again.Delegation)
			}
			if a := mcpCall(t, bob, mcpserver.ToolStatus, map[string]any{"delegation": mine.Delegation}); !a.isErr {
				t.Errorf("bob reads alice's delegation after using her key: %q", a.text)
			}
			for _, tc := range []struct {
				cs *mcp.ClientSession
				id string
			}{{alice, mine.Delegation}, {bob, theirs.Delegation}} {
				if st := mcpStatus(t, tc.cs, mcpserver.ToolCancel, map[string]any{"delegation": tc.id}); st.State != "canceled" {
					t.Errorf("cancel its own: %+v", st)
				}
			}
		})
	}
}

// A caller with a client certificate and no bearer token uses the tools as
// itself, and owns what it delegates.
func TestMCPAuth_ClientCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serverCA, clientCA := testca.New(t, "server CA"), testca.New(t, "client CA")
	srv := serverCA.Server(t, "orchd")
	writeFile(t, dir+"/server.pem", string(srv.CertPEM))
	writeFile(t, dir+"/server.key", string(srv.KeyPEM))
	writeFile(t, dir+"/client-ca.pem", string(clientCA.PEM()))
	reply := testagent.Start(t, testagent.Options{Name: "replier", Skill: "reply"}, testagent.Reply("hello from the agent"))

	const spiffe = "spiffe://acme.example/agent/reporter"
	cfg := loadDefaults(t)
	cfg.HTTP.TLS = &TLSConfig{CertFile: dir + "/server.pem", KeyFile: dir + "/server.key"}
	cfg.Auth = authTokens()
	cfg.Auth.MTLS = &auth.MTLSConfig{ClientCAFile: dir + "/client-ca.pem", Tenants: map[string]string{spiffe: "acme"}}
	cfg.Agents = []registry.Spec{{ID: "reply", URL: reply.URL}}
	d := runDaemon(t, cfg)
	base := "https://" + d.Addr().String()
	testwait.Until(t, 10*time.Second, "the agent registered", func() bool { return d.Registry().Len() > 0 })

	roots := x509.NewCertPool()
	roots.AddCert(serverCA.Cert)
	over := func(cert *testca.Leaf) http.RoundTripper {
		tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if cert != nil {
			tc.Certificates = []tls.Certificate{cert.TLS}
		}
		tr := &http.Transport{TLSClientConfig: tc}
		t.Cleanup(tr.CloseIdleConnections)
		return tr
	}
	cert := clientCA.Client(t, "reporter", spiffe)
	for _, v := range mcpVersions {
		t.Run(v, func(t *testing.T) {
			cs := mcpSession(t, base, newMCPCaller("", over(&cert)), v)
			st := mcpStatus(t, cs, mcpserver.ToolDelegate, map[string]any{"text": "say hello", "agent": "reply"})
			if st.State != "completed" || st.Message != "hello from the agent" {
				t.Fatalf("delegate with a client certificate: %+v", st)
			}
			if got := mcpStatus(t, cs, mcpserver.ToolStatus, map[string]any{"delegation": st.Delegation}); got.State != "completed" {
				t.Errorf("status with a client certificate: %+v", got)
			}
			// The certificate's principal owns it: alice of the same
			// tenant, by token, does not.
			alice := mcpSession(t, base, newMCPCaller(aliceToken, over(nil)), v)
			if a := mcpCall(t, alice, mcpserver.ToolStatus, map[string]any{"delegation": st.Delegation}); !a.isErr || !strings.Contains(a.text, "not found") {
				t.Errorf("alice reads the certificate's delegation: %+v", a)
			}
			if _, err := mcpConnect(t, base, newMCPCaller("", over(nil)), v); err == nil {
				t.Errorf("connect with neither certificate nor token: got in")
			}
		})
	}
}

// A JWT caller uses the tools as its subject; a JWT for another audience
// is refused.
func TestMCPAuth_JWT(t *testing.T) {
	t.Parallel()
	reply := testagent.Start(t, testagent.Options{Name: "replier", Skill: "reply"}, testagent.Reply("hello from the agent"))
	idp := newTestIssuer(t)
	cfg := loadDefaults(t)
	cfg.Auth = AuthConfig{Config: auth.Config{JWT: idp.config()}}
	cfg.Agents = []registry.Spec{{ID: "reply", URL: reply.URL}}
	base := startDaemon(t, cfg)
	testwait.Until(t, 10*time.Second, "the agent registered", func() bool { return nodeDaemon(base).Registry().Len() > 0 })
	for _, v := range mcpVersions {
		t.Run(v, func(t *testing.T) {
			carol := mcpSession(t, base, newMCPCaller(idp.tokenFor(t, "carol", "orchd", "acme", time.Hour), nil), v)
			st := mcpStatus(t, carol, mcpserver.ToolDelegate, map[string]any{"text": "say hello", "skill": "reply"})
			if st.State != "completed" || st.Message != "hello from the agent" {
				t.Fatalf("delegate with a JWT: %+v", st)
			}
			if got := mcpStatus(t, carol, mcpserver.ToolStatus, map[string]any{"delegation": st.Delegation}); got.State != "completed" {
				t.Errorf("status with a JWT: %+v", got)
			}
			dave := mcpSession(t, base, newMCPCaller(idp.tokenFor(t, "dave", "orchd", "acme", time.Hour), nil), v)
			if a := mcpCall(t, dave, mcpserver.ToolStatus, map[string]any{"delegation": st.Delegation}); !a.isErr || !strings.Contains(a.text, "not found") {
				t.Errorf("another subject reads carol's delegation: %+v", a)
			}
			c := newMCPCaller(idp.tokenFor(t, "carol", "billing", "acme", time.Hour), nil)
			if _, err := mcpConnect(t, base, c, v); err == nil {
				t.Fatal("connect with a JWT for another audience: got in")
			}
			if seen := c.refusals(); len(seen) == 0 || seen[0].status != http.StatusUnauthorized || !strings.Contains(seen[0].challenge, "audience") {
				t.Errorf("refusals %+v, want 401 naming the audience", seen)
			}
		})
	}
}

// An authorization policy that denies delegations.create to a role
// refuses orchd_delegate to its callers, naming the action and the
// policy's reason, and leaves them what it does not deny.
func TestMCPAuth_PolicyDeniesDelegating(t *testing.T) {
	t.Parallel()
	reply := testagent.Start(t, testagent.Options{Name: "replier", Skill: "reply"}, testagent.Reply("hello from the agent"))
	dir := t.TempDir()
	writeFile(t, dir+"/viewers.yaml", `kind: authorization
policy: viewers
rules:
  - name: viewers-only-look
    deny: '"viewer" in caller.roles && action == "delegations.create"'
    reason: viewers look at work but do not start it
`)
	const veraToken = "vera-acme-viewer-0123456789"
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Auth.Tokens = append(cfg.Auth.Tokens, auth.TokenConfig{SHA256: sha256Hex(veraToken), Principal: "vera", Tenant: "acme", Roles: []string{"viewer"}})
	cfg.Policies.Paths = []string{dir}
	cfg.Agents = []registry.Spec{{ID: "reply", URL: reply.URL}}
	base := startDaemon(t, cfg)
	testwait.Until(t, 10*time.Second, "the agent registered", func() bool { return nodeDaemon(base).Registry().Len() > 0 })
	for _, v := range mcpVersions {
		t.Run(v, func(t *testing.T) {
			vera := mcpSession(t, base, newMCPCaller(veraToken, nil), v)
			messages := len(reply.Messages())
			a := mcpCall(t, vera, mcpserver.ToolDelegate, map[string]any{"text": "say hello", "agent": "reply", "idempotencyKey": "k-" + v})
			if !a.isErr || !strings.Contains(a.text, policies.ActionDelegationsCreate) || !strings.Contains(a.text, "viewers look at work but do not start it") {
				t.Errorf("delegate as a viewer: %+v, want a tool error naming %s and the reason", a, policies.ActionDelegationsCreate)
			}
			if n := len(reply.Messages()); n != messages {
				t.Errorf("the viewer's work reached the agent")
			}
			if a := mcpCall(t, vera, mcpserver.ToolAgents, nil); a.isErr || !strings.Contains(string(a.data), `"reply"`) {
				t.Errorf("agents as a viewer: %+v", a)
			}
			alice := mcpSession(t, base, newMCPCaller(aliceToken, nil), v)
			if st := mcpStatus(t, alice, mcpserver.ToolDelegate, map[string]any{"text": "say hello", "agent": "reply"}); st.State != "completed" {
				t.Errorf("delegate as alice: %+v", st)
			}
		})
	}
}

// A session (2025-11-25) belongs to the caller that opened it: another
// caller's credentials on its requests are refused, in words that say
// why, and the session carries on for its owner.
func TestMCPAuth_SessionKeepsToItsCaller(t *testing.T) {
	t.Parallel()
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	base := startDaemon(t, cfg)
	c := newMCPCaller(aliceToken, nil)
	cs := mcpSession(t, base, c, "2025-11-25")
	if cs.ID() == "" {
		t.Fatal("no session id")
	}
	if a := mcpCall(t, cs, mcpserver.ToolAgents, nil); a.isErr {
		t.Fatalf("agents as alice: %+v", a)
	}
	c.use(bobToken)
	a := mcpCall(t, cs, mcpserver.ToolAgents, nil)
	if !a.isErr || !strings.Contains(a.text, "session was opened by another caller") {
		t.Errorf("bob's call in alice's session: %+v, want a refusal saying whose session it is", a)
	}
	if seen := c.refusals(); len(seen) != 1 || seen[0].status != http.StatusForbidden {
		t.Errorf("refusals %+v, want one 403", seen)
	}
	// Nor may bob end it.
	req, err := http.NewRequestWithContext(t.Context(), http.MethodDelete, base+mcpserver.Path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Mcp-Session-Id", cs.ID())
	req.Header.Set("Authorization", "Bearer "+bobToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("bob ends alice's session: %d", resp.StatusCode)
	}
	c.use(aliceToken)
	if a := mcpCall(t, cs, mcpserver.ToolAgents, nil); a.isErr {
		t.Errorf("alice's session after bob's attempts: %+v", a)
	}
}

// Each request of a session is authorized as its own credentials say, not
// as those of the request that opened the session: a token of the same
// caller without the admin role, on a session the admin token opened,
// gets no admin's rights.
func TestMCPAuth_SessionRequestsAuthorizedByTheirOwnCredentials(t *testing.T) {
	t.Parallel()
	reply := testagent.Start(t, testagent.Options{Name: "replier", Skill: "reply"}, testagent.Reply("hello from the agent"))
	const aliceAdminToken = "alice-acme-admin-0123456789"
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Auth.Tokens = append(cfg.Auth.Tokens, auth.TokenConfig{SHA256: sha256Hex(aliceAdminToken), Principal: "alice", Tenant: "acme", Roles: []string{"admin"}})
	cfg.Agents = []registry.Spec{{ID: "reply", URL: reply.URL}}
	base := startDaemon(t, cfg)
	testwait.Until(t, 10*time.Second, "the agent registered", func() bool { return nodeDaemon(base).Registry().Len() > 0 })
	bob := mcpSession(t, base, newMCPCaller(bobToken, nil), "2025-11-25")
	theirs := mcpStatus(t, bob, mcpserver.ToolDelegate, map[string]any{"text": "say hello", "agent": "reply"})

	c := newMCPCaller(aliceAdminToken, nil)
	cs := mcpSession(t, base, c, "2025-11-25")
	if a := mcpCall(t, cs, mcpserver.ToolStatus, map[string]any{"delegation": theirs.Delegation}); a.isErr {
		t.Fatalf("the admin reads bob's delegation: %v", a)
	}
	c.use(aliceToken) // the same caller (alice@acme by token), no longer an admin
	if a := mcpCall(t, cs, mcpserver.ToolStatus, map[string]any{"delegation": theirs.Delegation}); !a.isErr || !strings.Contains(a.text, "not found") {
		t.Errorf("alice without the admin role, in the session the admin token opened, reads bob's delegation: %v", a)
	}
}

// With JWTs configured, the MCP endpoint's refusals send OAuth clients to
// its protected-resource metadata (RFC 9728), which is served
// without credentials at the endpoint's well-known URL and at the root's,
// each naming the resource its URL was made from, as go-sdk's client
// checks; the API's challenge is unchanged.
func TestMCPAuth_ProtectedResourceMetadata(t *testing.T) {
	t.Parallel()
	idp := newTestIssuer(t)
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Auth.JWT = idp.config()
	base := startDaemon(t, cfg)
	const realm = `Bearer realm="orchd"`

	code, h := callAs(t, "", "POST", base+mcpserver.Path, `{"jsonrpc": "2.0", "id": 1, "method": "ping"}`, nil)
	challenges, err := oauthex.ParseWWWAuthenticate(h.Values("WWW-Authenticate"))
	if code != http.StatusUnauthorized || err != nil || len(challenges) != 1 {
		t.Fatalf("/mcp without credentials: %d %q (%v)", code, h.Values("WWW-Authenticate"), err)
	}
	metaURL := base + "/.well-known/oauth-protected-resource/mcp"
	if diff := cmp.Diff(oauthex.Challenge{Scheme: "bearer", Params: map[string]string{"realm": "orchd", "resource_metadata": metaURL}}, challenges[0]); diff != "" {
		t.Errorf("/mcp's challenge (-want +got):\n%s", diff)
	}
	if _, h := callAs(t, "wrong-secret-token", "POST", base+mcpserver.Path, `{}`, nil); !strings.Contains(h.Get("WWW-Authenticate"), `error="invalid_token"`) ||
		!strings.HasSuffix(h.Get("WWW-Authenticate"), `, resource_metadata="`+metaURL+`"`) {
		t.Errorf("/mcp with a wrong token: WWW-Authenticate %q", h.Get("WWW-Authenticate"))
	}
	if _, h := callAs(t, "", "GET", base+"/v1/agents", "", nil); h.Get("WWW-Authenticate") != realm {
		t.Errorf("the API's challenge: %q, want %q", h.Get("WWW-Authenticate"), realm)
	}

	want := &oauthex.ProtectedResourceMetadata{Resource: base + mcpserver.Path, AuthorizationServers: []string{testIssuerName},
		BearerMethodsSupported: []string{"header"}, ResourceName: "orchd"}
	got, err := oauthex.GetProtectedResourceMetadata(t.Context(), metaURL, base+mcpserver.Path, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the endpoint's metadata (-want +got):\n%s", diff)
	}
	got, err = oauthex.GetProtectedResourceMetadata(t.Context(), base+"/.well-known/oauth-protected-resource", base, http.DefaultClient)
	if err != nil {
		t.Fatal(err)
	}
	want.Resource = base
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the root's metadata (-want +got):\n%s", diff)
	}
	// Public: served to any origin, whatever credentials come along.
	if code, h := callAs(t, "wrong-secret-token", "GET", metaURL, "", nil); code != 200 || h.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("the metadata with a wrong token: %d, Access-Control-Allow-Origin %q", code, h.Get("Access-Control-Allow-Origin"))
	}

	// Behind agent.url, the URLs are under it.
	cfg = loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Auth.JWT = idp.config()
	cfg.Agent.URL = "https://orchd.example/"
	other := startDaemon(t, cfg)
	var md oauthex.ProtectedResourceMetadata
	if code, _ := callAs(t, "", "GET", other+"/.well-known/oauth-protected-resource/mcp", "", &md); code != 200 ||
		md.Resource != "https://orchd.example/mcp" || !slices.Equal(md.AuthorizationServers, []string{testIssuerName}) || !slices.Equal(md.BearerMethodsSupported, []string{"header"}) {
		t.Errorf("metadata behind agent.url: %d %+v", code, md)
	}
	if _, h := callAs(t, "", "POST", other+mcpserver.Path, `{}`, nil); h.Get("WWW-Authenticate") != realm+`, resource_metadata="https://orchd.example/.well-known/oauth-protected-resource/mcp"` {
		t.Errorf("/mcp's challenge behind agent.url: %q", h.Get("WWW-Authenticate"))
	}

	// With no authorization server to name (static tokens only), or no
	// authentication, there is nothing to send a client to.
	cfg = loadDefaults(t)
	cfg.Auth = authTokens()
	tokensOnly := startDaemon(t, cfg)
	for name, b := range map[string]string{"static tokens only": tokensOnly, "no authentication": startDaemon(t, loadDefaults(t))} {
		// No such route: the API's 401 with static tokens, 404 without.
		if code, _ := callAs(t, "", "GET", b+"/.well-known/oauth-protected-resource/mcp", "", nil); code == http.StatusOK {
			t.Errorf("metadata with %s: %d", name, code)
		}
	}
	if _, h := callAs(t, "", "POST", tokensOnly+mcpserver.Path, `{}`, nil); h.Get("WWW-Authenticate") != realm {
		t.Errorf("/mcp's challenge with static tokens only: %q", h.Get("WWW-Authenticate"))
	}
}
