package httpgate

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/orchd/orchd/auth"
)

// A route wrapped with WrapChallenging adds its parameters to the Bearer
// challenge of every refusal, and only there; Wrap's challenge stays as
// it was.
func TestGate_WrapChallenging(t *testing.T) {
	cfg := auth.Config{Tokens: []auth.TokenConfig{{Token: "alice-0123456789", Principal: "alice"}}}
	authn, err := auth.New(cfg, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = authn.Close() })
	g := NewGate(AuthConfig{Config: cfg}, authn, nil)
	served := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	params := func(r *http.Request) string { return `resource_metadata="http://` + r.Host + `/meta"` }
	for _, tc := range []struct {
		name          string
		h             http.Handler
		token         string
		wantStatus    int
		wantChallenge string
	}{
		{"no credentials", g.WrapChallenging(GroupMCP, served, params), "", 401,
			`Bearer realm="orchd", resource_metadata="http://orchd.test/meta"`},
		{"a wrong token", g.WrapChallenging(GroupMCP, served, params), "wrong-0123456789", 401,
			`Bearer error="invalid_token", error_description="unknown token", resource_metadata="http://orchd.test/meta"`},
		{"a good token", g.WrapChallenging(GroupMCP, served, params), "alice-0123456789", 204, ""},
		{"no credentials, Wrap", g.Wrap(GroupMCP, served), "", 401, `Bearer realm="orchd"`},
		{"no parameters", g.WrapChallenging(GroupMCP, served, func(*http.Request) string { return "" }), "", 401, `Bearer realm="orchd"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "http://orchd.test/mcp", nil)
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			w := httptest.NewRecorder()
			tc.h.ServeHTTP(w, r)
			if w.Code != tc.wantStatus || w.Header().Get("WWW-Authenticate") != tc.wantChallenge {
				t.Errorf("got %d %q, want %d %q", w.Code, w.Header().Get("WWW-Authenticate"), tc.wantStatus, tc.wantChallenge)
			}
		})
	}
}
