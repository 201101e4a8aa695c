package delegation

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/internal/syncbuf"
	"github.com/orchd/orchd/internal/testca"
	"github.com/orchd/orchd/internal/testclock"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
)

// Secrets the tests send; none may show in an agent's JSON, an error or a
// log line.
const (
	testBearer = "bearer-s3cret-7a1"
	testAPIKey = "apikey-s3cret-7a2"
	testClient = "client-s3cret-7a3"
)

// replier is an a2a-go agent executor that answers every message with
// "done".
type replier struct{}

func (replier) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done")), nil)
	}
}

func (replier) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// securedAgent is a real a2a-go agent whose card declares security and
// whose A2A endpoint, behind an HTTP middleware, serves only requests the
// check accepts (401 otherwise). Its card is public.
type securedAgent struct {
	*httptest.Server
	served, refused atomic.Int32
}

func startSecured(t *testing.T, schemes a2a.NamedSecuritySchemes, reqs a2a.SecurityRequirementsOptions, check func(*http.Request) bool, tlsCfg *tls.Config) *securedAgent {
	t.Helper()
	mux := http.NewServeMux()
	sa := &securedAgent{Server: httptest.NewUnstartedServer(mux)}
	if tlsCfg != nil {
		sa.TLS = tlsCfg
		sa.StartTLS()
	} else {
		sa.Start()
	}
	t.Cleanup(sa.Close)
	card := &a2a.AgentCard{
		Name: "Research", Description: "secured test agent", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: sa.URL + "/rpc", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: "1.0"}},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills:          []a2a.AgentSkill{{ID: "research", Name: "research", Tags: []string{"research"}}},
		SecuritySchemes: schemes, SecurityRequirements: reqs,
	}
	rpc := a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(replier{}))
	mux.Handle("/rpc", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !check(r) {
			sa.refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Bearer realm="research", error="invalid_token"`)
			http.Error(w, "unauthenticated", http.StatusUnauthorized)
			return
		}
		sa.served.Add(1)
		rpc.ServeHTTP(w, r)
	}))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	return sa
}

// credFixture is a registry, policies and an engine whose agents' calls
// carry credentials, all logging at debug level into logs.
type credFixture struct {
	reg    *registry.Registry
	engine *Engine
	logs   *syncbuf.Buffer
	clock  *testclock.Clock
}

func newCredFixture(t *testing.T, rootCAs *x509.CertPool) *credFixture {
	t.Helper()
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	rcfg := registry.Config{AllowNetworks: []string{"127.0.0.0/8"}, RootCAs: rootCAs}
	reg, err := registry.New(rcfg, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	pol, err := policies.NewEngine(nil, policies.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := registry.NewTransport(rcfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(transport.CloseIdleConnections)
	clock := testclock.New(time.Now())
	clients := credentials.NewClients(credentials.ClientsConfig{Base: transport, Log: log, Now: clock.Now})
	t.Cleanup(clients.CloseIdleConnections)
	e := NewEngine(reg, pol, NewMemoryStore(0), Config{HTTPClient: &http.Client{Transport: transport}, Credentials: clients, PollInterval: 20 * time.Millisecond}, log)
	t.Cleanup(e.Close)
	return &credFixture{reg: reg, engine: e, logs: logs, clock: clock}
}

// delegate sends work to agent id and waits for the agent's answer.
func (f *credFixture) delegate(t *testing.T, id string) error {
	t.Helper()
	d, err := f.engine.Delegate(t.Context(), Request{Text: "find papers", Agent: id})
	if err != nil {
		return err
	}
	r := waitState(t, d, a2a.TaskStateCompleted)
	if r.Result == nil || messageText(r.Result) != "done" {
		t.Fatalf("record = %+v", r)
	}
	return nil
}

// noSecret fails the test when s shows one of the test secrets.
func noSecret(t *testing.T, what, s string) {
	t.Helper()
	for _, v := range []string{testBearer, testAPIKey, testClient} {
		if strings.Contains(s, v) {
			t.Errorf("%s shows a secret: %s", what, s)
		}
	}
}

func secretFile(t *testing.T, v string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func require(name string) a2a.SecurityRequirementsOptions {
	return a2a.SecurityRequirementsOptions{{a2a.SecuritySchemeName(name): {}}}
}

// TestDelegate_Credentials delegates to real agents that each demand one
// kind of credential where their card says, with the credential
// configured for the agent.
func TestDelegate_Credentials(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		schemes a2a.NamedSecuritySchemes
		scheme  string
		creds   func(t *testing.T) *credentials.Config
		check   func(*http.Request) bool
	}{
		{
			name:    "bearer",
			schemes: a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer"}},
			scheme:  "bearer",
			creds: func(t *testing.T) *credentials.Config {
				return &credentials.Config{Bearer: &credentials.Bearer{TokenFile: secretFile(t, testBearer)}}
			},
			check: func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+testBearer },
		},
		{
			name:    "api key in header",
			schemes: a2a.NamedSecuritySchemes{"key": a2a.APIKeySecurityScheme{Location: a2a.APIKeySecuritySchemeLocationHeader, Name: "X-API-Key"}},
			scheme:  "key",
			creds: func(t *testing.T) *credentials.Config {
				return &credentials.Config{APIKey: &credentials.APIKey{ValueFile: secretFile(t, testAPIKey)}}
			},
			check: func(r *http.Request) bool { return r.Header.Get("X-API-Key") == testAPIKey },
		},
		{
			name:    "api key in query",
			schemes: a2a.NamedSecuritySchemes{"key": a2a.APIKeySecurityScheme{Location: a2a.APIKeySecuritySchemeLocationQuery, Name: "api_key"}},
			scheme:  "key",
			creds: func(t *testing.T) *credentials.Config {
				return &credentials.Config{APIKey: &credentials.APIKey{ValueFile: secretFile(t, testAPIKey)}}
			},
			check: func(r *http.Request) bool { return r.URL.Query().Get("api_key") == testAPIKey },
		},
		{
			name:    "api key in cookie",
			schemes: a2a.NamedSecuritySchemes{"key": a2a.APIKeySecurityScheme{Location: a2a.APIKeySecuritySchemeLocationCookie, Name: "session"}},
			scheme:  "key",
			creds: func(t *testing.T) *credentials.Config {
				return &credentials.Config{APIKey: &credentials.APIKey{ValueFile: secretFile(t, testAPIKey)}}
			},
			check: func(r *http.Request) bool { c, err := r.Cookie("session"); return err == nil && c.Value == testAPIKey },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			agent := startSecured(t, tt.schemes, require(tt.scheme), tt.check, nil)
			f := newCredFixture(t, nil)
			a, err := f.reg.Add(t.Context(), registry.Spec{ID: "research", URL: agent.URL, Credentials: tt.creds(t)})
			if err != nil {
				t.Fatal(err)
			}
			if !a.Credentials.Satisfied {
				t.Fatalf("credentials status %+v", a.Credentials)
			}
			for range 2 {
				if err := f.delegate(t, "research"); err != nil {
					t.Fatal(err)
				}
			}
			if agent.served.Load() != 2 || agent.refused.Load() != 0 {
				t.Fatalf("agent served %d and refused %d calls, want 2 and 0", agent.served.Load(), agent.refused.Load())
			}
			b, _ := json.Marshal(a)
			noSecret(t, "agent JSON", string(b))
			if strings.Contains(string(b), "secret") {
				t.Errorf("agent JSON shows where the secret is: %s", b)
			}
			noSecret(t, "log", f.logs.String())
		})
	}
}

// tokenEndpoint is a real OAuth 2.0 token endpoint (client-credentials
// grant) issuing tokens that live ttl seconds; valid says whether an
// agent should take a token.
type tokenEndpoint struct {
	*httptest.Server
	fetches atomic.Int32
	mu      sync.Mutex
	live    map[string]bool
}

func startTokenEndpoint(t *testing.T, ttl int) *tokenEndpoint {
	t.Helper()
	te := &tokenEndpoint{live: map[string]bool{}}
	te.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		te.fetches.Add(1)
		id, sec, ok := r.BasicAuth()
		w.Header().Set("Content-Type", "application/json")
		if !ok || id != "orchd" || sec != testClient || r.FormValue("grant_type") != "client_credentials" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_client"}`))
			return
		}
		te.mu.Lock()
		tok := fmt.Sprintf("token-%d-scope-%s", len(te.live), r.FormValue("scope"))
		te.live[tok] = true
		te.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "bearer", "expires_in": ttl})
	}))
	t.Cleanup(te.Close)
	return te
}

