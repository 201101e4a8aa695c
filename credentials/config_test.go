package credentials

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orchd/orchd/internal/testclock"
)

func TestConfig_Validate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  *Config
		want string // substring of the error; "" for none
	}{
		{name: "nil", cfg: nil},
		{name: "empty", cfg: &Config{}},
		{name: "everything", cfg: &Config{
			Bearer: &Bearer{TokenFile: "/t"}, APIKey: &APIKey{ValueEnv: "K", In: "query", Name: "api_key"},
			Basic:  &Basic{Username: "svc", PasswordFile: "/p"},
			OAuth2: &OAuth2{ClientID: "orchd", ClientSecretFile: "/s", TokenURL: "https://idp.example.com/token", Scopes: []string{"a2a"}},
			TLS:    &TLS{CertFile: "/c", KeyFile: "/k", CAFile: "/ca"}, ForwardCaller: true}},
		{name: "bearer without source", cfg: &Config{Bearer: &Bearer{}}, want: "bearer token: set a file or an environment variable"},
		{name: "bearer with both", cfg: &Config{Bearer: &Bearer{TokenFile: "/t", TokenEnv: "T"}}, want: "not both"},
		{name: "api key place half set", cfg: &Config{APIKey: &APIKey{ValueEnv: "K", In: "header"}}, want: "set both in and name"},
		{name: "api key bad place", cfg: &Config{APIKey: &APIKey{ValueEnv: "K", In: "body", Name: "k"}}, want: `apiKey.in "body"`},
		{name: "api key bad name", cfg: &Config{APIKey: &APIKey{ValueEnv: "K", In: "header", Name: "X Key"}}, want: "not a valid header"},
		{name: "basic user with colon", cfg: &Config{Basic: &Basic{Username: "a:b", PasswordEnv: "P"}}, want: "basic.username"},
		{name: "oauth2 plain http", cfg: &Config{OAuth2: &OAuth2{ClientID: "c", ClientSecretEnv: "S", TokenURL: "http://idp.example.com/token"}}, want: "want https"},
		{name: "oauth2 loopback http", cfg: &Config{OAuth2: &OAuth2{ClientID: "c", ClientSecretEnv: "S", TokenURL: "http://127.0.0.1:9/token"}}},
		{name: "oauth2 no token URL", cfg: &Config{OAuth2: &OAuth2{ClientID: "c", ClientSecretEnv: "S"}}, want: "oauth2.tokenURL: required"},
		{name: "oauth2 no client", cfg: &Config{OAuth2: &OAuth2{ClientSecretEnv: "S", TokenURL: "https://i/t"}}, want: "oauth2.clientID"},
		{name: "oauth2 bad scope", cfg: &Config{OAuth2: &OAuth2{ClientID: "c", ClientSecretEnv: "S", TokenURL: "https://i/t", Scopes: []string{"a b"}}}, want: "is not a scope"},
		{name: "tls key alone", cfg: &Config{TLS: &TLS{KeyFile: "/k"}}, want: "both certFile and keyFile"},
		{name: "tls empty", cfg: &Config{TLS: &TLS{}}, want: "set certFile and keyFile, caFile"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestConfig_YAML decodes the documented shape strictly.
func TestConfig_YAML(t *testing.T) {
	t.Parallel()
	doc := `
bearer: {tokenFile: /run/secrets/research-token}
apiKey: {valueEnv: RESEARCH_KEY}
basic: {username: svc, passwordFile: /run/secrets/pw}
oauth2: {clientID: orchd, clientSecretFile: /run/secrets/idp, tokenURL: "https://idp.example.com/token", scopes: [a2a]}
tls: {certFile: /c.pem, keyFile: /k.pem, caFile: /ca.pem}
forwardCaller: true
`
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	var cfg Config
	if err := dec.Decode(&cfg); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []string{KindBearer, KindAPIKey, KindBasic, KindOAuth2, KindTLS, KindForwardCaller}
	if got := cfg.Redacted(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Redacted = %v, want %v", got, want)
	}
	if cfg.OAuth2.TokenURL != "https://idp.example.com/token" || cfg.Basic.Username != "svc" {
		t.Fatalf("decoded %+v", cfg)
	}
}

// TestConfig_Redacted checks a Config marshalled or printed shows kinds
// only: no file, variable or user name.
func TestConfig_Redacted(t *testing.T) {
	t.Parallel()
	cfg := &Config{Bearer: &Bearer{TokenFile: "/run/secrets/research-token"}, Basic: &Basic{Username: "svc-user", PasswordEnv: "PW_VAR"}}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"configured":["bearer","basic"]}` {
		t.Fatalf("JSON %s", b)
	}
	for _, out := range []string{string(b), cfg.String(), fmt.Sprint(*cfg)} {
		for _, leak := range []string{"research-token", "svc-user", "PW_VAR"} {
			if strings.Contains(out, leak) {
				t.Errorf("%q shows %q", out, leak)
			}
		}
	}
}

// TestSecret_Redacted prints, marshals and logs a secret every way there
// is and finds the value nowhere.
func TestSecret_Redacted(t *testing.T) {
	t.Parallel()
	const value = "top-s3cret-value"
	s := secret(value)
	src := &source{what: "bearer token", val: seal(s)}
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	log.Info("x", "secret", s, "source", src)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "secret", s, "source", src)
	j, _ := json.Marshal(map[string]any{"s": s})
	y, _ := yaml.Marshal(map[string]any{"s": s})
	outs := []string{buf.String(), string(j), string(y),
		fmt.Sprint(s), fmt.Sprintf("%s %v %+v %#v %q %x %X", s, s, s, s, s, s, s),
		fmt.Sprintf("%v %+v %#v", src, src, src), fmt.Sprintf("%+v", struct{ S *source }{src}), fmt.Sprintf("%+v", struct{ S secret }{s}),
		fmt.Sprintf("%+v", &tokenSource{agent: "a", tok: seal(s)}), fmt.Sprintf("%+v", &certSource{certFile: "c"})}
	for _, out := range outs {
		if strings.Contains(out, value) || strings.Contains(out, fmt.Sprintf("%x", value)) {
			t.Errorf("output shows the secret: %s", out)
		}
	}
}

// TestSource_Rotation reads a secret file, sees it change on the next
// check, and reports files that are missing, empty or too large without
// their content.
func TestSource_Rotation(t *testing.T) {
	t.Parallel()
	clock := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "token")
	write := func(v string, mod time.Time) {
		t.Helper()
		if err := os.WriteFile(path, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, mod, mod); err != nil {
			t.Fatal(err)
		}
	}
	src := newSource("bearer token", path, "", clock.Now)
	if _, err := src.get(); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("missing file: %v", err)
	}
	write("first-token\n", time.Unix(1000, 0))
	if v, err := src.get(); err != nil || v != "first-token" {
		t.Fatalf("get = %q, %v", string(v), err)
	}
	write("second-token\n", time.Unix(2000, 0))
	if v, _ := src.get(); v != "first-token" {
		t.Fatalf("re-read within a second of the last check: %q", string(v))
	}
	clock.Advance(statEvery)
	if v, _ := src.get(); v != "second-token" {
		t.Fatalf("after a second: %q, want the new token", string(v))
	}
	write("third-token", time.Unix(3000, 0))
	if !src.reload() {
		t.Fatal("reload did not see the change")
	}
	if src.reload() {
		t.Fatal("reload saw a change where there was none")
	}
	write(" \n", time.Unix(4000, 0))
	clock.Advance(statEvery)
	if _, err := src.get(); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("empty file: %v", err)
	}
	write("line\x01break", time.Unix(5000, 0))
	clock.Advance(statEvery)
	_, err := src.get()
	if err == nil || !strings.Contains(err.Error(), "control characters") {
		t.Fatalf("control characters: %v, want them refused", err)
	}
	if strings.Contains(err.Error(), "line") {
		t.Fatalf("control characters: the error %q shows the secret", err)
	}
	write(strings.Repeat("x", maxSecretBytes+1), time.Unix(6000, 0))
	clock.Advance(statEvery)
	if _, err := src.get(); err == nil || !strings.Contains(err.Error(), "more than the limit") {
		t.Fatalf("large file: %v", err)
	}
}

func TestSource_Env(t *testing.T) {
	t.Setenv("ORCHD_TEST_SECRET", "env-value\n")
	src := newSource("API key", "", "ORCHD_TEST_SECRET", time.Now)
	if v, err := src.get(); err != nil || v != "env-value" {
		t.Fatalf("get = %q, %v", string(v), err)
	}
	missing := newSource("API key", "", "ORCHD_TEST_SECRET_UNSET", time.Now)
	if _, err := missing.get(); err == nil || !strings.Contains(err.Error(), "ORCHD_TEST_SECRET_UNSET is not set") {
		t.Fatalf("unset: %v", err)
	}
}
