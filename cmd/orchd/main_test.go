package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/helperproc"
	"github.com/orchd/orchd/internal/syncbuf"
)

// helpers are the processes this package's tests start from the test
// binary.
var helpers = helperproc.Commands{
	// orchd runs the orchd command line with its arguments, as the orchd
	// binary does (mcp_test.go).
	"orchd": func(args []string) int { return run(args, os.Stdout, os.Stderr) },
}

// TestMain runs a helper process when the test binary was started as
// one, and otherwise the tests, checking that they leave no goroutine
// behind.
func TestMain(m *testing.M) {
	helpers.Main()
	goleak.VerifyTestMain(m)
}

func cardServer(t *testing.T, file string) *httptest.Server {
	t.Helper()
	card, err := os.ReadFile(filepath.Join("..", "..", "capability", "testdata", "cards", file))
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/.well-known/agent-card.json" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"v1"`)
		_, _ = w.Write(card)
	}))
	t.Cleanup(s.Close)
	return s
}

func orchd(t *testing.T, ctx context.Context, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = runContext(ctx, args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// result is what a command did, so that a diff of two says which part
// differs.
type result struct {
	Code           int
	Stdout, Stderr string
}

// missing returns those of wants that s does not contain.
func missing(s string, wants ...string) []string {
	var out []string
	for _, w := range wants {
		if !strings.Contains(s, w) {
			out = append(out, w)
		}
	}
	return out
}

func TestInspect_Text(t *testing.T) {
	t.Parallel()
	s := cardServer(t, "v1-grpc-2.0-only.json")
	code, out, errOut := orchd(t, t.Context(), "agents", "inspect", s.URL, "--log-level", "error")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{
		"name               Telemetry Agent",
		"compatible         no: speaks only 2.0 over GRPC; orchd speaks 0.3, 1.0",
		"tier 1 implicit    cancel_task, get_task, list_tasks, send_message",
		`etag "v1"`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

func TestInspect_JSON(t *testing.T) {
	t.Parallel()
	s := cardServer(t, "v1-steerable-only.json")
	code, out, errOut := orchd(t, t.Context(), "agents", "inspect", "-o", "json", s.URL)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	type profile struct {
		Name     string          `json:"name"`
		Steering map[string]bool `json:"steering"`
		Digest   string          `json:"digest"`
		ETag     string          `json:"etag"`
	}
	var p profile
	if err := json.Unmarshal([]byte(out), &p); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if p.Digest == "" {
		t.Errorf("profile without a digest: %+v", p)
	}
	p.Digest = ""
	want := profile{Name: p.Name, Steering: map[string]bool{"steerable": true, "interruptible": false}, ETag: `"v1"`}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("profile (-want +got):\n%s", diff)
	}
}

func TestInspect_Errors(t *testing.T) {
	t.Parallel()
	bad := cardServer(t, "bad-interface-no-url.json")
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"invalid card", []string{"agents", "inspect", bad.URL}, exitFailure, "supportedInterfaces[1].url: required field is missing or empty"},
		{"unreachable", []string{"agents", "inspect", gone.URL}, exitFailure, "connection refused"},
		{"not a url", []string{"agents", "inspect", "ftp://nowhere"}, exitUsage, "scheme must be http or https"},
		{"no scheme", []string{"agents", "inspect", "127.0.0.1:9001"}, exitUsage, `has no scheme; did you mean "http://127.0.0.1:9001"?`},
		{"bad output", []string{"agents", "inspect", "-o", "yaml", bad.URL}, exitUsage, `--output "yaml": want text or json`},
		{"no args", []string{"agents", "inspect"}, exitUsage, "orchd agents inspect needs 1 argument, URL"},
		{"bad log level", []string{"agents", "inspect", "--log-level", "loud", bad.URL}, exitUsage, "--log-level"},
	}
	for _, tt := range tests {
		code, out, errOut := orchd(t, t.Context(), tt.args...)
		if code != tt.code || out != "" {
			t.Errorf("%s: exit %d, stdout %q; want %d and nothing", tt.name, code, out, tt.code)
		}
		if !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: stderr %q, want %q in it", tt.name, errOut, tt.want)
		}
	}
}

func TestServe_StartsAndStops(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var logs syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- runContext(ctx, []string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json"}, io.Discard, &logs)
	}()
	waitOutput(t, &logs, regexp.MustCompile(`"msg":"orchd serving"`))
	cancel()
	var code int
	select {
	case code = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop after cancel")
	}
	if code != 0 {
		t.Errorf("exit %d, log:\n%s", code, logs.String())
	}
	if !strings.Contains(logs.String(), "development default") {
		t.Errorf("no warning of the development defaults in the log:\n%s", logs.String())
	}
}

func TestServe_BadConfig(t *testing.T) {
	t.Parallel()
	p := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(p, []byte("registry:\n  timeout: never\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, errOut := orchd(t, t.Context(), "serve", "--config", p)
	if code == 0 || !strings.Contains(errOut, "bad.yaml:2:12:") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// TestServe_SIGHUPReloadsPolicies is not parallel: it signals its own
// process, which only the running serve command listens for.
func TestServe_SIGHUPReloadsPolicies(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "p.yaml")
	write(t, policy, "policy: first\ndefault: allow\n")
	config := filepath.Join(dir, "orchd.yaml")
	write(t, config, "listen: 127.0.0.1:0\npolicies:\n  paths: ["+policy+"]\n  reloadInterval: 1h\n")

	ctx, cancel := context.WithCancel(t.Context())
	var logs syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- runContext(ctx, []string{"serve", "--config", config}, io.Discard, &logs) }()
	defer cancel()
	waitOutput(t, &logs, regexp.MustCompile(`orchd serving`))
	write(t, policy, "policy: second\ndefault: allow\n")
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, &logs, regexp.MustCompile(`policies=\[second\]`))
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("serve exited %d:\n%s", code, logs.String())
	}
}