func (te *tokenEndpoint) valid(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	te.mu.Lock()
	defer te.mu.Unlock()
	return ok && te.live[tok] && strings.HasSuffix(tok, "-scope-a2a")
}

// TestDelegate_OAuth2 delegates to an agent that takes only tokens from a
// real token endpoint: the token is fetched once for several delegations
// and again when it is about to expire.
func TestDelegate_OAuth2(t *testing.T) {
	t.Parallel()
	idp := startTokenEndpoint(t, 300)
	schemes := a2a.NamedSecuritySchemes{"corp": a2a.OAuth2SecurityScheme{Flows: a2a.ClientCredentialsOAuthFlow{TokenURL: idp.URL + "/token", Scopes: map[string]string{"a2a": "call agents"}}}}
	reqs := a2a.SecurityRequirementsOptions{{"corp": {"a2a"}}}
	agent := startSecured(t, schemes, reqs, idp.valid, nil)
	f := newCredFixture(t, nil)
	creds := &credentials.Config{OAuth2: &credentials.OAuth2{ClientID: "orchd", ClientSecretFile: secretFile(t, testClient), TokenURL: idp.URL + "/token"}}
	if _, err := f.reg.Add(t.Context(), registry.Spec{ID: "research", URL: agent.URL, Credentials: creds}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := f.delegate(t, "research"); err != nil {
			t.Fatal(err)
		}
	}
	if n := idp.fetches.Load(); n != 1 {
		t.Fatalf("%d token fetches for 3 delegations, want 1", n)
	}
	f.clock.Advance(5 * time.Minute)
	if err := f.delegate(t, "research"); err != nil {
		t.Fatal(err)
	}
	if n := idp.fetches.Load(); n != 2 {
		t.Fatalf("%d token fetches after the token expired, want 2", n)
	}
	if agent.refused.Load() != 0 {
		t.Fatalf("agent refused %d calls", agent.refused.Load())
	}
	noSecret(t, "log", f.logs.String())
}

