package orchestrator

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
)

// testCA is a certificate authority made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate signed by the CA and its key, as PEM.
func (ca *testCA) issue(t *testing.T, tmpl *x509.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, _ := x509.MarshalPKCS8PrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}

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
	serverCA, clientCA, otherCA := newTestCA(t, "server CA"), newTestCA(t, "client CA"), newTestCA(t, "other CA")
	srvCert, srvKey := serverCA.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "orchd"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature})
	writeFile(t, dir+"/server.pem", string(srvCert))
	writeFile(t, dir+"/server.key", string(srvKey))
	writeFile(t, dir+"/client-ca.pem", string(clientCA.pem))

	const spiffe = "spiffe://acme.example/agent/reporter"
	cfg := loadDefaults(t)
	cfg.HTTP.TLS = &TLSConfig{CertFile: dir + "/server.pem", KeyFile: dir + "/server.key"}
	cfg.Auth = authTokens()
	cfg.Auth.MTLS = &auth.MTLSConfig{ClientCAFile: dir + "/client-ca.pem", Tenants: map[string]string{spiffe: "acme"}}
	base := startTLSDaemon(t, cfg)

	roots := x509.NewCertPool()
	roots.AddCert(serverCA.cert)
	client := func(ca *testCA) *http.Client {
		tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if ca != nil {
			u, _ := url.Parse(spiffe)
			certPEM, keyPEM := ca.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "reporter"}, URIs: []*url.URL{u},
				ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature})
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		c := &http.Client{Transport: &http.Transport{TLSClientConfig: tc}, Timeout: 10 * time.Second}
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	do := func(c *http.Client, token, method, path, body string, out any) int {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), method, base+path, strings.NewReader(body))
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

	var list DelegationList
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
	raw, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	key, err := jwk.Import(raw)
	if err != nil {
		t.Fatal(err)
	}
	_ = key.Set(jwk.KeyIDKey, "k1")
	_ = key.Set(jwk.AlgorithmKey, jwa.RS256())
	pub, err := key.PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	_ = set.AddKey(pub)
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(jwks.Close)

	cfg := loadDefaults(t)
	cfg.Auth = AuthConfig{Config: auth.Config{JWT: &auth.JWTConfig{Issuer: "https://idp.example", JWKSURL: jwks.URL, Audience: "orchd"}}}
	base := startDaemon(t, cfg)
	token := func(aud string) string {
		tok, err := jwt.NewBuilder().Issuer("https://idp.example").Audience([]string{aud}).Subject("carol").
			Claim("tenant", "acme").IssuedAt(time.Now()).Expiration(time.Now().Add(time.Minute)).Build()
		if err != nil {
			t.Fatal(err)
		}
		b, err := jwt.Sign(tok, jwt.WithKey(jwa.RS256(), key))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var list DelegationList
	if code, _ := callAs(t, token("orchd"), "GET", base+"/v1/delegations", "", &list); code != 200 {
		t.Errorf("list with a JWT = %d", code)
	}
	var e ErrorBody
	if code, _ := callAs(t, token("billing"), "GET", base+"/v1/delegations", "", &e); code != 401 || !strings.Contains(e.Error.Message, "audience") {
		t.Errorf("list with a JWT for another audience = %d %+v", code, e)
	}
}

// An agent that demands a client certificate is called with the one its
// credentials name, through the daemon's own transports; without
// credentials it is not chosen, and the reason says why.
func TestAuth_AgentCalledWithAClientCertificate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	clientCA := newTestCA(t, "agent's client CA")
	certPEM, keyPEM := clientCA.issue(t, &x509.Certificate{Subject: pkix.Name{CommonName: "orchd"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, KeyUsage: x509.KeyUsageDigitalSignature})
	writeFile(t, dir+"/client.pem", string(certPEM))
	writeFile(t, dir+"/client.key", string(keyPEM))

	pool := x509.NewCertPool()
	pool.AddCert(clientCA.cert)
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
	if code := call(t, "POST", base+"/v1/delegations", `{"text": "ping", "skill": "secure"}`, &rec); code != 201 || rec.State != a2a.TaskStateCompleted || testagent.Text(rec.Result) != "pong" {
		t.Errorf("delegate with a client certificate = %d %+v", code, rec)
	}

	cfg.Agents[0].Credentials = nil
	bare := startDaemon(t, cfg)
	var e ErrorBody
	if code := call(t, "POST", bare+"/v1/delegations", `{"text": "ping", "skill": "secure"}`, &e); code != 422 || !strings.Contains(fmt.Sprint(e.Error.Details), "corp-mtls") {
		t.Errorf("delegate without credentials = %d %+v", code, e)
	}
}
