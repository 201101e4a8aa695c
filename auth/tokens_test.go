package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchd/orchd/internal/testwait"
)

func TestAuthenticator_Authenticate_Tokens(t *testing.T) {
	t.Parallel()
	log, logs := testLog()
	a := started(t, Config{
		Tokens: []TokenConfig{
			{SHA256: sha256Hex("alice-secret-1"), Principal: "alice", Tenant: "acme", Roles: []string{"admin"}},
			{SHA256: strings.ToUpper(sha256Hex("alice-secret-2")), Principal: "alice", Tenant: "acme"},
			{Token: "dev-plain-token", Principal: "dev"},
		},
		APIKeyHeader: "x-api-key",
	}, Options{Log: log})
	srv := authServer(t, a)
	if !strings.Contains(logs.String(), "plain text") || strings.Contains(logs.String(), "dev-plain-token") {
		t.Errorf("plain-text warning missing, or the token logged:\n%s", logs)
	}

	cases := []struct {
		name    string
		headers map[string]string
		status  int
		body    string
	}{
		{"bearer", map[string]string{"Authorization": "Bearer alice-secret-1"}, 200, `"id":"alice","tenant":"acme","roles":["admin"],"method":"token"`},
		{"bearer lower-case scheme", map[string]string{"Authorization": "bearer alice-secret-2"}, 200, `"id":"alice"`},
		{"API key header", map[string]string{"X-Api-Key": "alice-secret-1"}, 200, `"id":"alice"`},
		{"plain-text token", map[string]string{"Authorization": "Bearer dev-plain-token"}, 200, `"id":"dev"`},
		{"no credentials", nil, 204, ""},
		{"unknown token", map[string]string{"Authorization": "Bearer not-a-token"}, 401, "unknown token"},
		{"unknown API key", map[string]string{"X-API-Key": "nope"}, 401, "unknown token"},
		{"token with a suffix", map[string]string{"Authorization": "Bearer alice-secret-1x"}, 401, "unknown token"},
		{"Basic", map[string]string{"Authorization": "Basic YWxpY2U6cHc="}, 401, `scheme "Basic" is not accepted`},
		{"raw token without scheme", map[string]string{"Authorization": "alice-secret-1"}, 401, `not "Bearer <token>"`},
		{"empty bearer", map[string]string{"Authorization": "Bearer "}, 401, "empty bearer token"},
		{"token with a non-ASCII character", map[string]string{"Authorization": "Bearer caf\u00e9"}, 401, "visible ASCII"},
		{"token with a tab", map[string]string{"Authorization": "Bearer a\tb"}, 401, "visible ASCII"},
		{"token too long", map[string]string{"Authorization": "Bearer " + strings.Repeat("a", MaxTokenLen+1)}, 401, "longer than 8192 bytes"},
		{"both headers", map[string]string{"Authorization": "Bearer alice-secret-1", "X-API-Key": "alice-secret-1"}, 401, "send one"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, body := call(t, srv.Client(), srv.URL, tc.headers)
			if status != tc.status || !strings.Contains(body, tc.body) {
				t.Errorf("got %d %q, want %d containing %q", status, body, tc.status, tc.body)
			}
			if status == 200 && strings.Contains(body, "secret") {
				t.Errorf("the principal's JSON holds the token: %s", body)
			}
		})
	}

	// Several Authorization headers are refused.
	r := bearerRequest("alice-secret-1")
	r.Header.Add("Authorization", "Bearer alice-secret-2")
	p, err := a.Authenticate(r)
	_ = refusal(t, p, err, ErrMalformed, "more than one Authorization header", "")

	// The WWW-Authenticate challenge names the error, not the token.
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
	req.Header.Set("Authorization", "Bearer wrong-token")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if ch := resp.Header.Get("WWW-Authenticate"); ch != `Bearer error="invalid_token", error_description="unknown token"` {
		t.Errorf("challenge %q", ch)
	}

	// Token() is the presented token.
	p, err = a.Authenticate(bearerRequest("alice-secret-2"))
	if err != nil || p.Token() != "alice-secret-2" {
		t.Fatalf("Token() = %q, %v", p.Token(), err)
	}
}

