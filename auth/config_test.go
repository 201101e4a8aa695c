package auth

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDecodeConfig(t *testing.T) {
	t.Parallel()
	cfg, err := DecodeConfig([]byte(`
tokens:
  - sha256: "` + sha256Hex("t") + `"
    principal: alice
    tenant: acme
    roles: [admin]
tokensFileInterval: 2s
apiKeyHeader: X-API-Key
jwt:
  jwksURL: https://idp.example/.well-known/jwks.json
  issuer: https://idp.example
  audience: orchd
  clockSkew: 45s
  algorithms: [RS256, ES256]
  principalClaim: email
  refreshInterval: 15m
mtls:
  clientCAFile: ca.pem
  tenants: {"spiffe://acme/agent": acme}
  roles: {"spiffe://acme/agent": [peer]}
`))
	if err != nil {
		t.Fatal(err)
	}
	type decoded struct {
		TokensFileInterval, ClockSkew, RefreshInterval time.Duration
		TokenRoles                                     []string
		PrincipalClaim                                 string
		MTLSTenants                                    map[string]string
		MTLSRoles                                      map[string][]string
	}
	want := decoded{2 * time.Second, 45 * time.Second, 15 * time.Minute, []string{"admin"}, "email",
		map[string]string{"spiffe://acme/agent": "acme"}, map[string][]string{"spiffe://acme/agent": {"peer"}}}
	got := decoded{cfg.TokensFileInterval, cfg.JWT.ClockSkew, cfg.JWT.RefreshInterval, cfg.Tokens[0].Roles, cfg.JWT.PrincipalClaim, cfg.MTLS.Tenants, cfg.MTLS.Roles}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}

	for _, bad := range []struct{ yaml, want string }{
		{"tokens:\n  - sha: abc\n", "field sha not found"},
		{"jwt:\n  clockSkew: soon\n", "cannot unmarshal"},
		{"tokens:\n  - secret-in-the-wrong-place\n", "cannot unmarshal"},
	} {
		_, err := DecodeConfig([]byte(bad.yaml))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("DecodeConfig(%q) = %v, want %q", bad.yaml, err, bad.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret-in-the-wrong-place") {
			t.Errorf("the error quotes the value: %v", err)
		}
	}
}

func TestNew_ConfigErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	brokenTokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(brokenTokens, []byte("tokens: {"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := sha256Hex("t")
	jwtCfg := func(change func(*JWTConfig)) Config {
		j := &JWTConfig{Issuer: "https://idp.example", Audience: "orchd"}
		change(j)
		return Config{JWT: j}
	}
	cases := []struct {
		name string
		cfg  Config
		want string
	}{
		{"bad hex", Config{Tokens: []TokenConfig{{SHA256: "xyz", Principal: "a"}}}, "tokens[0]: sha256 is not 64 hex digits"},
		{"short hex", Config{Tokens: []TokenConfig{{SHA256: h[:62], Principal: "a"}}}, "sha256 is not 64 hex digits"},
		{"hash and token", Config{Tokens: []TokenConfig{{SHA256: h, Token: "t", Principal: "a"}}}, "not both"},
		{"neither", Config{Tokens: []TokenConfig{{Principal: "a"}}}, "sha256 (or, for development, token) is required"},
		{"no principal", Config{Tokens: []TokenConfig{{SHA256: h}}}, "principal is required"},
		{"duplicate token", Config{Tokens: []TokenConfig{{SHA256: h, Principal: "a"}, {Token: "t", Principal: "b"}}}, "tokens[1] (principal b) is the same token as tokens[0] (principal a)"},
		{"empty role", Config{Tokens: []TokenConfig{{SHA256: h, Principal: "a", Roles: []string{""}}}}, `role "" is empty`},
		{"plain token with a space", Config{Tokens: []TokenConfig{{Token: "a b", Principal: "a"}}}, "visible ASCII"},
		{"API key header without tokens", Config{APIKeyHeader: "X-API-Key", JWT: &JWTConfig{Issuer: "https://i.example", Audience: "a"}}, "no tokens or tokensFile"},
		{"API key header Authorization", Config{APIKeyHeader: "authorization", Tokens: []TokenConfig{{SHA256: h, Principal: "a"}}}, "may not be Authorization"},
		{"API key header not a name", Config{APIKeyHeader: "X API", Tokens: []TokenConfig{{SHA256: h, Principal: "a"}}}, "not a header name"},
		{"JWT without issuer or jwksURL", Config{JWT: &JWTConfig{Audience: "orchd"}}, "jwt.issuer is required"},
		{"JWT without audience", jwtCfg(func(j *JWTConfig) { j.Audience = "" }), "jwt.audience is required"},
		{"JWT over http", jwtCfg(func(j *JWTConfig) { j.JWKSURL = "http://idp.example/jwks" }), "uses http to a host that is not loopback"},
		{"JWT issuer not a URL", jwtCfg(func(j *JWTConfig) { j.Issuer = "idp" }), "not an absolute URL"},
		{"JWT alg none", jwtCfg(func(j *JWTConfig) { j.Algorithms = []string{"none"} }), `"none" means unsigned`},
		{"JWT alg HS256", jwtCfg(func(j *JWTConfig) { j.Algorithms = []string{"RS256", "HS256"} }), "HS256 is symmetric"},
		{"JWT alg unknown", jwtCfg(func(j *JWTConfig) { j.Algorithms = []string{"RS257"} }), `"RS257" is not one of`},
		{"JWT skew", jwtCfg(func(j *JWTConfig) { j.ClockSkew = time.Hour }), "clockSkew 1h0m0s is not between"},
		{"JWT refresh", jwtCfg(func(j *JWTConfig) { j.RefreshInterval = time.Millisecond }), "shorter than 1s"},
		{"mTLS without CA", Config{MTLS: &MTLSConfig{}}, "mtls.clientCAFile is required"},
		{"mTLS unreadable CA", Config{MTLS: &MTLSConfig{ClientCAFile: filepath.Join(dir, "missing.pem")}}, "no such file"},
		{"mTLS CA not PEM", Config{MTLS: &MTLSConfig{ClientCAFile: notPEM}}, "holds no PEM CERTIFICATE"},
		{"tokens file missing", Config{TokensFile: filepath.Join(dir, "missing.yaml")}, "tokensFile: stat"},
		{"tokens file broken", Config{TokensFile: brokenTokens}, "tokensFile:"},
		{"negative interval", Config{TokensFile: brokenTokens, TokensFileInterval: -time.Second}, "negative"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a, err := New(tc.cfg, Options{})
			if err == nil {
				a.Close()
				t.Fatalf("New accepted it, want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v\nwant it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), `"t"`) {
				t.Errorf("err quotes the token: %v", err)
			}
		})
	}
}

func TestAuthenticator_Enabled(t *testing.T) {
	t.Parallel()
	a, err := New(Config{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if a.Enabled() {
		t.Error("empty config enabled")
	}
	p, err := a.Authenticate(bearerRequest("anything"))
	if p != nil || err != nil {
		t.Errorf("with nothing configured: %v, %v; want nil, nil", p, err)
	}
	if err := a.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := a.Start(t.Context()); err == nil {
		t.Error("second Start: no error")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	b, _ := New(Config{Tokens: []TokenConfig{{SHA256: sha256Hex("x"), Principal: "x"}}}, Options{})
	if !b.Enabled() {
		t.Error("tokens not enabled")
	}
}
