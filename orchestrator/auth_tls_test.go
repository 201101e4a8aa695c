package orchestrator

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testca"
	"github.com/orchd/orchd/internal/testcmp"
	"github.com/orchd/orchd/registry"
)

// startTLSDaemon runs a daemon serving HTTPS on an ephemeral loopback
// port until the test ends and returns its base URL.
func startTLSDaemon(t *testing.T, cfg Config) string {
	t.Helper()
	return "https://" + runDaemon(t, cfg).Addr().String()
}

// Client certificates from the configured CA authenticate over HTTPS, with
// the SPIFFE ID as the principal and its tenant from the config; tokens
// still work on the same listener.
func TestAuth_MTLSClientCertificates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	serverCA, clientCA, otherCA := testca.New(t, "server CA"), testca.New(t, "client CA"), testca.New(t, "other CA")
	srv := serverCA.Server(t, "orchd")
	writeFile(t, dir+"/server.pem", string(srv.CertPEM))
	writeFile(t, dir+"/server.key", string(srv.KeyPEM))
	writeFile(t, dir+"/client-ca.pem", string(clientCA.PEM()))

	const spiffe = "spiffe://acme.example/agent/reporter"
	cfg := loadDefaults(t)
	cfg.HTTP.TLS = &TLSConfig{CertFile: dir + "/server.pem", KeyFile: dir + "/server.key"}
	cfg.Auth = authTokens()
	cfg.Auth.MTLS = &auth.MTLSConfig{ClientCAFile: dir + "/client-ca.pem", Tenants: map[string]string{spiffe: "acme"}}
	base := startTLSDaemon(t, cfg)

	roots := x509.NewCertPool()
	roots.AddCert(serverCA.Cert)
	client := func(ca *testca.CA) *http.Client {
		tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if ca != nil {
			tc.Certificates = []tls.Certificate{ca.Client(t, "reporter", spiffe).TLS}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	do := func(c *http.Client, token, method, path, body string, out any) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			return -1 // the handshake refused the client
		}
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}

	var list httpapi.DelegationList
	if code := do(client(clientCA), "", "GET", "/v1/delegations", "", &list); code != 200 {
		t.Errorf("list with a client certificate = %d", code)
	}
	var rec delegation.Record
	// No agent is registered: the delegation is refused, after
	// authentication and authorization let it through.
	if code := do(client(clientCA), "", "POST", "/v1/delegations", `{"text": "x", "skill": "none"}`, &rec); code != 422 {
		t.Errorf("delegate with a client certificate = %d", code)
	}
	if code := do(client(nil), "", "GET", "/v1/delegations", "", nil); code != 401 {
		t.Errorf("list with neither certificate nor token = %d", code)
	}
	if code := do(client(nil), aliceToken, "GET", "/v1/delegations", "", nil); code != 200 {
		t.Errorf("list with a token over TLS = %d", code)
	}
	if code := do(client(otherCA), "", "GET", "/v1/delegations", "", nil); code == 200 {
		t.Errorf("a certificate from another CA was accepted")
	}
}

// JWTs from the configured issuer authenticate callers through the
// daemon; tokens for another audience do not.
func TestAuth_JWTFromTheIssuersKeys(t *testing.T) {
	t.Parallel()
	idp := newTestIssuer(t)
	cfg := loadDefaults(t)
	cfg.Auth = AuthConfig{Config: auth.Config{JWT: idp.config()}}
	base := startDaemon(t, cfg)
	var list httpapi.DelegationList
	if code, _ := callAs(t, idp.token(t, "orchd", "acme", time.Minute), "GET", base+"/v1/delegations", "", &list); code != 200 {
		t.Errorf("list with a JWT = %d", code)
	}
	var e httpapi.ErrorBody
	if code, _ := callAs(t, idp.token(t, "billing", "acme", time.Minute), "GET", base+"/v1/delegations", "", &e); code != 401 || !strings.Contains(e.Error.Message, "audience") {
		t.Errorf("list with a JWT for another audience = %d %+v", code, e)
	}
}

// testIssuer is a JWT issuer made for a test: an RS256 key, and its key
// set served on loopback.
type testIssuer struct {
	key  jwk.Key
	jwks *httptest.Server
}

// testIssuerName is the issuer ("iss") of a testIssuer's tokens.
const testIssuerName = "https://idp.example"

