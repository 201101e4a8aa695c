package orchestrator

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testcmp"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
)

func TestAPI_Policies(t *testing.T) {
	t.Parallel()
	full, _ := agentServer(t, testCard(t, "v1-full.json"))       // steerable, skill tag "research"
	plain, _ := agentServer(t, testCard(t, "v03-full.json"))     // not steerable
	minimal, _ := agentServer(t, testCard(t, "v1-minimal.json")) // other skill
	dir := t.TempDir()
	policy := filepath.Join(dir, "steer.yaml")
	writeFile(t, policy, `policy: steer
default: allow
rules:
  - name: steerable
    deny: '!agent.supports("steerable")'
    reason: needs steering
`)
	cfg := loadDefaults(t)
	cfg.Policies.Paths = []string{dir}
	cfg.Policies.ReloadInterval = Duration(20 * time.Millisecond)
	cfg.Agents = []registry.Spec{{ID: "full", URL: full.URL}, {ID: "plain", URL: plain.URL}, {ID: "minimal", URL: minimal.URL}}
	base := startDaemon(t, cfg)

	var st policies.Status
	code := call(t, "GET", base+"/v1/policies", "", &st)
	if diff := cmp.Diff(answer[policies.Status]{200, policies.Status{Rules: 1, Policies: []string{"steer"}}}, answer[policies.Status]{code, st},
		testcmp.Only[policies.Status]("Rules", "Policies")); diff != "" {
		t.Fatalf("GET /v1/policies (-want +got):\n%s", diff)
	}
	if st.Digest == "" {
		t.Fatalf("GET /v1/policies: no digest in %+v", st)
	}

	var res httpapi.EvaluateResponse
	// evaluation is what the evaluate tests check of an answer.
	type evaluation struct {
		Status, Candidates int
		Winner             string
	}
	code = call(t, "POST", base+"/v1/policy:evaluate", `{"request": {"skill": "research"}}`, &res)
	if diff := cmp.Diff(evaluation{200, 1, "full"}, evaluation{code, res.Candidates, res.Winner}); diff != "" {
		t.Fatalf("evaluate by skill (-want +got):\n%s", diff)
	}
	code = call(t, "POST", base+"/v1/policy:evaluate", `{"agents": ["plain", "full"], "caller": {"tenant": "acme"}}`, &res)
	if diff := cmp.Diff(evaluation{200, 2, "full"}, evaluation{code, res.Candidates, res.Winner}); diff != "" {
		t.Fatalf("evaluate by ids (-want +got):\n%s", diff)
	}
	if len(res.Decisions) != 2 {
		t.Fatalf("evaluate by ids: %d decisions, want 2", len(res.Decisions))
	}
	refused := res.Decisions[1]
	if diff := cmp.Diff(policies.Decision{Agent: "plain", Allowed: false, Reasons: []string{"needs steering"}}, refused,
		testcmp.Only[policies.Decision]("Agent", "Allowed", "Reasons")); diff != "" {
		t.Errorf("evaluate by ids: the refused decision (-want +got):\n%s", diff)
	}
	if len(refused.Rules) == 0 {
		t.Errorf("evaluate by ids: the refused decision names no rule: %+v", refused)
	}
	if code := call(t, "POST", base+"/v1/policy:evaluate", "", &res); code != 200 || res.Candidates != 3 {
		t.Errorf("evaluate with no body fields = %d, %d candidates", code, res.Candidates)
	}
	var eb httpapi.ErrorBody
	if code := call(t, "POST", base+"/v1/policy:evaluate", `{"agents": ["ghost"]}`, &eb); code != 404 || eb.Error.Code != "not_found" {
		t.Errorf("unknown candidate = %d %+v", code, eb)
	}
	if code := call(t, "POST", base+"/v1/policy:evaluate", `{"request": {"skil": "x"}}`, &eb); code != 400 {
		t.Errorf("misspelt field = %d %+v", code, eb)
	}

	// A broken edit is refused by an explicit reload and by the watcher,
	// and the last good set keeps deciding.
	writeFile(t, policy, "policy: steer\nrules:\n  - name: steerable\n    deny: agent.steerable\n")
	code = call(t, "POST", base+"/v1/policies:reload", "", &eb)
	if diff := cmp.Diff(refusal{422, "invalid_policy"}, refusalOf(code, eb)); diff != "" {
		t.Errorf("reload of a broken edit (-want +got):\n%s", diff)
	}
	if want := "steer.yaml:4:16: deny: undefined field 'steerable'"; !strings.Contains(eb.Error.Message, want) {
		t.Errorf("reload of a broken edit: %q, want it to say %q", eb.Error.Message, want)
	}
	call(t, "GET", base+"/v1/policies", "", &st)
	if st.Rules != 1 || len(st.Diagnostics) != 1 {
		t.Errorf("status after a broken edit: %d rules, %d diagnostics, want the last good set's 1 and the edit's 1", st.Rules, len(st.Diagnostics))
	}
	if st.LastError == "" {
		t.Errorf("status after a broken edit has no last error: %+v", st)
	}
	if call(t, "POST", base+"/v1/policy:evaluate", `{"agents": ["plain"]}`, &res); res.Decisions[0].Allowed {
		t.Error("the last good policy stopped deciding after a broken edit")
	}

	// A good edit is picked up by the watcher without any request.
	writeFile(t, policy, "policy: steer\ndefault: allow\nrules:\n  - name: none\n    rank: \"2\"\n")
	testwait.Succeeds(t, 10*time.Second, "the watcher loading the fixed policy", func() error {
		st = policies.Status{}
		call(t, "GET", base+"/v1/policies", "", &st)
		if st.LastError != "" {
			return fmt.Errorf("last error %q", st.LastError)
		}
		if st.Rules != 1 || st.Digest == "" {
			return fmt.Errorf("status %+v", st)
		}
		res = httpapi.EvaluateResponse{}
		if call(t, "POST", base+"/v1/policy:evaluate", `{"agents": ["plain"]}`, &res); !res.Decisions[0].Allowed || res.Decisions[0].Rank != 2 {
			return fmt.Errorf("status %+v, decision %+v", st, res.Decisions[0])
		}
		return nil
	})
}

