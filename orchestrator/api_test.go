package orchestrator

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testcmp"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// agentServer serves one card on 127.0.0.1; status can be switched.
func agentServer(t *testing.T, card string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var status atomic.Int32
	status.Store(http.StatusOK)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != registry.WellKnownPath {
			http.NotFound(w, r)
			return
		}
		if code := int(status.Load()); code != http.StatusOK {
			http.Error(w, "down", code)
			return
		}
		w.Header().Set("Cache-Control", "max-age=300")
		_, _ = io.WriteString(w, card)
	}))
	t.Cleanup(s.Close)
	return s, &status
}

func testCard(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../capability/testdata/cards/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// daemons maps the base URLs startDaemon returned to their daemons.
var daemons sync.Map

// nodeDaemon returns the daemon serving base.
func nodeDaemon(base string) *Daemon {
	d, _ := daemons.Load(base)
	return d.(*Daemon)
}

// startDaemon runs a daemon on an ephemeral port until the test ends.
func startDaemon(t testing.TB, cfg Config) string {
	t.Helper()
	d := runDaemon(t, cfg)
	base := "http://" + d.Addr().String()
	daemons.Store(base, d)
	t.Cleanup(func() { daemons.Delete(base) })
	return base
}

// runDaemon runs a daemon on an ephemeral loopback port until the test
// ends, and returns it once it has bound the port.
func runDaemon(t testing.TB, cfg Config) *Daemon {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	d, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	testwait.Until(t, 10*time.Second, "the daemon binding its port", func() bool { return d.Addr() != nil })
	return d
}

// call sends a request with no credentials and decodes the answer into
// out; it returns the status.
func call(t testing.TB, method, url, body string, out any) int {
	t.Helper()
	code, _ := callAs(t, "", method, url, body, out)
	return code
}

// callAs is call with a bearer token ("" for none); it returns the status
// and the response headers. A body is sent as JSON.
func callAs(t testing.TB, token, method, url, body string, out any) (int, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && len(b) > 0 {
		reflect.ValueOf(out).Elem().SetZero() // fields the answer omits must not keep old values
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, url, err, b)
		}
	}
	return resp.StatusCode, resp.Header
}

// answer is a status and the body decoded from its answer, compared
// together with cmp.Diff (with testcmp.Only to pick the body's fields).
type answer[T any] struct {
	Status int
	Body   T
}

// refusal is what a test checks of an API error answer: the status and
// the error's code.
type refusal struct {
	Status int
	Code   string
}

// refusalOf is the refusal of an answer with status code and body e.
func refusalOf(code int, e httpapi.ErrorBody) refusal { return refusal{code, e.Error.Code} }

// recordIDs lists the records' ids, in order.
func recordIDs(recs []delegation.Record) []string {
	ids := make([]string, len(recs))
	for i, r := range recs {
		ids[i] = r.ID
	}
	return ids
}