// TestDelegate_MutualTLS delegates to an agent that demands a client
// certificate from a test CA.
func TestDelegate_MutualTLS(t *testing.T) {
	t.Parallel()
	serverCA, clientCA := testca.New(t, "server CA"), testca.New(t, "client CA")
	dir := t.TempDir()
	server, client := serverCA.Server(t, "agent"), clientCA.Client(t, "orchd")
	for name, b := range map[string][]byte{"client.pem": client.CertPEM, "client-key.pem": client.KeyPEM, "ca.pem": serverCA.PEM()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	clientPool := x509.NewCertPool()
	clientPool.AddCert(clientCA.Cert)
	tlsCfg := &tls.Config{Certificates: []tls.Certificate{server.TLS}, ClientCAs: clientPool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}
	schemes := a2a.NamedSecuritySchemes{"mtls": a2a.MutualTLSSecurityScheme{}}
	agent := startSecured(t, schemes, require("mtls"), func(r *http.Request) bool {
		return r.TLS != nil && len(r.TLS.PeerCertificates) > 0 && r.TLS.PeerCertificates[0].Subject.CommonName == "orchd"
	}, tlsCfg)
	serverPool := x509.NewCertPool()
	serverPool.AddCert(serverCA.Cert)
	f := newCredFixture(t, serverPool) // the registry reads the card over TLS too
	creds := &credentials.Config{TLS: &credentials.TLS{CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client-key.pem"), CAFile: filepath.Join(dir, "ca.pem")}}
	if _, err := f.reg.Add(t.Context(), registry.Spec{ID: "research", URL: agent.URL, Credentials: creds}); err != nil {
		t.Fatal(err)
	}
	if err := f.delegate(t, "research"); err != nil {
		t.Fatal(err)
	}
	if agent.served.Load() != 1 {
		t.Fatalf("agent served %d calls, want 1", agent.served.Load())
	}
}

// TestDelegate_CredentialsMissing checks an agent whose card requires
// credentials orchd has not got is refused before anything is sent, with
// the reason.
func TestDelegate_CredentialsMissing(t *testing.T) {
	t.Parallel()
	schemes := a2a.NamedSecuritySchemes{"corp": a2a.OAuth2SecurityScheme{Flows: a2a.ClientCredentialsOAuthFlow{TokenURL: "https://idp.example.com/token", Scopes: map[string]string{"a2a": ""}}}}
	agent := startSecured(t, schemes, require("corp"), func(*http.Request) bool { return true }, nil)
	f := newCredFixture(t, nil)
	if _, err := f.reg.Add(t.Context(), registry.Spec{ID: "research", URL: agent.URL}); err != nil {
		t.Fatal(err)
	}
	_, err := f.engine.Delegate(t.Context(), Request{Text: "find papers", Skill: "research"})
	refused, ok := errors.AsType[*RefusedError](err)
	if !ok {
		t.Fatalf("Delegate = %v, want a RefusedError", err)
	}
	want := `credentials: needs oauth2 scheme "corp"; no credentials configured for agent research`
	if diff := cmp.Diff([]Candidate{{Agent: "research", Reasons: []string{want}}}, refused.Decision.Candidates); diff != "" {
		t.Fatalf("candidates (-want +got):\n%s", diff)
	}
	if n := agent.served.Load() + agent.refused.Load(); n != 0 {
		t.Fatalf("agent got %d A2A requests, want none", n)
	}
}

// TestDelegate_CredentialsRefused checks a wrong credential's 401 is
// reported as the agent refusing orchd's credentials, and does not open
// the agent's circuit breaker however often it happens.
func TestDelegate_CredentialsRefused(t *testing.T) {
	t.Parallel()
	schemes := a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer"}}
	agent := startSecured(t, schemes, require("bearer"), func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer right" }, nil)
	f := newCredFixture(t, nil)
	creds := &credentials.Config{Bearer: &credentials.Bearer{TokenFile: secretFile(t, testBearer)}}
	if _, err := f.reg.Add(t.Context(), registry.Spec{ID: "research", URL: agent.URL, Credentials: creds}); err != nil {
		t.Fatal(err)
	}
	want := `agent research refused orchd's credentials (401 unauthenticated): sent http bearer scheme "bearer": bearer token; the agent asks for Bearer realm="research", error="invalid_token"`
	for i := range 5 { // more than the breaker's 3 failures in a row
		err := f.delegate(t, "research")
		failed, ok := errors.AsType[*FailedError](err)
		if !ok {
			t.Fatalf("Delegate = %v, want a FailedError", err)
		}
		if at := failed.Decision.Attempts; len(at) != 1 || at[0].Error != want {
			t.Fatalf("attempt %d: %+v, want the error %s", i, failed.Decision.Attempts, want)
		}
		noSecret(t, "error", err.Error())
	}
	a, _ := f.reg.Get("research")
	if a.Breaker.State != registry.BreakerClosed || f.reg.CallRefusal(a) != "" {
		t.Fatalf("breaker %+v after refusals of credentials, want closed", a.Breaker)
	}
	if agent.refused.Load() != 5 {
		t.Fatalf("agent refused %d calls, want 5", agent.refused.Load())
	}
	noSecret(t, "log", f.logs.String())
	if !strings.Contains(f.logs.String(), "refused orchd's credentials") {
		t.Errorf("the refusal is not logged: %s", f.logs.String())
	}
}
