package credentials

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/internal/syncbuf"
	"github.com/orchd/orchd/internal/testca"
	"github.com/orchd/orchd/internal/testclock"
)

// Secrets the tests use; none may show in an error or a log.
const (
	bearerValue = "bearer-s3cret-0001"
	apiKeyValue = "apikey-s3cret-0002"
	basicValue  = "basic-s3cret-0003"
	clientValue = "client-s3cret-0004"
	callerValue = "caller-s3cret-0005"
)

var allSecrets = []string{bearerValue, apiKeyValue, basicValue, clientValue, callerValue}

// writeSecret writes v to a file in a test directory and returns its path.
func writeSecret(t *testing.T, v string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(v+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// guarded serves ok to requests check accepts and 401, with a challenge
// that echoes the Authorization header it got, to the others.
func guarded(t *testing.T, check func(*http.Request) bool) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		if !check(r) {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token", got="`+r.Header.Get("Authorization")+`"`)
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func newClients(t *testing.T, logs *syncbuf.Buffer, now func() time.Time) *Clients {
	t.Helper()
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	c := NewClients(ClientsConfig{Base: base, Log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})), Now: now})
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// call posts a body to url through rt and returns the answer's body.
func call(ctx context.Context, rt http.RoundTripper, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0"}`))
	if err != nil {
		return "", err
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return string(b), fmt.Errorf("status %s", resp.Status)
	}
	return string(b), err
}

// noSecrets fails the test if any test secret shows in s.
func noSecrets(t *testing.T, what, s string) {
	t.Helper()
	for _, v := range allSecrets {
		if strings.Contains(s, v) {
			t.Errorf("%s shows a secret: %s", what, s)
		}
	}
}

func scheme(s capability.Scheme) *capability.Security {
	return &capability.Security{Schemes: map[string]capability.Scheme{"s": s}, Requirements: [][]capability.Requirement{{{Scheme: "s"}}}}
}

// TestTransport_Schemes sends each kind of credential to an agent that
// demands it where its scheme says, and checks a wrong one is refused.
func TestTransport_Schemes(t *testing.T) {
	t.Parallel()
	logs := &syncbuf.Buffer{}
	c := newClients(t, logs, time.Now)
	tests := []struct {
		name  string
		sec   *capability.Security
		cfg   func(t *testing.T) *Config
		check func(*http.Request) bool
	}{
		{
			name: "bearer",
			sec:  scheme(capability.Scheme{Type: capability.SchemeHTTP, HTTPScheme: "bearer"}),
			cfg:  func(t *testing.T) *Config { return &Config{Bearer: &Bearer{TokenFile: writeSecret(t, bearerValue)}} },
			check: func(r *http.Request) bool {
				return r.Header.Get("Authorization") == "Bearer "+bearerValue
			},
		},
		{
			name: "api key in header",
			sec:  scheme(capability.Scheme{Type: capability.SchemeAPIKey, In: capability.InHeader, Name: "X-API-Key"}),
			cfg:  func(t *testing.T) *Config { return &Config{APIKey: &APIKey{ValueFile: writeSecret(t, apiKeyValue)}} },
			check: func(r *http.Request) bool {
				return r.Header.Get("X-API-Key") == apiKeyValue
			},
		},
		{
			name: "api key in query",
			sec:  scheme(capability.Scheme{Type: capability.SchemeAPIKey, In: capability.InQuery, Name: "api_key"}),
			cfg:  func(t *testing.T) *Config { return &Config{APIKey: &APIKey{ValueFile: writeSecret(t, apiKeyValue)}} },
			check: func(r *http.Request) bool {
				return r.URL.Query().Get("api_key") == apiKeyValue && r.URL.Query().Get("keep") == "1"
			},
		},
		{
			name: "api key in cookie",
			sec:  scheme(capability.Scheme{Type: capability.SchemeAPIKey, In: capability.InCookie, Name: "session"}),
			cfg:  func(t *testing.T) *Config { return &Config{APIKey: &APIKey{ValueFile: writeSecret(t, apiKeyValue)}} },
			check: func(r *http.Request) bool {
				ck, err := r.Cookie("session")
				return err == nil && ck.Value == apiKeyValue
			},
		},
		{
			name: "api key placed by the config",
			sec:  nil,
			cfg: func(t *testing.T) *Config {
				return &Config{APIKey: &APIKey{ValueFile: writeSecret(t, apiKeyValue), In: "header", Name: "X-Key"}}
			},
			check: func(r *http.Request) bool { return r.Header.Get("X-Key") == apiKeyValue },
		},
		{
			name: "basic",
			sec:  scheme(capability.Scheme{Type: capability.SchemeHTTP, HTTPScheme: "basic"}),
			cfg: func(t *testing.T) *Config {
				return &Config{Basic: &Basic{Username: "svc", PasswordFile: writeSecret(t, basicValue)}}
			},
			check: func(r *http.Request) bool {
				u, p, ok := r.BasicAuth()
				return ok && u == "svc" && p == basicValue
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, hits := guarded(t, tt.check)
			rt, err := c.Transport("research", tt.cfg(t), tt.sec, []string{srv.URL + "/rpc"})
			if err != nil {
				t.Fatal(err)
			}
			if body, err := call(t.Context(), rt, srv.URL+"/rpc?keep=1"); err != nil || body != "ok" {
				t.Fatalf("call = %q, %v", body, err)
			}
			// Without the credential, the same agent refuses.
			bare, err := c.Transport("anonymous", &Config{}, nil, []string{srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			_, err = call(t.Context(), bare, srv.URL+"/rpc?keep=1")
			re, ok := errors.AsType[*RefusedError](err)
			if !ok || re.Status != http.StatusUnauthorized {
				t.Fatalf("call without credentials: %v, want a RefusedError of 401", err)
			}
			if !errors.Is(err, a2a.ErrUnauthenticated) {
				t.Fatalf("call without credentials: %v, want it to be a2a.ErrUnauthenticated", err)
			}
			if hits.Load() != 2 {
				t.Fatalf("agent got %d requests, want 2", hits.Load())
			}
		})
	}
	t.Cleanup(func() { noSecrets(t, "log", logs.String()) })
}

// TestTransport_Refused checks a wrong credential gives a RefusedError
// that says so, quotes the agent's challenge without the secret it
// echoes, and is sent once when there is nothing new to retry with.
func TestTransport_Refused(t *testing.T) {
	t.Parallel()
	logs := &syncbuf.Buffer{}
	c := newClients(t, logs, time.Now)
	srv, hits := guarded(t, func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer right" })
	cfg := &Config{Bearer: &Bearer{TokenFile: writeSecret(t, bearerValue)}}
	rt, err := c.Transport("research", cfg, scheme(capability.Scheme{Type: capability.SchemeHTTP, HTTPScheme: "bearer"}), []string{srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = call(t.Context(), rt, srv.URL)
	if err == nil {
		t.Fatal("a wrong token was accepted")
	}
	noSecrets(t, "error", err.Error())
	re, ok := errors.AsType[*RefusedError](Refusal("research", err))
	if !ok {
		t.Fatalf("Refusal(%v) is not a RefusedError", err)
	}
	want := `agent research refused orchd's credentials (401 unauthenticated): sent http bearer scheme "s": bearer token; the agent asks for Bearer error="invalid_token", got="Bearer [redacted]"`
	if re.Error() != want {
		t.Errorf("error\n got %s\nwant %s", re.Error(), want)
	}
	if hits.Load() != 1 {
		t.Errorf("agent got %d requests, want 1 (the token file did not change)", hits.Load())
	}
	noSecrets(t, "log", logs.String())
}

// TestTransport_RotatedFile checks a 401 makes the transport look at the
// secret file again at once, and retry once with a token that changed.
func TestTransport_RotatedFile(t *testing.T) {
	t.Parallel()
	clock := testclock.New(time.Now())
	c := newClients(t, &syncbuf.Buffer{}, clock.Now)
	srv, hits := guarded(t, func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer new-token" })
	path := writeSecret(t, "old-token")
	rt, err := c.Transport("research", &Config{Bearer: &Bearer{TokenFile: path}}, nil, []string{srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(t.Context(), rt, srv.URL); err == nil {
		t.Fatal("the old token was accepted")
	}
	if err := os.WriteFile(path, []byte("new-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, time.Unix(10, 0), time.Unix(10, 0)); err != nil {
		t.Fatal(err)
	}
	if body, err := call(t.Context(), rt, srv.URL); err != nil || body != "ok" {
		t.Fatalf("call after rotation = %q, %v", body, err)
	}
	if hits.Load() != 3 {
		t.Fatalf("agent got %d requests, want 3 (refused, refused, retried)", hits.Load())
	}
}

// TestTransport_Unavailable checks a missing secret fails the call before
// anything is sent, with an error naming the file and matching
// ErrUnavailable.
func TestTransport_Unavailable(t *testing.T) {
	t.Parallel()
	c := newClients(t, &syncbuf.Buffer{}, time.Now)
	srv, hits := guarded(t, func(*http.Request) bool { return true })
	missing := filepath.Join(t.TempDir(), "absent")
	rt, err := c.Transport("research", &Config{Bearer: &Bearer{TokenFile: missing}}, nil, []string{srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = call(t.Context(), rt, srv.URL)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "credentials for agent research: bearer token: stat "+missing) {
		t.Fatalf("call = %v, want ErrUnavailable naming the file", err)
	}
	if hits.Load() != 0 {
		t.Fatal("the request was sent without its credential")
	}
	// A card whose requirement the Config cannot meet gets no transport.
	_, err = c.Transport("research", &Config{}, scheme(capability.Scheme{Type: capability.SchemeMutualTLS}), []string{srv.URL})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), `needs mutualTLS scheme "s"`) {
		t.Fatalf("Transport = %v", err)
	}
}

// TestTransport_Origins checks credentials go only to the card's origins:
// a redirect elsewhere arrives without them.
func TestTransport_Origins(t *testing.T) {
	t.Parallel()
	c := newClients(t, &syncbuf.Buffer{}, time.Now)
	var leaked atomic.Value
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("Authorization") + r.Header.Get("X-API-Key"))
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(elsewhere.Close)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/stolen", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(agent.Close)
	cfg := &Config{Bearer: &Bearer{TokenFile: writeSecret(t, bearerValue)}, APIKey: &APIKey{ValueFile: writeSecret(t, apiKeyValue), In: "header", Name: "X-API-Key"}}
	rt, err := c.Transport("research", cfg, nil, []string{agent.URL + "/rpc"})
	if err != nil {
		t.Fatal(err)
	}
	if body, err := call(t.Context(), rt, agent.URL+"/rpc"); err != nil || body != "ok" {
		t.Fatalf("call = %q, %v", body, err)
	}
	if got, _ := leaked.Load().(string); got != "" {
		t.Fatalf("the redirect target got credentials %q", got)
	}
}

// TestTransport_ForwardCaller checks the caller's token is forwarded when
// the Config says so and present, the configured token is sent otherwise,
// and an agent without ForwardCaller never gets the caller's token.
func TestTransport_ForwardCaller(t *testing.T) {
	t.Parallel()
	c := newClients(t, &syncbuf.Buffer{}, time.Now)
	var got atomic.Value
	srv, _ := guarded(t, func(r *http.Request) bool { got.Store(r.Header.Get("Authorization")); return true })
	sec := scheme(capability.Scheme{Type: capability.SchemeHTTP, HTTPScheme: "bearer"})
	bearer := &Bearer{TokenFile: writeSecret(t, bearerValue)}
	forward, err := c.Transport("a", &Config{Bearer: bearer, ForwardCaller: true}, sec, []string{srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	keep, err := c.Transport("b", &Config{Bearer: bearer}, sec, []string{srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := WithCallerToken(t.Context(), callerValue)
	for _, tc := range []struct {
		rt   http.RoundTripper
		ctx  context.Context
		want string
	}{
		{forward, ctx, "Bearer " + callerValue},
		{forward, t.Context(), "Bearer " + bearerValue},
		{keep, ctx, "Bearer " + bearerValue},
	} {
		if _, err := call(tc.ctx, tc.rt, srv.URL); err != nil {
			t.Fatal(err)
		}
		if g, _ := got.Load().(string); g != tc.want {
			t.Errorf("Authorization %q, want %q", g, tc.want)
		}
	}
}

// tokenServer is a real OAuth 2.0 token endpoint for the client-credentials
// grant, issuing distinct tokens that live ttl, and an agent that takes
// only tokens it issued and has not revoked.
type tokenServer struct {
	*httptest.Server
	ttl     int
	fetches atomic.Int32
	mu      sync.Mutex
	issued  map[string]bool
	last    string
}

func newTokenServer(t *testing.T, ttl int) *tokenServer {
	t.Helper()
	ts := &tokenServer{ttl: ttl, issued: map[string]bool{}}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, sec, ok := r.BasicAuth()
		if r.Method != http.MethodPost || r.FormValue("grant_type") != "client_credentials" {
			http.Error(w, "bad grant", http.StatusBadRequest)
			return
		}
		ts.fetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if !ok || id != "orchd" || sec != clientValue {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid_client","error_description":"client `+sec+` unknown"}`)
			return
		}
		ts.mu.Lock()
		tok := fmt.Sprintf("issued-%d-%s", len(ts.issued), r.FormValue("scope"))
		ts.issued[tok], ts.last = true, tok
		ts.mu.Unlock()
		_ = json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": ts.ttl})
	}))
	t.Cleanup(ts.Close)
	return ts
}

// accepts reports whether tok is a live token the server issued.
func (ts *tokenServer) accepts(r *http.Request) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ok && ts.issued[tok]
}

func (ts *tokenServer) revoke() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.issued = map[string]bool{}
}

// TestTransport_OAuth2 gets tokens from a real token endpoint: one fetch
// serves many calls, concurrent ones included; a new one is fetched when
// the old is about to expire; a revoked token is dropped after the
// agent's 401 and the call retried once with a new one.
func TestTransport_OAuth2(t *testing.T) {
	t.Parallel()
	clock := testclock.New(time.Now())
	logs := &syncbuf.Buffer{}
	c := newClients(t, logs, clock.Now)
	idp := newTokenServer(t, 60)
	agent, hits := guarded(t, idp.accepts)
	cfg := &Config{OAuth2: &OAuth2{ClientID: "orchd", ClientSecretFile: writeSecret(t, clientValue), TokenURL: idp.URL + "/token"}}
	sec := &capability.Security{
		Schemes:      map[string]capability.Scheme{"corp": {Type: capability.SchemeOAuth2, Flows: []string{"clientCredentials"}}},
		Requirements: [][]capability.Requirement{{{Scheme: "corp", Scopes: []string{"a2a"}}}},
	}
	rt, err := c.Transport("research", cfg, sec, []string{agent.URL})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() {
			if _, err := call(t.Context(), rt, agent.URL); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := idp.fetches.Load(); n != 1 {
		t.Fatalf("%d token fetches for 20 calls, want 1", n)
	}
	if !strings.HasSuffix(idp.last, "-a2a") {
		t.Fatalf("token %q not issued for the requirement's scope a2a", idp.last)
	}

	// A transport for a changed card shares the cached token.
	rt2, err := c.Transport("research", cfg, sec, []string{agent.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(t.Context(), rt2, agent.URL); err != nil || idp.fetches.Load() != 1 {
		t.Fatalf("call on a new transport: %v, %d fetches", err, idp.fetches.Load())
	}

	clock.Advance(44 * time.Second) // 60s token: replaced 15s before expiry
	if _, err := call(t.Context(), rt, agent.URL); err != nil || idp.fetches.Load() != 1 {
		t.Fatalf("before renewal: %v, %d fetches, want 1", err, idp.fetches.Load())
	}
	clock.Advance(2 * time.Second)
	if _, err := call(t.Context(), rt, agent.URL); err != nil || idp.fetches.Load() != 2 {
		t.Fatalf("after renewal time: %v, %d fetches, want 2", err, idp.fetches.Load())
	}

	idp.revoke()
	before := hits.Load()
	if _, err := call(t.Context(), rt, agent.URL); err != nil {
		t.Fatalf("call with a revoked token: %v, want a retry with a new one", err)
	}
	if n := idp.fetches.Load(); n != 3 {
		t.Fatalf("%d fetches after revocation, want 3", n)
	}
	if n := hits.Load() - before; n != 2 {
		t.Fatalf("agent got %d requests for one call, want 2 (refused, retried)", n)
	}
	noSecrets(t, "log", logs.String())
	if !strings.Contains(logs.String(), "oauth2 token fetched") {
		t.Errorf("token fetches not logged: %s", logs.String())
	}
}

// TestTransport_OAuth2Refused checks a token endpoint refusing the client
// fails the call with ErrUnavailable, without the secret it echoes.
func TestTransport_OAuth2Refused(t *testing.T) {
	t.Parallel()
	c := newClients(t, &syncbuf.Buffer{}, time.Now)
	idp := newTokenServer(t, 60)
	agent, hits := guarded(t, idp.accepts)
	cfg := &Config{OAuth2: &OAuth2{ClientID: "orchd", ClientSecretFile: writeSecret(t, "wrong-"+clientValue), TokenURL: idp.URL + "/token"}}
	rt, err := c.Transport("research", cfg, nil, []string{agent.URL})
	if err != nil {
		t.Fatal(err)
	}
	_, err = call(t.Context(), rt, agent.URL)
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "answered 401 Unauthorized (invalid_client)") {
		t.Fatalf("call = %v", err)
	}
	noSecrets(t, "error", err.Error())
	if hits.Load() != 0 {
		t.Fatal("the agent was called without a token")
	}
}

// mtlsServer serves ok only to requests over a TLS connection with a
// client certificate from clientCA whose common name is "orchd".
func mtlsServer(t *testing.T, serverCA, clientCA *testca.CA) *httptest.Server {
	t.Helper()
	cert := serverCA.Server(t, "agent").TLS
	pool := x509.NewCertPool()
	pool.AddCert(clientCA.Cert)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "orchd" {
			http.Error(w, "client certificate required", http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok")
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// TestTransport_MutualTLS presents a client certificate from a test CA to
// an agent that demands one, trusting the agent's server certificate
// through caFile; without the certificate the agent refuses.
func TestTransport_MutualTLS(t *testing.T) {
	t.Parallel()
	serverCA, clientCA := testca.New(t, "server CA"), testca.New(t, "client CA")
	srv := mtlsServer(t, serverCA, clientCA)
	dir := t.TempDir()
	client := clientCA.Client(t, "orchd")
	files := map[string][]byte{"client.pem": client.CertPEM, "client-key.pem": client.KeyPEM, "ca.pem": serverCA.PEM()}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	c := newClients(t, &syncbuf.Buffer{}, time.Now)
	sec := scheme(capability.Scheme{Type: capability.SchemeMutualTLS})
	cfg := &Config{TLS: &TLS{CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client-key.pem"), CAFile: filepath.Join(dir, "ca.pem")}}
	rt, err := c.Transport("research", cfg, sec, []string{srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if body, err := call(t.Context(), rt, srv.URL); err != nil || body != "ok" {
		t.Fatalf("call with a client certificate = %q, %v", body, err)
	}
	// The same CA, no certificate: the agent refuses.
	caOnly, err := c.Transport("other", &Config{TLS: &TLS{CAFile: filepath.Join(dir, "ca.pem")}}, nil, []string{srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := call(t.Context(), caOnly, srv.URL); !errors.Is(err, a2a.ErrUnauthenticated) {
		t.Fatalf("call without a certificate = %v, want a refusal", err)
	}
	// A base transport that is not an *http.Transport cannot be cloned.
	wrapped := NewClients(ClientsConfig{Base: roundTripFunc(http.DefaultTransport.RoundTrip)})
	if _, err := wrapped.Transport("research", cfg, sec, []string{srv.URL}); err == nil || !strings.Contains(err.Error(), "*http.Transport") {
		t.Fatalf("Transport over a wrapped base = %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestOrigin(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"https://Agents.Example.com/rpc", "https://agents.example.com"},
		{"https://a.example.com:443/x", "https://a.example.com"},
		{"http://a.example.com:80", "http://a.example.com"},
		{"http://127.0.0.1:8080/rpc?x=1", "http://127.0.0.1:8080"},
		{"https://[::1]:9443/", "https://[::1]:9443"},
		{"grpc.example.com:443", ""},
		{"ftp://a/", ""},
	}
	for _, tt := range tests {
		got, _ := origin(tt.in)
		if got != tt.want {
			t.Errorf("origin(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
