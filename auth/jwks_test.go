package auth

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/orchd/orchd/internal/testwait"
)

// TestAuthenticator_JWKSRotation rotates the issuer's keys: a token signed by
// a new key with a new kid is accepted at once (the unknown kid triggers a
// refetch), and once the old key is removed and the set refreshed, tokens
// signed by it are refused.
func TestAuthenticator_JWKSRotation(t *testing.T) {
	t.Parallel()
	oldKey, newKey := newECKey(t, "2026-11"), newECKey(t, "2026-12")
	idp := newTestIdP(t, oldKey)
	cfg := idp.jwtConfig()
	cfg.JWT.RefreshInterval = time.Second
	a := started(t, cfg, Options{HTTPClient: idp.srv.Client()})

	oldTok := oldKey.sign(t, idp.claims("alice"))
	if _, err := a.Authenticate(bearerRequest(oldTok)); err != nil {
		t.Fatalf("old key before rotation: %v", err)
	}
	// Rotation: the issuer publishes both keys and signs with the new one.
	idp.setKeys(oldKey, newKey)
	newTok := newKey.sign(t, idp.claims("bob"))
	p, err := a.Authenticate(bearerRequest(newTok))
	if err != nil {
		t.Fatalf("new key right after rotation: %v", err)
	}
	if p.ID != "bob" {
		t.Errorf("principal %s, want bob", p.ID)
	}
	if _, err := a.Authenticate(bearerRequest(oldTok)); err != nil {
		t.Fatalf("old key while still published: %v", err)
	}
	// The old key is withdrawn; the periodic refresh drops it.
	idp.setKeys(newKey)
	var lastErr error
	testwait.Until(t, 10*time.Second, "old key refused after refresh", func() bool {
		_, lastErr = a.Authenticate(bearerRequest(oldTok))
		return lastErr != nil
	})
	_ = refusal(t, nil, lastErr, ErrInvalidCredentials, `key id "2026-11" is not one of the issuer's keys`, oldTok)
	if _, err := a.Authenticate(bearerRequest(newTok)); err != nil {
		t.Fatalf("new key after the old one was withdrawn: %v", err)
	}
}

// TestAuthenticator_JWKSRefetchRateLimited sends many tokens naming unknown
// kids: only the first makes orchd fetch the key set again.
func TestAuthenticator_JWKSRefetchRateLimited(t *testing.T) {
	t.Parallel()
	k := newECKey(t, "k1")
	idp := newTestIdP(t, k)
	a := started(t, idp.jwtConfig(), Options{HTTPClient: idp.srv.Client()})
	before := idp.jwksHits.Load()
	for i := range 50 {
		stranger := newECKey(t, "unknown-"+string(rune('a'+i%26)))
		tok := stranger.sign(t, idp.claims("mallory"))
		p, err := a.Authenticate(bearerRequest(tok))
		_ = refusal(t, p, err, ErrInvalidCredentials, "is not one of the issuer's keys", tok)
	}
	if got := idp.jwksHits.Load() - before; got != 1 {
		t.Errorf("key set fetched %d times for 50 unknown kids, want 1", got)
	}
}

// TestAuthenticator_OIDCDiscovery finds the JWKS from the issuer alone.
func TestAuthenticator_OIDCDiscovery(t *testing.T) {
	t.Parallel()
	k := newRSAKey(t, "r1")
	idp := newTestIdP(t, k)
	cfg := Config{JWT: &JWTConfig{Issuer: idp.URL(), Audience: "orchd"}}
	a := started(t, cfg, Options{HTTPClient: idp.srv.Client()})
	if idp.discHits.Load() != 1 {
		t.Errorf("discovery fetched %d times, want 1", idp.discHits.Load())
	}
	p, err := a.Authenticate(bearerRequest(k.sign(t, idp.claims("carol"))))
	if err != nil || p.ID != "carol" {
		t.Fatalf("Authenticate = %v, %v", p, err)
	}
}

// TestAuthenticator_KeysUnavailable covers an issuer whose keys cannot be
// had: JWTs are refused as unavailable (503), not as invalid.
func TestAuthenticator_KeysUnavailable(t *testing.T) {
	t.Parallel()
	k := newECKey(t, "k1")
	cases := []struct {
		name   string
		setup  func(*testIdP)
		config func(*testIdP) Config
		log    string
	}{
		{"discovery names another issuer", func(p *testIdP) { p.issuer = "https://other.example" },
			func(p *testIdP) Config { return Config{JWT: &JWTConfig{Issuer: p.URL(), Audience: "orchd"}} },
			`the document's issuer \"https://other.example\" is not`},
		{"JWKS larger than 1 MiB", func(p *testIdP) {
			p.jwksBody = append([]byte(`{"keys":[],"x":"`), append(bytes.Repeat([]byte("a"), maxJWKSSize), '"', '}')...)
		},
			func(p *testIdP) Config { return p.jwtConfig() }, "exceeded max size of 1048576 bytes"},
		{"JWKS not JSON", func(p *testIdP) { p.jwksBody = []byte("<html>") },
			func(p *testIdP) Config { return p.jwtConfig() }, "failed to parse JWK set"},
		{"issuer down", func(p *testIdP) { p.down = true },
			func(p *testIdP) Config { return p.jwtConfig() }, "status code=503"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			idp := newTestIdP(t, k)
			tc.setup(idp)
			log, logs := testLog()
			a := started(t, tc.config(idp), Options{HTTPClient: idp.srv.Client(), Log: log})
			tok := k.sign(t, idp.claims("alice"))
			p, err := a.Authenticate(bearerRequest(tok))
			ae := refusal(t, p, err, ErrUnavailable, "signing keys are not available", tok)
			if ae.HTTPStatus() != http.StatusServiceUnavailable {
				t.Errorf("status %d, want 503", ae.HTTPStatus())
			}
			if !strings.Contains(logs.String(), tc.log) {
				t.Errorf("log does not say %q:\n%s", tc.log, logs)
			}
		})
	}
}

// TestAuthenticator_IssuerRecovers starts while discovery fails and accepts
// tokens once the issuer answers, without a restart.
func TestAuthenticator_IssuerRecovers(t *testing.T) {
	t.Parallel()
	k := newECKey(t, "k1")
	idp := newTestIdP(t, k)
	idp.setDown(true)
	a := started(t, Config{JWT: &JWTConfig{Issuer: idp.URL(), Audience: "orchd"}}, Options{HTTPClient: idp.srv.Client()})
	tok := k.sign(t, idp.claims("alice"))
	if _, err := a.Authenticate(bearerRequest(tok)); err == nil {
		t.Fatal("accepted while the issuer was down")
	}
	idp.setDown(false)
	testwait.Succeeds(t, 10*time.Second, "token accepted after the issuer came back", func() error {
		_, err := a.Authenticate(bearerRequest(tok))
		return err
	})
}
