package auth

import (
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAuthenticator_Authenticate_JWT(t *testing.T) {
	t.Parallel()
	rsaKey := newRSAKey(t, "rsa-1")
	ecKey := newECKey(t, "ec-1")
	idp := newTestIdP(t, rsaKey, ecKey)
	a := started(t, idp.jwtConfig(), Options{HTTPClient: idp.srv.Client()})

	for _, k := range []*signingKey{rsaKey, ecKey} {
		t.Run(k.alg.String(), func(t *testing.T) {
			tok := k.sign(t, idp.claims("alice"))
			p, err := a.Authenticate(bearerRequest(tok))
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			type who struct{ ID, Tenant, Method string }
			if diff := cmp.Diff(who{"alice", "acme", MethodJWT}, who{p.ID, p.Tenant, p.Method}); diff != "" {
				t.Errorf("principal (-want +got):\n%s", diff)
			}
			for role, want := range map[string]bool{"admin": true, "reader": true, "root": false} {
				if p.HasRole(role) != want {
					t.Errorf("HasRole(%q) = %v with roles %v", role, !want, p.Roles)
				}
			}
			if p.Claims["iss"] != idp.URL() {
				t.Errorf("claims[iss] = %v, want %s", p.Claims["iss"], idp.URL())
			}
			if p.Token() != tok {
				t.Error("Token() is not the presented token")
			}
			// Again: answered from the verified-token cache, same result.
			p2, err := a.Authenticate(bearerRequest(tok))
			if err != nil {
				t.Fatalf("second Authenticate: %v", err)
			}
			if p2.ID != "alice" || len(p2.Roles) != 2 || p2.Token() != tok {
				t.Fatalf("second Authenticate = %+v, want alice with her 2 roles and the token", p2)
			}
			p2.Roles[0] = "changed"
			p3, _ := a.Authenticate(bearerRequest(tok))
			if p3.Roles[0] == "changed" {
				t.Error("a caller's change to Roles reached the next request")
			}
		})
	}
}

func TestAuthenticator_Authenticate_JWTClaimShapes(t *testing.T) {
	t.Parallel()
	k := newECKey(t, "ec-1")
	idp := newTestIdP(t, k)
	cfg := idp.jwtConfig()
	cfg.JWT.PrincipalClaim = "email"
	cfg.JWT.TenantClaim = "org"
	cfg.JWT.RolesClaim = "scope"
	a := started(t, cfg, Options{HTTPClient: idp.srv.Client()})

	c := idp.claims("ignored")
	c["email"] = "bob@example.com"
	c["org"] = "globex"
	c["scope"] = "agents.read  delegations.create"
	p, err := a.Authenticate(bearerRequest(k.sign(t, c)))
	if err != nil {
		t.Fatal(err)
	}
	type who struct {
		ID, Tenant string
		Roles      []string
	}
	if diff := cmp.Diff(who{"bob@example.com", "globex", []string{"agents.read", "delegations.create"}}, who{p.ID, p.Tenant, p.Roles}); diff != "" {
		t.Errorf("principal (-want +got):\n%s", diff)
	}

	bad := []struct {
		name   string
		change func(map[string]any)
		reason string
	}{
		{"no principal", func(c map[string]any) { delete(c, "email") }, `no string "email" claim`},
		{"principal not a string", func(c map[string]any) { c["email"] = 7 }, `no string "email" claim`},
		{"tenant not a string", func(c map[string]any) { c["org"] = []string{"a"} }, `claim "org" is not a string`},
		{"roles not strings", func(c map[string]any) { c["scope"] = []any{"a", 1} }, `claim "scope" is not a list of strings`},
		{"roles an object", func(c map[string]any) { c["scope"] = map[string]any{"a": 1} }, `neither a string nor a list`},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			c := idp.claims("x")
			c["email"], c["org"], c["scope"] = "bob@example.com", "globex", "r"
			tc.change(c)
			tok := k.sign(t, c)
			p, err := a.Authenticate(bearerRequest(tok))
			_ = refusal(t, p, err, ErrInvalidCredentials, tc.reason, tok)
		})
	}
}

