package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata")

// config validate on each file under testdata/config: its exit code and
// what it prints are in the golden file beside it (go test -update
// rewrites them).
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("testdata", "config")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) < 3 {
		t.Fatalf("config test files: %v, %v", files, err)
	}
	for _, f := range files {
		code, out, errOut := orchd(t, t.Context(), "config", "validate", f)
		got := fmt.Sprintf("exit %d\n-- stdout --\n%s-- stderr --\n%s", code, out, errOut)
		golden := strings.TrimSuffix(f, ".yaml") + ".golden"
		if *update {
			if err := os.WriteFile(golden, []byte(got), 0o600); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(golden)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Errorf("config validate %s:\n%s\nwant:\n%s", f, got, want)
		}
	}
}

// config validate writes nothing, not even into the state directory the
// file names, and does not take its lock: a running daemon may hold it.
func TestConfigValidate_WritesNothing(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "state")
	config := filepath.Join(t.TempDir(), "orchd.yaml")
	write(t, config, "listen: 127.0.0.1:8080\nstateDir: "+state+"\n")
	code, out, errOut := orchd(t, t.Context(), "config", "validate", config)
	want := "ok: " + config + ": listen 127.0.0.1:8080, store embedded in " + state + ", 0 agents, 0 policies (0 rules), 1 authorization policy, no authentication\n"
	if code != exitOK || out != want {
		t.Errorf("exit %d\n%s%s\nwant %s", code, out, errOut, want)
	}
	if _, err := os.Stat(state); !os.IsNotExist(err) {
		t.Errorf("the state directory was touched: %v", err)
	}
}

// Serving beyond loopback with no authentication is refused as serve
// refuses it, unless --insecure-no-auth says it is meant.
func TestConfigValidate_Exposure(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "orchd.yaml")
	write(t, config, "listen: 0.0.0.0:8080\nstore: memory\nagent:\n  url: http://orchd.example.com:8080\n")
	code, _, errOut := orchd(t, t.Context(), "config", "validate", config)
	if code != exitFailure || !strings.Contains(errOut, "reachable beyond loopback with no authentication configured") {
		t.Errorf("exit %d, %s", code, errOut)
	}
	code, out, errOut := orchd(t, t.Context(), "config", "validate", "--insecure-no-auth", config)
	if code != exitOK || !strings.HasPrefix(out, "ok: ") {
		t.Errorf("--insecure-no-auth: exit %d, %s%s", code, out, errOut)
	}
}
