package orchestrator

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/orchd/orchd/httpapi"
)

// TestAPI_RefusesBodiesThatAreNotJSON: a browser posts cross-site without
// asking first only as a form or a "simple" request (text/plain, or a body
// with no Content-Type at all). The API takes none of them, before
// anything is done, and answers with its own error body; JSON posts and
// bare POSTs with no body still work.
func TestAPI_RefusesBodiesThatAreNotJSON(t *testing.T) {
	t.Parallel()
	card, _ := agentServer(t, testCard(t, "v1-minimal.json"))
	base := startDaemon(t, loadDefaults(t))
	register := `{"url": "` + card.URL + `"}`

	refused := []struct {
		name, method, path, contentType string
		body                            io.Reader
		want                            string
	}{
		{"text/plain", "POST", "/v1/agents", "text/plain", strings.NewReader(register), "text/plain"},
		{"text/plain with charset", "POST", "/v1/agents", "text/plain;charset=UTF-8", strings.NewReader(register), "text/plain;charset=UTF-8"},
		{"a form", "POST", "/v1/agents", "application/x-www-form-urlencoded", strings.NewReader(register), "application/x-www-form-urlencoded"},
		{"multipart", "POST", "/v1/agents", "multipart/form-data; boundary=x", strings.NewReader(register), "multipart/form-data"},
		{"no type, a body", "POST", "/v1/agents", "", strings.NewReader(register), "needs Content-Type: application/json"},
		{"no type, a chunked body", "POST", "/v1/agents", "", io.MultiReader(strings.NewReader(register)), "needs Content-Type: application/json"},
		{"a form with no fields", "POST", "/v1/policies:reload", "application/x-www-form-urlencoded", nil, "application/x-www-form-urlencoded"},
		{"text/plain, no body", "POST", "/v1/policies:reload", "text/plain", nil, "text/plain"},
		{"a JSON look-alike", "POST", "/v1/agents", "application/jsonx", strings.NewReader(register), "application/jsonx"},
	}
	for _, tc := range refused {
		req, err := http.NewRequestWithContext(t.Context(), tc.method, base+tc.path, tc.body)
		if err != nil {
			t.Fatal(err)
		}
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnsupportedMediaType || !bytes.Contains(b, []byte(`"code": "invalid_argument"`)) {
			t.Errorf("%s: %d %s, want 415 invalid_argument", tc.name, resp.StatusCode, b)
		}
		if !strings.Contains(string(b), tc.want) {
			t.Errorf("%s: %s, want it to name %s", tc.name, b, tc.want)
		}
	}
	var list httpapi.AgentList
	if code := call(t, "GET", base+"/v1/agents", "", &list); code != 200 || len(list.Agents) != 0 {
		t.Fatalf("after the refused posts: GET /v1/agents = %d with %d agents, want none registered", code, len(list.Agents))
	}

	accepted := []struct {
		name, method, path, contentType, body string
		status                                int
	}{
		{"JSON", "POST", "/v1/agents", "application/json", register, http.StatusCreated},
		{"JSON with charset", "POST", "/v1/policy:evaluate", "application/json; charset=utf-8", `{}`, http.StatusOK},
		{"a bare POST", "POST", "/v1/policies:reload", "", "", http.StatusOK},
		{"a read naming a type", "GET", "/v1/agents", "text/plain", "", http.StatusOK},
	}
	for _, tc := range accepted {
		req, err := http.NewRequestWithContext(t.Context(), tc.method, base+tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, b, tc.status)
		}
	}
}
