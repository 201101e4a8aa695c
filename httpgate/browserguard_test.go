package httpgate

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBrowserGuard_OpenPathsAndForbid: a request of another site is
// refused on every path but those Open lists (a path, or a prefix ending
// in "/"), in the shape of the front Forbid answers for, else with
// ErrorBody.
func TestBrowserGuard_OpenPathsAndForbid(t *testing.T) {
	t.Parallel()
	g, err := NewBrowserGuard(GuardConfig{Hosts: []string{"orchd.example"}, Open: []string{"/card.json", "/hook/"},
		Forbid: func(w http.ResponseWriter, r *http.Request, msg string) bool {
			if !strings.HasPrefix(r.URL.Path, "/front/") {
				return false
			}
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte("front: " + msg))
			return true
		}})
	if err != nil {
		t.Fatal(err)
	}
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	for _, tc := range []struct {
		path string
		want int
		body string // what the refusal starts with
	}{
		{"/card.json", http.StatusNoContent, ""},
		{"/hook/d-1", http.StatusNoContent, ""},
		{"/hook", http.StatusForbidden, "{"},
		{"/card.json/x", http.StatusForbidden, "{"},
		{"/front/rpc", http.StatusForbidden, "front: "},
		{"/v1/agents", http.StatusForbidden, "{"},
	} {
		r := httptest.NewRequest(http.MethodPost, tc.path, nil)
		r.Host = "rebound.example" // another site's name pointed at orchd
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code != tc.want || !strings.HasPrefix(rec.Body.String(), tc.body) {
			t.Errorf("%s: %d %q, want %d %q…", tc.path, rec.Code, rec.Body, tc.want, tc.body)
		}
		if tc.body == "{" {
			var e ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error.Code != "permission_denied" {
				t.Errorf("%s: %s (%v), want permission_denied", tc.path, rec.Body, err)
			} else if !strings.Contains(e.Error.Message, "rebound.example") {
				t.Errorf("%s: %q, want it to name the host rebound.example", tc.path, e.Error.Message)
			}
		}
	}
}