func loadDefaults(t testing.TB) Config {
	t.Helper()
	cfg, err := LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestAPI_Agents(t *testing.T) {
	t.Parallel()
	full, _ := agentServer(t, testCard(t, "v1-full.json"))
	old, _ := agentServer(t, testCard(t, "v03-minimal.json"))
	down, downStatus := agentServer(t, testCard(t, "v1-minimal.json"))
	downStatus.Store(http.StatusServiceUnavailable)
	bad, _ := agentServer(t, testCard(t, "bad-streaming-string.json"))
	down2, down2Status := agentServer(t, testCard(t, "v1-minimal.json"))
	down2Status.Store(http.StatusServiceUnavailable)

	cfg := loadDefaults(t)
	cfg.Agents = []registry.Spec{{ID: "research", URL: full.URL}, {URL: down.URL}}
	base := startDaemon(t, cfg)

	var list httpapi.AgentList
	type listed struct{ Agents, Pending int }
	code := call(t, "GET", base+"/v1/agents", "", &list)
	if diff := cmp.Diff(answer[listed]{200, listed{1, 1}}, answer[listed]{code, listed{len(list.Agents), len(list.Pending)}}); diff != "" {
		t.Fatalf("GET /v1/agents (-want +got):\n%s", diff)
	}
	var h httpapi.Health
	code = call(t, "GET", base+"/healthz", "", &h)
	if diff := cmp.Diff(answer[httpapi.Health]{200, httpapi.Health{Status: "degraded", Agents: 1}}, answer[httpapi.Health]{code, h},
		testcmp.Only[httpapi.Health]("Status", "Agents")); diff != "" {
		t.Errorf("healthz (-want +got):\n%s", diff)
	}

	// The profile JSON carries every documented field.
	var raw map[string]any
	if code := call(t, "GET", base+"/v1/agents/research", "", &raw); code != 200 {
		t.Fatalf("GET agent = %d", code)
	}
	for _, k := range []string{"id", "name", "url", "cardVersion", "digest", "protocols", "compatible", "capabilities",
		"extensions", "steering", "skills", "warnings", "fetchedAt", "expiresAt", "etag", "healthy"} {
		if _, ok := raw[k]; !ok && k != "etag" {
			t.Errorf("profile JSON lacks %q", k)
		}
	}

	var ag registry.Agent
	code = call(t, "POST", base+"/v1/agents", `{"url":"`+old.URL+`"}`, &ag)
	type added struct{ ID, CardFormat string }
	if diff := cmp.Diff(answer[added]{201, added{"weather-agent", "0.3"}}, answer[added]{code, added{ag.ID, ag.CardFormat}}); diff != "" {
		t.Errorf("POST /v1/agents (-want +got):\n%s", diff)
	}

	errorCases := []struct {
		name, method, path, body string
		status                   int
		code, msg                string
	}{
		{"unknown agent", "GET", "/v1/agents/nope", "", 404, "not_found", `"nope"`},
		{"duplicate", "POST", "/v1/agents", `{"url":"` + old.URL + `"}`, 409, "conflict", "registered as"},
		{"bad json", "POST", "/v1/agents", `{"url":`, 400, "invalid_argument", "bad JSON body"},
		{"unknown field", "POST", "/v1/agents", `{"uri":"x"}`, 400, "invalid_argument", `unknown field "uri"`},
		{"no url", "POST", "/v1/agents", `{}`, 400, "invalid_argument", `needs "url"`},
		{"huge body", "POST", "/v1/agents", `{"url":"` + strings.Repeat("a", 70000) + `"}`, 413, "invalid_argument", "over"},
		{"bad url", "POST", "/v1/agents", `{"url":"ftp://x"}`, 400, "invalid_argument", "http or https"},
		{"bad id", "POST", "/v1/agents", `{"url":"` + bad.URL + `","id":"a:b"}`, 400, "invalid_argument", `invalid agent id "a:b"`},
		{"bad card", "POST", "/v1/agents", `{"url":"` + bad.URL + `"}`, 422, "invalid_card", "capabilities.streaming: want boolean, got string"},
		{"unreachable", "POST", "/v1/agents", `{"url":"` + down2.URL + `"}`, 502, "card_unreachable", "HTTP 503"},
		{"blocked", "POST", "/v1/agents", `{"url":"http://10.255.255.1"}`, 403, "blocked_address", "10.255.255.1 is in 10.0.0.0/8 (private)"},
		{"bad verb", "POST", "/v1/agents/research:explode", "", 404, "not_found", ":refresh"},
		{"refresh unknown", "POST", "/v1/agents/nope:refresh", "", 404, "not_found", `"nope"`},
		{"delete unknown", "DELETE", "/v1/agents/nope", "", 404, "not_found", `"nope"`},
		{"no endpoint", "GET", "/v2/things", "", 404, "not_found", "no such endpoint"},
	}
	for _, tc := range errorCases {
		var eb httpapi.ErrorBody
		code := call(t, tc.method, base+tc.path, tc.body, &eb)
		if diff := cmp.Diff(refusal{tc.status, tc.code}, refusalOf(code, eb)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
		if !strings.Contains(eb.Error.Message, tc.msg) {
			t.Errorf("%s: message %q, want it to say %q", tc.name, eb.Error.Message, tc.msg)
		}
	}

	if code := call(t, "POST", base+"/v1/agents/research:refresh", "", &ag); code != 200 || ag.ID != "research" {
		t.Errorf("refresh = %d %s", code, ag.ID)
	}
	if code := call(t, "DELETE", base+"/v1/agents/weather-agent", "", nil); code != 204 {
		t.Errorf("DELETE = %d", code)
	}
	if code := call(t, "GET", base+"/v1/agents", "", &list); code != 200 || len(list.Agents) != 1 {
		t.Errorf("after DELETE: %d agents", len(list.Agents))
	}
}

// testLogger logs through t.Log with -v. Otherwise it keeps the last
// keptLogLines lines and logs them only if the test fails, so a failure
// on a busy CI machine shows what the daemon did before it.
func testLogger(t testing.TB) *slog.Logger {
	var w io.Writer = tWriter{t}
	if !testing.Verbose() {
		r := &lineRing{max: keptLogLines}
		t.Cleanup(func() { // runs after the daemon's own cleanup stopped it
			if t.Failed() {
				t.Logf("the daemon's last %d log lines:\n%s", keptLogLines, r.String())
			}
		})
		w = r
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// keptLogLines bounds what testLogger keeps of a daemon's log.
const keptLogLines = 400

// lineRing keeps the last max lines written to it.
type lineRing struct {
	mu    sync.Mutex
	max   int
	lines []string
	next  int // where the next line goes once lines is full
}

func (r *lineRing) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lines) < r.max {
		r.lines = append(r.lines, line)
	} else {
		r.lines[r.next] = line
		r.next = (r.next + 1) % r.max
	}
	return len(p), nil
}

// String returns the lines kept, oldest first.
func (r *lineRing) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(append(slices.Clone(r.lines[r.next:]), r.lines[:r.next]...), "\n")
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
