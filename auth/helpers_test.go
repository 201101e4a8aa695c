package auth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/orchd/orchd/internal/syncbuf"
)

// signingKey is an issuer's key pair, generated in the test.
type signingKey struct {
	kid  string
	alg  jwa.SignatureAlgorithm
	priv jwk.Key
	pub  jwk.Key
	raw  crypto.Signer
}

// newRSAKey generates an RSA key whose public JWK names kid (and no alg).
func newRSAKey(t testing.TB, kid string) *signingKey {
	t.Helper()
	raw, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return keyOf(t, kid, jwa.RS256(), raw)
}

// newECKey generates a P-256 key whose public JWK names kid and ES256.
func newECKey(t testing.TB, kid string) *signingKey {
	t.Helper()
	raw, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k := keyOf(t, kid, jwa.ES256(), raw)
	if err := k.pub.Set(jwk.AlgorithmKey, jwa.ES256()); err != nil {
		t.Fatal(err)
	}
	return k
}

func keyOf(t testing.TB, kid string, alg jwa.SignatureAlgorithm, raw crypto.Signer) *signingKey {
	t.Helper()
	priv, err := jwk.Import(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := priv.Set(jwk.KeyIDKey, kid); err != nil {
		t.Fatal(err)
	}
	pub, err := jwk.PublicKeyOf(priv)
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.Set(jwk.KeyUsageKey, "sig"); err != nil {
		t.Fatal(err)
	}
	return &signingKey{kid: kid, alg: alg, priv: priv, pub: pub, raw: raw}
}

// sign returns a compact JWT of claims signed by k, with k's kid.
func (k *signingKey) sign(t testing.TB, claims map[string]any) string {
	t.Helper()
	tok := jwt.New()
	for name, v := range claims {
		if err := tok.Set(name, v); err != nil {
			t.Fatalf("set claim %s: %v", name, err)
		}
	}
	b, err := jwt.Sign(tok, jwt.WithKey(k.alg, k.priv))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// handCrafted builds a compact JWS from a header and claims, with the
// signature sig computes over the signing input (nil: empty signature).
func handCrafted(t testing.TB, header, claims map[string]any, sig func(input []byte) []byte) string {
	t.Helper()
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	c, err := json.Marshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	var s []byte
	if sig != nil {
		s = sig([]byte(input))
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(s)
}

// testIdP is an identity provider on loopback over HTTPS: an OIDC discovery
// document and a JWKS of the keys set with setKeys.
type testIdP struct {
	srv      *httptest.Server
	mu       sync.Mutex
	keys     []jwk.Key
	jwksBody []byte // when set, served instead of the keys
	issuer   string // when set, the discovery document's issuer
	down     bool   // answer 503 to everything
	jwksHits atomic.Int64
	discHits atomic.Int64
}

func newTestIdP(t testing.TB, keys ...*signingKey) *testIdP {
	t.Helper()
	p := &testIdP{}
	p.setKeys(keys...)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		p.discHits.Add(1)
		p.mu.Lock()
		down, iss := p.down, p.issuer
		p.mu.Unlock()
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if iss == "" {
			iss = p.srv.URL
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"issuer": iss, "jwks_uri": p.srv.URL + "/jwks"})
	})
	mux.HandleFunc("GET /jwks", func(w http.ResponseWriter, r *http.Request) {
		p.jwksHits.Add(1)
		p.mu.Lock()
		down, body := p.down, p.jwksBody
		if body == nil {
			set := jwk.NewSet()
			for _, k := range p.keys {
				_ = set.AddKey(k)
			}
			body, _ = json.Marshal(set)
		}
		p.mu.Unlock()
		if down {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	})
	p.srv = httptest.NewTLSServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

// setKeys replaces the published keys.
func (p *testIdP) setKeys(keys ...*signingKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = p.keys[:0]
	for _, k := range keys {
		p.keys = append(p.keys, k.pub)
	}
}

func (p *testIdP) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

func (p *testIdP) URL() string { return p.srv.URL }

// claims are a valid token's claims for the issuer, audience "orchd".
func (p *testIdP) claims(sub string) map[string]any {
	now := time.Now()
	return map[string]any{
		"iss":    p.srv.URL,
		"aud":    []string{"orchd"},
		"sub":    sub,
		"iat":    now.Add(-time.Minute).Unix(),
		"exp":    now.Add(time.Hour).Unix(),
		"tenant": "acme",
		"roles":  []string{"reader", "admin"},
	}
}

// jwtConfig is a config accepting the IdP's tokens for audience orchd.
func (p *testIdP) jwtConfig() Config {
	return Config{JWT: &JWTConfig{Issuer: p.URL(), JWKSURL: p.URL() + "/jwks", Audience: "orchd"}}
}

// started returns a started Authenticator closed at the end of the test.
func started(t testing.TB, cfg Config, opts Options) *Authenticator {
	t.Helper()
	a, err := New(cfg, opts)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := a.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return a
}

// bearerRequest is a request presenting tok as a bearer token.
func bearerRequest(tok string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v1/agents", nil)
	r.Header.Set("Authorization", "Bearer "+tok)
	return r
}

// refusal asserts err is an *Error matching want and whose reason contains
// wantReason and never the token.
func refusal(t testing.TB, p *Principal, err error, want error, wantReason, tok string) *Error {
	t.Helper()
	if p != nil {
		t.Fatalf("accepted as %v, want refusal %q", p, wantReason)
	}
	var ae *Error
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *auth.Error", err, err)
	}
	if !errors.Is(err, want) {
		t.Errorf("err %v does not match %v", err, want)
	}
	if !strings.Contains(ae.Reason, wantReason) {
		t.Errorf("reason %q, want it to contain %q", ae.Reason, wantReason)
	}
	if tok != "" && strings.Contains(err.Error(), tok) {
		t.Errorf("error %q echoes the token", err)
	}
	return ae
}

// sha256Hex is the configured form of tok.
func sha256Hex(tok string) string {
	s := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(s[:])
}

// authServer serves a handler that authenticates each request with a and
// answers 200 with the principal as JSON, 204 for anonymous, or the error's
// status with its reason.
func authServer(t testing.TB, a *Authenticator) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		var ae *Error
		switch {
		case errors.As(err, &ae):
			w.Header().Set("WWW-Authenticate", ae.Challenge())
			http.Error(w, ae.Reason, ae.HTTPStatus())
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case p == nil:
			w.WriteHeader(http.StatusNoContent)
		default:
			_ = json.NewEncoder(w).Encode(p)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// call sends a GET to srv with the given headers and returns the status
// and body.
func call(t testing.TB, client *http.Client, url string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// testLog returns a logger writing text lines to the returned buffer.
func testLog() (*slog.Logger, *syncbuf.Buffer) {
	b := &syncbuf.Buffer{}
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug})), b
}
