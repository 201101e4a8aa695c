package auth

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// BenchmarkAuthenticate measures Authenticate per request: none is a
// disabled authenticator (the cost of the call itself), anonymous an
// enabled one given no credentials, token a static token among 10,
// jwt-cached-keys a full JWT verification with the issuer's keys cached (the
// verified-token cache off), and jwt-cached-token a JWT seen before.
func BenchmarkAuthenticate(b *testing.B) {
	rsaKey, ecKey := newRSAKey(b, "rsa-1"), newECKey(b, "ec-1")
	idp := newTestIdP(b, rsaKey, ecKey)
	cfg := idp.jwtConfig()
	for i := range 10 {
		cfg.Tokens = append(cfg.Tokens, TokenConfig{SHA256: sha256Hex(fmt.Sprintf("token-%02d-abcdefghijklmnopqrstuvwxyz", i)), Principal: fmt.Sprintf("p%d", i), Roles: []string{"admin"}})
	}
	a := started(b, cfg, Options{HTTPClient: idp.srv.Client()})
	uncached := started(b, cfg, Options{HTTPClient: idp.srv.Client()})
	uncached.jwt.verified = nil
	none := started(b, Config{}, Options{})

	run := func(name string, a *Authenticator, r *http.Request, wantID string) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := a.Authenticate(r)
				if err != nil || (p == nil) != (wantID == "") || (p != nil && p.ID != wantID) {
					b.Fatalf("Authenticate = %v, %v", p, err)
				}
			}
		})
	}
	run("none", none, bearerRequest("token-07-abcdefghijklmnopqrstuvwxyz"), "")
	run("anonymous", a, httptest.NewRequest(http.MethodGet, "/", nil), "")
	run("token", a, bearerRequest("token-07-abcdefghijklmnopqrstuvwxyz"), "p7")
	run("jwt-cached-keys/RS256", uncached, bearerRequest(rsaKey.sign(b, idp.claims("alice"))), "alice")
	run("jwt-cached-keys/ES256", uncached, bearerRequest(ecKey.sign(b, idp.claims("alice"))), "alice")
	run("jwt-cached-token", a, bearerRequest(ecKey.sign(b, idp.claims("alice"))), "alice")
}

// BenchmarkAuthenticateHTTP is the same per request through an HTTP server
// on loopback, so that the cost can be read as a throughput ratio against
// no-auth in the same run.
func BenchmarkAuthenticateHTTP(b *testing.B) {
	rsaKey := newRSAKey(b, "rsa-1")
	idp := newTestIdP(b, rsaKey)
	cfg := idp.jwtConfig()
	cfg.Tokens = []TokenConfig{{SHA256: sha256Hex("static-token-abcdefghijklmnopqrstuvwxyz"), Principal: "p"}}
	a := started(b, cfg, Options{HTTPClient: idp.srv.Client()})
	uncached := started(b, cfg, Options{HTTPClient: idp.srv.Client()})
	uncached.jwt.verified = nil
	jwtTok := rsaKey.sign(b, idp.claims("alice"))

	for _, tc := range []struct {
		name  string
		a     *Authenticator
		token string
	}{
		{"no-auth", nil, ""},
		{"token", a, "static-token-abcdefghijklmnopqrstuvwxyz"},
		{"jwt-cached-keys", uncached, jwtTok},
		{"jwt-cached-token", a, jwtTok},
	} {
		b.Run(tc.name, func(b *testing.B) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tc.a != nil {
					if p, err := tc.a.Authenticate(r); err != nil || p == nil {
						http.Error(w, "refused", http.StatusUnauthorized)
						return
					}
				}
				_, _ = io.WriteString(w, "ok")
			}))
			defer srv.Close()
			client := srv.Client()
			req, err := http.NewRequest(http.MethodGet, srv.URL, nil)
			if err != nil {
				b.Fatal(err)
			}
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			b.ReportAllocs()
			for b.Loop() {
				resp, err := client.Do(req)
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d", resp.StatusCode)
				}
			}
			client.CloseIdleConnections()
		})
	}
}
