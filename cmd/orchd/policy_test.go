package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestPolicyTest_Examples runs every example policy against its cases, as
// CI does, so the examples stay true.
func TestPolicyTest_Examples(t *testing.T) {
	t.Parallel()
	dirs, _ := filepath.Glob(filepath.Join("..", "..", "examples", "policies", "*"))
	if len(dirs) < 5 {
		t.Fatalf("want at least five example policies, found %d", len(dirs))
	}
	for _, d := range dirs {
		code, out, errOut := orchd(t, t.Context(), "policy", "test", filepath.Join(d, "policy.yaml"), "--cases", filepath.Join(d, "cases.yaml"))
		if code != 0 || !regexp.MustCompile(`(?m)^[1-9][0-9]* passed, 0 failed$`).MatchString(out) {
			t.Errorf("%s: exit %d\n%s%s", d, code, out, errOut)
		}
	}
}

func TestPolicyTest_ReportsFailures(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	policy := filepath.Join(dir, "p.yaml")
	cases := filepath.Join(dir, "cases.yaml")
	write(t, policy, "policy: p\nrules:\n  - name: streaming\n    allow: agent.supports(\"streaming\")\n")
	write(t, cases, `cases:
  - name: expects the wrong thing
    agents:
      - id: plain
        card: {name: Plain, url: "https://plain.example.com", capabilities: {}}
    want: {plain: allow}
    winner: plain
  - name: expects the right thing
    agents:
      - id: plain
        card: {name: Plain, url: "https://plain.example.com", capabilities: {}}
    want: {plain: deny}
    winner: none
`)
	code, out, _ := orchd(t, t.Context(), "policy", "test", policy, "--cases", cases)
	for _, want := range []string{
		"--- FAIL: " + cases + ": expects the wrong thing",
		`agent "plain": want allow, got deny (policy "p": no rule allows it and the policy denies by default)`,
		`winner: want "plain", got "none"`,
		"--- PASS: " + cases + ": expects the right thing",
		"1 passed, 1 failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if code == 0 {
		t.Error("a failing case must exit non-zero")
	}

	// --cases that holds no case file is a failure, not a pass of none.
	none := t.TempDir()
	code, out, errOut := orchd(t, t.Context(), "policy", "test", policy, "--cases", none)
	want := result{exitFailure, "", "orchd: no case files (*.yaml or *.yml with a top-level cases: key) under " + none + "\n"}
	if diff := cmp.Diff(want, result{code, out, errOut}); diff != "" {
		t.Errorf("no case files (-want +got):\n%s", diff)
	}
}

func TestPolicyCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	write(t, good, "policy: good\ndefault: allow\nrules:\n  - name: r\n    rank: \"1\"\n")
	write(t, bad, "policy: bad\nrules:\n  - name: a\n    allow: agent.healty\n  - name: b\n    deny: nope\n")
	code, out, errOut := orchd(t, t.Context(), "policy", "check", good)
	if code != 0 || !strings.HasPrefix(out, "ok: 1 policy, 1 rule in 1 file") {
		t.Errorf("check good: exit %d, %q %q", code, out, errOut)
	}
	code, _, errOut = orchd(t, t.Context(), "policy", "check", good, bad)
	for _, want := range []string{"2 problems:\n", bad + ":4:17: allow: undefined field 'healty'", bad + ":6:11: deny: undeclared reference to 'nope'"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("check bad: stderr lacks %q:\n%s", want, errOut)
		}
	}
	if code == 0 {
		t.Error("check of a broken policy must exit non-zero")
	}
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A directory is read at any depth, as the daemon reads it, skipping the
// case files beside the policies; reading no policy file is a failure.
func TestPolicyCheck_Directories(t *testing.T) {
	t.Parallel()
	dirs, _ := filepath.Glob(filepath.Join("..", "..", "examples", "policies", "*", "policy.yaml"))
	code, out, errOut := orchd(t, t.Context(), "policy", "check", filepath.Join("..", "..", "examples", "policies"))
	if len(dirs) < 5 {
		t.Fatalf("examples/policies holds %d policy files, want 5 or more", len(dirs))
	}
	if code != exitOK || !regexp.MustCompile(`^ok: [1-9][0-9]* policies, [1-9][0-9]* rules in `+fmt.Sprint(len(dirs))+` files `).MatchString(out) {
		t.Errorf("examples/policies (%d policy files): exit %d\n%s%s", len(dirs), code, out, errOut)
	}

	empty := t.TempDir()
	write(t, filepath.Join(empty, "cases.yaml"), "cases:\n  - name: c\n")
	write(t, filepath.Join(empty, "notes.txt"), "policy: not read\n")
	code, out, errOut = orchd(t, t.Context(), "policy", "check", empty)
	if diff := cmp.Diff(result{exitFailure, "", "orchd: no policy files (*.yaml or *.yml) under " + empty + "\n"}, result{code, out, errOut}); diff != "" {
		t.Errorf("a directory of no policies (-want +got):\n%s", diff)
	}

	one := t.TempDir()
	write(t, filepath.Join(one, "p.yaml"), "policy: p\nrules:\n  - name: a\n    allow: agent.healty\n")
	code, _, errOut = orchd(t, t.Context(), "policy", "check", one)
	if code != exitFailure || !strings.HasPrefix(errOut, "orchd: 1 problem:\n") {
		t.Errorf("one problem: exit %d, stderr %q", code, errOut)
	}
}
