package orchestrator

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	if code := call(t, "GET", base+"/v1/policies", "", &st); code != 200 || st.Rules != 1 || st.Policies[0] != "steer" || st.Digest == "" {
		t.Fatalf("GET /v1/policies = %d %+v", code, st)
	}

	var res EvaluateResponse
	code := call(t, "POST", base+"/v1/policy:evaluate", `{"request": {"skill": "research"}}`, &res)
	if code != 200 || res.Candidates != 1 || res.Winner != "full" {
		t.Fatalf("evaluate by skill = %d, %d candidates, winner %q", code, res.Candidates, res.Winner)
	}
	code = call(t, "POST", base+"/v1/policy:evaluate", `{"agents": ["plain", "full"], "caller": {"tenant": "acme"}}`, &res)
	if code != 200 || res.Candidates != 2 || res.Winner != "full" || res.Decisions[1].Agent != "plain" ||
		res.Decisions[1].Allowed || res.Decisions[1].Reasons[0] != "needs steering" || len(res.Decisions[1].Rules) == 0 {
		t.Fatalf("evaluate by ids = %d %+v", code, res.Result)
	}
	if code := call(t, "POST", base+"/v1/policy:evaluate", "", &res); code != 200 || res.Candidates != 3 {
		t.Errorf("evaluate with no body fields = %d, %d candidates", code, res.Candidates)
	}
	var eb ErrorBody
	if code := call(t, "POST", base+"/v1/policy:evaluate", `{"agents": ["ghost"]}`, &eb); code != 404 || eb.Error.Code != "not_found" {
		t.Errorf("unknown candidate = %d %+v", code, eb)
	}
	if code := call(t, "POST", base+"/v1/policy:evaluate", `{"request": {"skil": "x"}}`, &eb); code != 400 {
		t.Errorf("misspelt field = %d %+v", code, eb)
	}

	// A broken edit is refused by an explicit reload and by the watcher,
	// and the last good set keeps deciding.
	writeFile(t, policy, "policy: steer\nrules:\n  - name: steerable\n    deny: agent.steerable\n")
	if code := call(t, "POST", base+"/v1/policies:reload", "", &eb); code != 422 || eb.Error.Code != "invalid_policy" ||
		!strings.Contains(eb.Error.Message, "steer.yaml:4:16: deny: undefined field 'steerable'") {
		t.Errorf("reload of a broken edit = %d %+v", code, eb)
	}
	call(t, "GET", base+"/v1/policies", "", &st)
	if st.Rules != 1 || st.LastError == "" || len(st.Diagnostics) != 1 {
		t.Errorf("status after a broken edit = %+v", st)
	}
	if call(t, "POST", base+"/v1/policy:evaluate", `{"agents": ["plain"]}`, &res); res.Decisions[0].Allowed {
		t.Error("the last good policy stopped deciding after a broken edit")
	}

	// A good edit is picked up by the watcher without any request.
	writeFile(t, policy, "policy: steer\ndefault: allow\nrules:\n  - name: none\n    rank: \"2\"\n")
	deadline := time.Now().Add(5 * time.Second)
	for {
		st = policies.Status{}
		call(t, "GET", base+"/v1/policies", "", &st)
		if st.LastError == "" && st.Rules == 1 && st.Digest != "" {
			res = EvaluateResponse{}
			if call(t, "POST", base+"/v1/policy:evaluate", `{"agents": ["plain"]}`, &res); res.Decisions[0].Allowed && res.Decisions[0].Rank == 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the watcher did not load the fixed policy: %+v", st)
		}
		time.Sleep(10 * time.Millisecond)
	}
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
