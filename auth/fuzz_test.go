package auth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzAuthenticateBearer sends arbitrary Authorization and API key header
// values (bearer tokens, JWTs, garbage) to an authenticator with static
// tokens, JWTs and an API key header configured. Nothing the fuzzer can
// make is a valid credential, so every input must be answered without a
// panic, without a principal, and with an *Error that does not echo the
// token; an input without credentials is anonymous.
func FuzzAuthenticateBearer(f *testing.F) {
	rsaKey := newRSAKey(f, "rsa-1")
	ecKey := newECKey(f, "ec-1")
	idp := newTestIdP(f, rsaKey, ecKey)
	cfg := idp.jwtConfig()
	cfg.Tokens = []TokenConfig{{SHA256: sha256Hex("a valid token the fuzzer does not know"), Principal: "alice"}}
	cfg.APIKeyHeader = "X-API-Key"
	a, err := New(cfg, Options{HTTPClient: idp.srv.Client()})
	if err != nil {
		f.Fatal(err)
	}
	if err := a.Start(f.Context()); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = a.Close() })

	// Validly signed tokens that must still be refused, for the fuzzer to
	// mutate.
	wrongAud := idp.claims("mallory")
	wrongAud["aud"] = "billing"
	expiredClaims := idp.claims("mallory")
	expiredClaims["exp"] = time.Now().Add(-time.Hour).Unix()
	f.Add("Bearer "+rsaKey.sign(f, wrongAud), "")
	f.Add("Bearer "+ecKey.sign(f, expiredClaims), "")
	f.Add("", ecKey.sign(f, idp.claims("mallory"))) // a JWT is no API key
	f.Add("Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.", "")
	f.Add("Basic YWxpY2U6cHc=", "")
	f.Add("", "")

	f.Fuzz(func(t *testing.T, authorization, apiKey string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if authorization != "" {
			r.Header["Authorization"] = []string{authorization}
		}
		if apiKey != "" {
			r.Header["X-Api-Key"] = []string{apiKey}
		}
		p, err := a.Authenticate(r)
		if p != nil {
			t.Fatalf("accepted %q / %q as %v", authorization, apiKey, p)
		}
		if authorization == "" && apiKey == "" {
			if err != nil {
				t.Fatalf("no credentials: %v", err)
			}
			return
		}
		var ae *Error
		if !errors.As(err, &ae) {
			t.Fatalf("err = %v (%T), want *auth.Error", err, err)
		}
		if !errors.Is(err, ErrInvalidCredentials) && !errors.Is(err, ErrUnavailable) {
			t.Fatalf("err %v matches neither sentinel", err)
		}
		for _, tok := range []string{authorization, apiKey, strings.TrimPrefix(authorization, "Bearer ")} {
			if len(tok) >= 16 && strings.Contains(ae.Reason, tok) {
				t.Fatalf("reason %q echoes the token", ae.Reason)
			}
		}
	})
}