// TestAuthenticator_ConstantTimeHashCompare checks how a presented token is
// matched: hashed with SHA-256, and compared with every configured hash in
// constant time, without stopping at the match.
func TestAuthenticator_ConstantTimeHashCompare(t *testing.T) {
	t.Parallel()
	var tokens []TokenConfig
	for i := range 5 {
		tokens = append(tokens, TokenConfig{SHA256: sha256Hex("token-" + string(rune('a'+i))), Principal: "p" + string(rune('a'+i))})
	}
	a, err := New(Config{Tokens: tokens}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if reflect.ValueOf(a.compare).Pointer() != reflect.ValueOf(subtle.ConstantTimeCompare).Pointer() {
		t.Fatal("the default comparison is not subtle.ConstantTimeCompare")
	}
	var calls atomic.Int64
	var presented atomic.Value
	a.compare = func(x, y []byte) int {
		calls.Add(1)
		if want := presented.Load().([sha256.Size]byte); string(y) != string(want[:]) || len(x) != sha256.Size {
			t.Errorf("compared %d bytes with %x, want a configured hash with the presented token's SHA-256", len(x), y)
		}
		return subtle.ConstantTimeCompare(x, y)
	}
	presented.Store(sha256.Sum256([]byte("token-b")))
	p, err := a.Authenticate(bearerRequest("token-b"))
	if err != nil || p.ID != "pb" {
		t.Fatalf("Authenticate = %v, %v", p, err)
	}
	if calls.Load() != 5 {
		t.Errorf("%d comparisons for a match at the second of 5 hashes, want 5 (no early exit)", calls.Load())
	}
	calls.Store(0)
	presented.Store(sha256.Sum256([]byte("nope")))
	if _, err := a.Authenticate(bearerRequest("nope")); err == nil {
		t.Fatal("accepted an unknown token")
	}
	if calls.Load() != 5 {
		t.Errorf("%d comparisons for a miss, want 5", calls.Load())
	}
}

// TestAuthenticator_TokensFileReload edits the tokens file under a running
// authenticator: a new token works, a removed one is refused, and a broken
// edit keeps the previous tokens.
func TestAuthenticator_TokensFileReload(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "tokens.yaml")
	mtime := time.Now().Add(-time.Hour)
	write := func(content string) {
		t.Helper()
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		// Each version gets its own modification time, as edits seconds
		// apart would on any file system.
		mtime = mtime.Add(time.Second)
		if err := os.Chtimes(tmp, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	write("tokens:\n  - sha256: " + sha256Hex("old-token") + "\n    principal: old\n")
	log, logs := testLog()
	a := started(t, Config{
		Tokens:             []TokenConfig{{SHA256: sha256Hex("inline-token"), Principal: "inline"}},
		TokensFile:         path,
		TokensFileInterval: 10 * time.Millisecond,
	}, Options{Log: log})
	accepts := func(tok string) bool {
		_, err := a.Authenticate(bearerRequest(tok))
		return err == nil
	}
	for tok, want := range map[string]bool{"old-token": true, "inline-token": true, "new-token": false} {
		if accepts(tok) != want {
			t.Fatalf("initial tokens: %s accepted %v, want %v", tok, !want, want)
		}
	}

	write("tokens:\n  - sha256: " + sha256Hex("new-token") + "\n    principal: new\n    tenant: acme\n")
	testwait.Until(t, 5*time.Second, "new token accepted", func() bool { return accepts("new-token") })
	if accepts("old-token") {
		t.Error("removed token still accepted")
	}
	if !accepts("inline-token") {
		t.Error("inline token lost on reload")
	}

	broken := []struct{ name, content, log string }{
		{"not YAML", "tokens: [\n", "did not find expected"},
		{"unknown key", "tokens:\n  - sha256: " + sha256Hex("x") + "\n    principal: x\n    admin: true\n", "field admin not found"},
		{"bad hex", "tokens:\n  - sha256: zz\n    principal: x\n", "sha256 is not 64 hex digits"},
		{"duplicate of an inline token", "tokens:\n  - token: inline-token\n    principal: mallory\n", "is the same token as tokens[0] (principal inline)"},
		{"token where an entry belongs", "tokens:\n  - leaked-secret-value\n", "cannot unmarshal"},
	}
	for _, b := range broken {
		write(b.content)
		testwait.Until(t, 5*time.Second, b.name+": logged", func() bool { return strings.Contains(logs.String(), b.log) })
		if !accepts("new-token") || accepts("old-token") {
			t.Errorf("%s: the previous tokens are not kept", b.name)
		}
	}
	if strings.Contains(logs.String(), "leaked-secret-value") || strings.Contains(logs.String(), "inline-token") {
		t.Errorf("a token reached the log:\n%s", logs)
	}
	if err := a.ReloadTokens(); err == nil {
		t.Error("ReloadTokens of a broken file: no error")
	}

	// Removed file: previous tokens kept. Fixed file: loaded again.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 5*time.Second, "missing file logged", func() bool { return strings.Contains(logs.String(), "no such file") })
	if !accepts("new-token") {
		t.Error("tokens dropped when the file went missing")
	}
	write("tokens: []\n")
	testwait.Until(t, 5*time.Second, "emptied file loaded", func() bool { return !accepts("new-token") })
	if !accepts("inline-token") {
		t.Error("inline token lost")
	}
}

func TestTokenConfig_MarshalHidesToken(t *testing.T) {
	t.Parallel()
	cfg := Config{Tokens: []TokenConfig{{Token: "plain-secret", Principal: "dev", Roles: []string{"admin"}}}}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "plain-secret") || !strings.Contains(string(b), sha256Hex("plain-secret")) {
		t.Errorf("JSON %s: want the hash and not the token", b)
	}
	// The hash form decodes to an equivalent configuration.
	var back struct {
		Tokens []struct{ SHA256, Principal string } `json:"tokens"`
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Tokens[0].SHA256 != sha256Hex("plain-secret") {
		t.Errorf("round trip: %+v, %v", back, err)
	}
}
