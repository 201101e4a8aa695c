package orchestrator

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/orchd/orchd/httpapi"
)

// TestAPI_WrongMethod checks that every API route answers a method it
// does not serve with 405, the methods it does serve in Allow, and the
// API's JSON error body, while a path no route serves stays a 404.
func TestAPI_WrongMethod(t *testing.T) {
	t.Parallel()
	base := startDaemon(t, loadDefaults(t))
	tests := []struct {
		method, path string
		allow        string // "" for a 404
	}{
		{"PUT", "/healthz", "GET, HEAD"},
		{"POST", "/readyz", "GET, HEAD"},
		{"DELETE", "/openapi.yaml", "GET, HEAD"},
		{"PUT", "/v1/agents", "GET, HEAD, POST"},
		{"PUT", "/v1/agents/x", "GET, HEAD, DELETE"},
		{"PATCH", "/v1/agents/x", "GET, HEAD, DELETE"},
		{"POST", "/v1/agents/x", "GET, HEAD, DELETE"},
		{"GET", "/v1/agents/x:refresh", "POST"},
		{"DELETE", "/v1/agents/x:refresh", "POST"},
		{"PUT", "/v1/policies", "GET, HEAD"},
		{"GET", "/v1/policies:reload", "POST"},
		{"GET", "/v1/policy:evaluate", "POST"},
		{"DELETE", "/v1/delegations", "GET, HEAD, POST"},
		{"PUT", "/v1/delegations/x", "GET, HEAD"},
		{"DELETE", "/v1/delegations/x", "GET, HEAD"},
		{"POST", "/v1/delegations/x", "GET, HEAD"},
		{"POST", "/v1/delegations/x/events", "GET, HEAD"},
		{"GET", "/v1/delegations/x/messages", "POST"},
		{"GET", "/v1/delegations/x:cancel", "POST"},
		{"PUT", "/v1/delegations/x:steer", "POST"},
		{"GET", "/v1/delegations/x:interrupt", "POST"},
		{"PUT", "/v2/things", ""},
		{"GET", "/v1/nothing/here", ""},
	}
	for _, tc := range tests {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			t.Parallel()
			var eb httpapi.ErrorBody
			status, header := callAs(t, "", tc.method, base+tc.path, "", &eb)
			if tc.allow == "" {
				if diff := cmp.Diff(refusal{http.StatusNotFound, "not_found"}, refusalOf(status, eb)); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
				if allow := header.Get("Allow"); allow != "" {
					t.Errorf("Allow %q on a path not served, want none", allow)
				}
				return
			}
			want := tc.method + " " + tc.path + " is not served; this path takes " + tc.allow
			if diff := cmp.Diff(refusal{http.StatusMethodNotAllowed, "method_not_allowed"}, refusalOf(status, eb)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if allow := header.Get("Allow"); allow != tc.allow {
				t.Errorf("Allow %q, want %q", allow, tc.allow)
			}
			if !strings.Contains(eb.Error.Message, want) {
				t.Errorf("message %q, want it to say %q", eb.Error.Message, want)
			}
		})
	}
}
