package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestPolicyTest_Authorization runs authorization cases through the
// command: a failure names the action, the decision and its reason, and
// -v explains the rules that matched.
func TestPolicyTest_Authorization(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policy := filepath.Join(dir, "authz.yaml")
	cases := filepath.Join(dir, "cases.yaml")
	write(t, policy, `kind: authorization
policy: ops
rules:
  - name: scrapers
    allow: '"metrics" in caller.roles && action == "metrics.read"'
    reason: scrapers read metrics
`)
	write(t, cases, `cases:
  - name: the scraper reads metrics
    authorize: {caller: {principal: prom, roles: [metrics], authenticated: true, method: token}, action: metrics.read}
    want: allow
    decidedBy: ops/scrapers
  - name: expects bob to read metrics
    authorize: {caller: {principal: bob, authenticated: true, method: token}, action: metrics.read}
    want: allow
`)
	code, out, _ := orchd(t, t.Context(), "policy", "test", policy, "--cases", cases, "-v")
	for _, want := range []string{
		"--- PASS: " + cases + ": the scraper reads metrics",
		"      allow  by ops/scrapers: scrapers read metrics",
		"        allow ops/scrapers matched",
		"--- FAIL: " + cases + ": expects bob to read metrics",
		"    metrics.read: want allow, got deny (no authorization rule allows metrics.read)",
		"      deny   by no rule: no authorization rule allows metrics.read",
		"1 passed, 1 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code == 0 {
		t.Error("a failing case must exit non-zero")
	}

	code, out, errOut := orchd(t, t.Context(), "policy", "check", policy)
	if code != 0 || !strings.Contains(out, "authorization: 2 policies (ops, default-authorization), 6 rules") {
		t.Errorf("check: exit %d, %q %q", code, out, errOut)
	}
}