// TestAuthenticator_Authenticate_BadJWTs is every token the issue names as
// to be refused with 401 and a reason that leaks nothing.
func TestAuthenticator_Authenticate_BadJWTs(t *testing.T) {
	t.Parallel()
	rsaKey := newRSAKey(t, "rsa-1")
	ecKey := newECKey(t, "ec-1")
	idp := newTestIdP(t, rsaKey, ecKey)
	a := started(t, idp.jwtConfig(), Options{HTTPClient: idp.srv.Client()})

	pubDER, err := x509.MarshalPKIXPublicKey(rsaKey.raw.Public())
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	otherKey := newRSAKey(t, "rsa-1") // same kid, not the issuer's key
	now := time.Now()
	with := func(change func(map[string]any)) map[string]any {
		c := idp.claims("mallory")
		change(c)
		return c
	}
	rs256 := func(input []byte) []byte {
		h := sha256.Sum256(input)
		s, err := rsa.SignPKCS1v15(rand.Reader, rsaKey.raw.(*rsa.PrivateKey), crypto.SHA256, h[:])
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good := rsaKey.sign(t, idp.claims("mallory"))
	parts := strings.Split(good, ".")

	cases := []struct {
		name   string
		token  string
		want   error
		reason string
	}{
		{"expired", rsaKey.sign(t, with(func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() })), ErrExpired, "token expired at " + now.Add(-time.Hour).UTC().Format(time.RFC3339)},
		{"expired beyond skew", rsaKey.sign(t, with(func(c map[string]any) { c["exp"] = now.Add(-31 * time.Second).Unix() })), ErrExpired, "token expired at"},
		{"not yet valid", rsaKey.sign(t, with(func(c map[string]any) { c["nbf"] = now.Add(time.Hour).Unix() })), ErrExpired, "not valid before"},
		{"issued in the future", rsaKey.sign(t, with(func(c map[string]any) { c["iat"] = now.Add(time.Hour).Unix() })), ErrExpired, "issued in the future"},
		{"no expiry", rsaKey.sign(t, with(func(c map[string]any) { delete(c, "exp") })), ErrInvalidCredentials, "no expiry"},
		{"wrong audience", rsaKey.sign(t, with(func(c map[string]any) { c["aud"] = []string{"billing"} })), ErrInvalidCredentials, `audience does not include "orchd"`},
		{"no audience", rsaKey.sign(t, with(func(c map[string]any) { delete(c, "aud") })), ErrInvalidCredentials, `audience does not include "orchd"`},
		{"wrong issuer", rsaKey.sign(t, with(func(c map[string]any) { c["iss"] = "https://evil.example" })), ErrInvalidCredentials, `issuer "https://evil.example" is not`},
		{"unsigned alg none", handCrafted(t, map[string]any{"alg": "none", "typ": "JWT"}, idp.claims("mallory"), nil), ErrInvalidCredentials, "unsigned JWT (alg none)"},
		{"unsigned alg NONE", handCrafted(t, map[string]any{"alg": "NONE", "kid": "rsa-1"}, idp.claims("mallory"), nil), ErrInvalidCredentials, "unsigned JWT"},
		{"key confusion HS256 with the RSA public key", handCrafted(t, map[string]any{"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}, idp.claims("mallory"), func(in []byte) []byte {
			m := hmac.New(sha256.New, pubPEM)
			m.Write(in)
			return m.Sum(nil)
		}), ErrInvalidCredentials, "HS256\" is symmetric"},
		{"key confusion HS256 with the DER key", handCrafted(t, map[string]any{"alg": "HS256"}, idp.claims("mallory"), func(in []byte) []byte {
			m := hmac.New(sha256.New, pubDER)
			m.Write(in)
			return m.Sum(nil)
		}), ErrInvalidCredentials, "symmetric"},
		{"RS256 header on the EC key", handCrafted(t, map[string]any{"alg": "RS256", "kid": "ec-1"}, idp.claims("mallory"), rs256), ErrInvalidCredentials, `key "ec-1" is for "ES256", not RS256`},
		{"ES256 header on the RSA key", handCrafted(t, map[string]any{"alg": "ES256", "kid": "rsa-1"}, idp.claims("mallory"), rs256), ErrInvalidCredentials, `key "rsa-1" is an RSA key and cannot verify ES256`},
		{"algorithm not allowed", handCrafted(t, map[string]any{"alg": "ES256K", "kid": "ec-1"}, idp.claims("mallory"), rs256), ErrInvalidCredentials, `"ES256K" is not accepted`},
		{"unknown kid", handCrafted(t, map[string]any{"alg": "RS256", "kid": "rotated-away"}, idp.claims("mallory"), rs256), ErrInvalidCredentials, `key id "rotated-away" is not one of the issuer's keys`},
		{"signed by another key", otherKey.sign(t, idp.claims("mallory")), ErrInvalidCredentials, "signature does not verify"},
		{"claims changed after signing", parts[0] + "." + strings.Split(rsaKey.sign(t, idp.claims("admin")), ".")[1] + "." + parts[2], ErrInvalidCredentials, "signature does not verify"},
		{"signature stripped", parts[0] + "." + parts[1] + ".", ErrInvalidCredentials, "signature does not verify"},
		{"no kid, PS256 claimed over an RS256 signature", handCrafted(t, map[string]any{"alg": "PS256"}, idp.claims("mallory"), rs256), ErrInvalidCredentials, "signature does not verify"},
		{"two parts", parts[0] + "." + parts[1], ErrMalformed, ""},
		{"JWE shape", "eyJhbGciOiJSU0EtT0FFUCJ9.a.b.c.d", ErrMalformed, "encrypted JWTs"},
		{"header not base64url", "ey!!." + parts[1] + "." + parts[2], ErrMalformed, "header is not base64url"},
		{"header not JSON", "eyJub3Rqc29u." + parts[1] + "." + parts[2], ErrMalformed, "malformed JWT"},
		{"header without alg", handCrafted(t, map[string]any{"kid": "rsa-1"}, idp.claims("mallory"), rs256), ErrMalformed, "header has no alg"},
		{"kid not a string", handCrafted(t, map[string]any{"alg": "RS256", "kid": 7}, idp.claims("mallory"), rs256), ErrMalformed, "string alg and kid"},
		{"claims not JSON", handCrafted(t, map[string]any{"alg": "RS256", "kid": "rsa-1"}, nil, rs256)[:0] + func() string {
			h := strings.Split(handCrafted(t, map[string]any{"alg": "RS256", "kid": "rsa-1"}, nil, nil), ".")[0]
			in := h + ".bm90IGpzb24"
			return in + "." + b64(rs256([]byte(in)))
		}(), ErrMalformed, "malformed JWT claims"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := a.Authenticate(bearerRequest(tc.token))
			ae := refusal(t, p, err, tc.want, tc.reason, tc.token)
			if ae.HTTPStatus() != http.StatusUnauthorized {
				t.Errorf("status %d, want 401", ae.HTTPStatus())
			}
			if ae.Method != MethodJWT {
				t.Errorf("method %q, want jwt", ae.Method)
			}
		})
	}
}