func newTestIssuer(tb testing.TB) *testIssuer {
	tb.Helper()
	raw, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	key, err := jwk.Import(raw)
	if err != nil {
		tb.Fatal(err)
	}
	_ = key.Set(jwk.KeyIDKey, "k1")
	_ = key.Set(jwk.AlgorithmKey, jwa.RS256())
	pub, err := key.PublicKey()
	if err != nil {
		tb.Fatal(err)
	}
	set := jwk.NewSet()
	_ = set.AddKey(pub)
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	tb.Cleanup(jwks.Close)
	return &testIssuer{key: key, jwks: jwks}
}

// config is the auth.jwt section trusting the issuer for audience orchd.
func (i *testIssuer) config() *auth.JWTConfig {
	return &auth.JWTConfig{Issuer: testIssuerName, JWKSURL: i.jwks.URL, Audience: "orchd"}
}

// token is a JWT for carol of tenant, for audience aud, valid for ttl.
func (i *testIssuer) token(tb testing.TB, aud, tenant string, ttl time.Duration) string {
	tb.Helper()
	return i.tokenFor(tb, "carol", aud, tenant, ttl)
}

// tokenFor is a JWT for sub of tenant, for audience aud, valid for ttl.
func (i *testIssuer) tokenFor(tb testing.TB, sub, aud, tenant string, ttl time.Duration) string {
	tb.Helper()
	tok, err := jwt.NewBuilder().Issuer(testIssuerName).Audience([]string{aud}).Subject(sub).
		Claim("tenant", tenant).IssuedAt(time.Now()).Expiration(time.Now().Add(ttl)).Build()
	if err != nil {
		tb.Fatal(err)
	}
	b, err := jwt.Sign(tok, jwt.WithKey(jwa.RS256(), i.key))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// An agent that demands a client certificate is called with the one its
// credentials name, through the daemon's own transports; without
// credentials it is not chosen, and the reason says why.
func TestAuth_AgentCalledWithAClientCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clientCA := testca.New(t, "agent's client CA")
	client := clientCA.Client(t, "orchd")
	writeFile(t, dir+"/client.pem", string(client.CertPEM))
	writeFile(t, dir+"/client.key", string(client.KeyPEM))

	pool := x509.NewCertPool()
	pool.AddCert(clientCA.Cert)
	mux := http.NewServeMux()
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(noop{})))
	agent := httptest.NewUnstartedServer(mux)
	agent.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	agent.StartTLS()
	t.Cleanup(agent.Close)
	writeFile(t, dir+"/agent-ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: agent.Certificate().Raw})))

	// The card is served over plain HTTP on loopback; its interface is the
	// mTLS endpoint.
	card, err := json.Marshal(&a2a.AgentCard{Name: "Secure", Description: "needs a client certificate", Version: "1",
		SupportedInterfaces:  []*a2a.AgentInterface{a2a.NewAgentInterface(agent.URL+"/rpc", a2a.TransportProtocolJSONRPC)},
		SecuritySchemes:      a2a.NamedSecuritySchemes{"corp-mtls": a2a.MutualTLSSecurityScheme{}},
		SecurityRequirements: a2a.SecurityRequirementsOptions{{"corp-mtls": {}}},
		Skills:               []a2a.AgentSkill{{ID: "secure", Name: "secure", Tags: []string{}}}})
	if err != nil {
		t.Fatal(err)
	}
	cards := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(card)
	}))
	t.Cleanup(cards.Close)

	cfg := loadDefaults(t)
	cfg.Agents = []registry.Spec{{ID: "secure", URL: cards.URL + "/card.json",
		Credentials: &credentials.Config{TLS: &credentials.TLS{CertFile: dir + "/client.pem", KeyFile: dir + "/client.key", CAFile: dir + "/agent-ca.pem"}}}}
	base := startDaemon(t, cfg)
	var rec delegation.Record
	code := call(t, "POST", base+"/v1/delegations", `{"text": "ping", "skill": "secure"}`, &rec)
	if diff := cmp.Diff(answer[outcome]{201, outcome{State: a2a.TaskStateCompleted, Result: "pong"}}, answer[outcome]{code, outcomeOf(rec)},
		testcmp.Only[outcome]("State", "Result")); diff != "" {
		t.Errorf("delegate with a client certificate, error %q (-want +got):\n%s", rec.Error, diff)
	}

	cfg.Agents[0].Credentials = nil
	bare := startDaemon(t, cfg)
	var e httpapi.ErrorBody
	if code := call(t, "POST", bare+"/v1/delegations", `{"text": "ping", "skill": "secure"}`, &e); code != 422 || !strings.Contains(fmt.Sprint(e.Error.Details), "corp-mtls") {
		t.Errorf("delegate without credentials = %d %+v", code, e)
	}
}
