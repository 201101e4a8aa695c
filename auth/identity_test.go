package auth

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestIdentity_Key(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id   Identity
		want string
	}{
		{Identity{Method: MethodToken, ID: "alice", Tenant: "acme"}, "token:alice@acme"},
		{Identity{Method: MethodToken, ID: "acme/alice"}, "token:acme/alice"},
		{Identity{Method: MethodToken, ID: "alice@acme"}, "token:alice%40acme"},
		{Identity{Method: MethodJWT, Issuer: "https://idp.example.com", ID: "alice", Tenant: "acme"}, "jwt:https://idp.example.com#alice@acme"},
		{Identity{Method: MethodJWT, Issuer: "https://idp#x", ID: "a#b@c", Tenant: "t@%"}, "jwt:https://idp%23x#a%23b%40c@t@%25"},
		{Identity{Method: MethodToken, ID: "a", Tenant: "#"}, "token:a@%23"},
		{Identity{Method: MethodMTLS, ID: "spiffe://acme.example/agent/reporter"}, "mtls:spiffe://acme.example/agent/reporter"},
		{Identity{Method: "peer", Issuer: "token:orchd-a", ID: "alice", Tenant: "acme"}, "peer:token:orchd-a#alice@acme"},
	} {
		if got := tc.id.Key(); got != tc.want {
			t.Errorf("%+v.Key() = %q, want %q", tc.id, got, tc.want)
		}
		if back, err := parseKey(tc.want); err != nil || back != tc.id {
			t.Errorf("parseKey(%q) = %+v, %v; want %+v", tc.want, back, err, tc.id)
		}
	}
}

// Identities that a join of their parts would confuse have different keys.
func TestIdentity_KeyIsUnambiguous(t *testing.T) {
	t.Parallel()
	for _, pair := range [][2]Identity{
		{{Method: MethodToken, ID: "alice", Tenant: "acme"}, {Method: MethodToken, ID: "alice@acme"}},
		{{Method: MethodToken, ID: "alice", Tenant: "acme"}, {Method: MethodJWT, ID: "alice", Tenant: "acme"}},
		{{Method: MethodJWT, Issuer: "https://a", ID: "alice"}, {Method: MethodJWT, Issuer: "https://b", ID: "alice"}},
		{{Method: MethodJWT, Issuer: "i", ID: "alice"}, {Method: MethodJWT, ID: "i#alice"}},
		{{Method: MethodToken, ID: "token:alice"}, {Method: "token:token", ID: "alice"}},
		{{Method: MethodToken, ID: "a", Tenant: "b@c"}, {Method: MethodToken, ID: "a@b", Tenant: "c"}},
		{{Method: MethodToken, ID: "a%40b"}, {Method: MethodToken, ID: "a@b"}},
	} {
		if pair[0].Key() == pair[1].Key() {
			t.Errorf("%+v and %+v share the key %q", pair[0], pair[1], pair[0].Key())
		}
	}
}

func TestPrincipal_Identity(t *testing.T) {
	t.Parallel()
	jwt := &Principal{ID: "alice", Tenant: "acme", Method: MethodJWT, Claims: map[string]any{"iss": "https://idp.example.com", "sub": "alice"}}
	if got := jwt.Identity(); got != (Identity{Method: MethodJWT, Issuer: "https://idp.example.com", ID: "alice", Tenant: "acme"}) {
		t.Errorf("JWT principal's identity = %+v", got)
	}
	// Only a JWT's iss names an issuer: a certificate's issuer claim is
	// the configuration's own CA.
	cert := &Principal{ID: "spiffe://acme.example/a", Method: MethodMTLS, Claims: map[string]any{"iss": "CN=client CA", "issuer": "CN=client CA"}}
	if got := cert.Identity(); got != (Identity{Method: MethodMTLS, ID: "spiffe://acme.example/a"}) {
		t.Errorf("certificate principal's identity = %+v", got)
	}
	tok := &Principal{ID: "alice", Tenant: "acme", Method: MethodToken}
	if got := tok.Identity().Key(); got != "token:alice@acme" {
		t.Errorf("token principal's key = %q", got)
	}
}

// The key decodes back to the identity it encodes, so no two identities
// share one.
func FuzzIdentityKey(f *testing.F) {
	f.Add("token", "", "alice", "acme")
	f.Add("jwt", "https://idp.example.com", "a#b@c%", "t@%#")
	f.Add("a:b", "#", "@", "")
	f.Fuzz(func(t *testing.T, method, issuer, id, tenant string) {
		in := Identity{Method: method, Issuer: issuer, ID: id, Tenant: tenant}
		got, err := parseKey(in.Key())
		if err != nil || got != in {
			t.Fatalf("parseKey(%q) = %+v, %v; want %+v", in.Key(), got, err, in)
		}
	})
}

// parseKey decodes Identity.Key, for the tests: the first ":" ends the
// method, a "#" the issuer, an "@" the id; every other occurrence is
// escaped.
func parseKey(k string) (Identity, error) {
	var id Identity
	method, rest, ok := strings.Cut(k, ":")
	if !ok {
		return id, errors.New("no method")
	}
	issuer, rest, hasIssuer := strings.Cut(rest, "#")
	if !hasIssuer {
		issuer, rest = "", issuer
	}
	principal, tenant, _ := strings.Cut(rest, "@")
	for _, p := range []struct {
		to *string
		s  string
	}{{&id.Method, method}, {&id.Issuer, issuer}, {&id.ID, principal}, {&id.Tenant, tenant}} {
		v, err := url.PathUnescape(p.s)
		if err != nil {
			return id, err
		}
		*p.to = v
	}
	return id, nil
}