// TestAuthenticator_Authenticate_JWTClock checks expiry against the injected
// clock, with the configured skew.
func TestAuthenticator_Authenticate_JWTClock(t *testing.T) {
	t.Parallel()
	k := newECKey(t, "ec-1")
	idp := newTestIdP(t, k)
	exp := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	var now time.Time
	cfg := idp.jwtConfig()
	cfg.JWT.ClockSkew = 10 * time.Second
	a := started(t, cfg, Options{HTTPClient: idp.srv.Client(), Now: func() time.Time { return now }})
	c := idp.claims("alice")
	c["exp"], c["iat"] = exp.Unix(), exp.Add(-time.Hour).Unix()
	tok := k.sign(t, c)

	for _, tc := range []struct {
		now  time.Time
		want bool
	}{
		{exp.Add(-time.Minute), true},
		{exp.Add(5 * time.Second), true}, // within the skew
		{exp.Add(11 * time.Second), false},
		{exp.Add(-time.Hour - 9*time.Second), true}, // iat within the skew
		{exp.Add(-time.Hour - 11*time.Second), false},
	} {
		now = tc.now
		p, err := a.Authenticate(bearerRequest(tok))
		if got := err == nil; got != tc.want {
			t.Errorf("at %s: accepted %v (%v), want %v", tc.now, got, err, tc.want)
		}
		if !tc.want {
			_ = refusal(t, p, err, ErrExpired, "", tok)
		}
	}
	// A cached verification is not reused past the expiry.
	now = exp.Add(-time.Second)
	if _, err := a.Authenticate(bearerRequest(tok)); err != nil {
		t.Fatal(err)
	}
	now = exp.Add(time.Second)
	if _, err := a.Authenticate(bearerRequest(tok)); err != nil {
		t.Fatalf("within skew after a cached verification: %v", err)
	}
	now = exp.Add(time.Minute)
	p, err := a.Authenticate(bearerRequest(tok))
	_ = refusal(t, p, err, ErrExpired, "token expired at 2026-12-01T12:00:00Z", tok)
}

// TestAuthenticator_Authenticate_JWTWithoutKid accepts a token without a kid
// only when exactly one of the issuer's keys fits its algorithm.
func TestAuthenticator_Authenticate_JWTWithoutKid(t *testing.T) {
	t.Parallel()
	k1, k2 := newRSAKey(t, "r1"), newRSAKey(t, "r2")
	signer := func(k *signingKey) func([]byte) []byte {
		return func(in []byte) []byte {
			h := sha256.Sum256(in)
			s, err := rsa.SignPKCS1v15(rand.Reader, k.raw.(*rsa.PrivateKey), crypto.SHA256, h[:])
			if err != nil {
				t.Fatal(err)
			}
			return s
		}
	}
	one := newTestIdP(t, k1)
	a1 := started(t, one.jwtConfig(), Options{HTTPClient: one.srv.Client()})
	tok := handCrafted(t, map[string]any{"alg": "RS256", "typ": "JWT"}, one.claims("alice"), signer(k1))
	if p, err := a1.Authenticate(bearerRequest(tok)); err != nil || p.ID != "alice" {
		t.Fatalf("one key, no kid: %v, %v", p, err)
	}
	tok = handCrafted(t, map[string]any{"alg": "ES256"}, one.claims("alice"), signer(k1))
	p, err := a1.Authenticate(bearerRequest(tok))
	_ = refusal(t, p, err, ErrInvalidCredentials, "no kid and the issuer has no ES256 key", tok)

	two := newTestIdP(t, k1, k2)
	a2 := started(t, two.jwtConfig(), Options{HTTPClient: two.srv.Client()})
	tok = handCrafted(t, map[string]any{"alg": "RS256"}, two.claims("alice"), signer(k1))
	p, err = a2.Authenticate(bearerRequest(tok))
	_ = refusal(t, p, err, ErrInvalidCredentials, "no kid and the issuer has 2 RS256 keys", tok)
}