func TestNew_RefusesBrokenPolicies(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "p.yaml"), "policy: p\nrules:\n  - name: r\n    allow: nope\n")
	cfg := loadDefaults(t)
	cfg.Policies.Paths = []string{dir}
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "p.yaml:4:12: allow: undeclared reference to 'nope'") {
		t.Errorf("New with a broken policy: err = %v", err)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestAPI_DryRunAsAnotherCallerNeedsTheRight: a dry run shows the routing
// of the caller it runs as, so a caller may dry-run as itself (the
// default when the body names no caller) and only an admin as another
// principal or tenant, over the API and in the console alike.
func TestAPI_DryRunAsAnotherCallerNeedsTheRight(t *testing.T) {
	t.Parallel()
	acme, _ := agentServer(t, testCard(t, "v1-minimal.json"))
	globex, _ := agentServer(t, testCard(t, "v1-minimal.json"))
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "tenants.yaml"), `policy: tenants
default: allow
rules:
  - name: own-tenant
    deny: 'agent.id != caller.tenant + "-agent"'
    reason: the agent serves another tenant
`)
	cfg := loadDefaults(t)
	cfg.Auth = authTokens() // alice@acme, bob@globex, root (admin)
	cfg.Policies.Paths = []string{dir}
	cfg.Agents = []registry.Spec{{ID: "acme-agent", URL: acme.URL}, {ID: "globex-agent", URL: globex.URL}}
	base := startDaemon(t, cfg)

	cases := []struct {
		name, token, body string
		status            int
		winner            string
	}{
		{"as itself, by default", bobToken, `{}`, 200, "globex-agent"},
		{"as itself, named", bobToken, `{"caller": {"principal": "bob", "tenant": "globex", "roles": ["x"], "authenticated": true}}`, 200, "globex-agent"},
		{"as another tenant's caller", bobToken, `{"caller": {"principal": "alice", "tenant": "acme"}}`, 403, ""},
		{"as itself in another tenant", bobToken, `{"caller": {"principal": "bob", "tenant": "acme"}}`, 403, ""},
		{"as nobody", bobToken, `{"caller": {"roles": ["admin"]}}`, 403, ""},
		{"an admin, as anyone", rootToken, `{"caller": {"principal": "alice", "tenant": "acme"}}`, 200, "acme-agent"},
	}
	for _, tc := range cases {
		var raw json.RawMessage
		code, _ := callAs(t, tc.token, "POST", base+"/v1/policy:evaluate", tc.body, &raw)
		if code != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, code, raw, tc.status)
			continue
		}
		if tc.status != 200 {
			var e httpapi.ErrorBody
			if err := json.Unmarshal(raw, &e); err != nil || e.Error.Code != "permission_denied" {
				t.Errorf("%s: %s (%v), want permission_denied", tc.name, raw, err)
			}
			if strings.Contains(string(raw), "decisions") {
				t.Errorf("%s: the refusal shows decisions: %s", tc.name, raw)
			}
			continue
		}
		var res httpapi.EvaluateResponse
		if err := json.Unmarshal(raw, &res); err != nil || res.Winner != tc.winner {
			t.Errorf("%s: winner %q (%v), want %q", tc.name, res.Winner, err, tc.winner)
		}
	}

	// The console's dry run is the API's.
	code, _, page := browse(t, "POST", base+"/ui/policies", bobToken, url.Values{"request": {`{"caller": {"principal": "alice", "tenant": "acme"}}`}})
	if code != 403 || strings.Contains(page, "winner") {
		t.Errorf("console dry run as alice@acme by bob = %d, want 403", code)
	}
	code, _, page = browse(t, "POST", base+"/ui/policies", bobToken, url.Values{"request": {`{}`}})
	if code != 200 || !strings.Contains(page, "winner: <strong>globex-agent</strong>") {
		t.Errorf("console dry run as bob = %d, want globex-agent to win", code)
	}
}
