package interop

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"go.uber.org/goleak"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/syncbuf"
	"github.com/orchd/orchd/internal/testwait"
)

// TestMain fails the package on goroutines left running after its tests:
// every peer process, daemon and stream must be stopped at cleanup.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// requireTool skips the test under -short (it starts the peers'
// processes), and when the tool is missing, unless ORCHD_INTEROP=require
// (set by .ci/run), then fails.
func requireTool(t *testing.T, name string) {
	t.Helper()
	if testing.Short() {
		t.Skip("starts Python and Node peers; run without -short")
	}
	if _, err := exec.LookPath(name); err != nil {
		if os.Getenv("ORCHD_INTEROP") == "require" {
			t.Fatalf("%s is required (ORCHD_INTEROP=require) but not found: %v", name, err)
		}
		t.Skipf("skipping: %s is not installed (set ORCHD_INTEROP=require to fail instead)", name)
	}
}

// installs remembers, per install script, the outcome of its one run in
// this test process.
var installs sync.Map // script path -> *install

// install is one install script's single run.
type install struct {
	once sync.Once
	err  error
}

// setup runs an install script once per test process (sync.Once per
// script), failing the test on error; the scripts are idempotent and fast
// when nothing changed (stamp file with a hash of the lock/requirements).
func setup(t *testing.T, script string) {
	t.Helper()
	abs, err := filepath.Abs(script)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := installs.LoadOrStore(abs, &install{})
	in := v.(*install)
	in.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", abs)
		cmd.Dir = filepath.Dir(abs)
		out, err := cmd.CombinedOutput()
		if err != nil {
			in.err = fmt.Errorf("%s: %v\n%s", script, err, out)
		}
	})
	if in.err != nil {
		t.Fatalf("install failed: %v", in.err)
	}
}

// firstLine is an io.Writer that hands the first line written to it to
// line and discards the rest.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	sent bool
	line chan string
}

func (f *firstLine) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sent {
		return len(p), nil
	}
	f.buf = append(f.buf, p...)
	if i := bytes.IndexByte(f.buf, '\n'); i >= 0 {
		f.sent = true
		f.line <- string(f.buf[:i])
		f.buf = nil
	}
	return len(p), nil
}

// startPeers runs cmd (argv) in dir, reads its one JSON line of URLs
// (timeout 60s), stops it when the test ends (close stdin, then kill after
// 5 s), and streams its stderr into t.Log on failure.
func startPeers(t *testing.T, dir string, argv ...string) map[string]string {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = dir
	stderr := &syncbuf.Buffer{}
	out := &firstLine{line: make(chan string, 1)}
	cmd.Stdout, cmd.Stderr = out, stderr
	cmd.WaitDelay = 2 * time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", argv, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	exited := false
	t.Cleanup(func() {
		if !exited {
			stdin.Close()
			select {
			case <-done: //nolint:errcheck // the peer exits as it is asked to; its output said how it went
			case <-time.After(5 * time.Second):
				_ = cmd.Process.Kill()
				<-done //nolint:errcheck // killed: its exit status is the kill
			}
		}
		if t.Failed() {
			t.Logf("stderr of %v:\n%s", argv, stderr.String())
		}
	})
	var line string
	select {
	case line = <-out.line:
	case err := <-done:
		exited = true
		t.Fatalf("%v exited before listing its agents: %v", argv, err)
	case <-time.After(60 * time.Second):
		t.Fatalf("%v did not list its agents within 60 s", argv)
	}
	var urls map[string]string
	if err := json.Unmarshal([]byte(line), &urls); err != nil {
		t.Fatalf("%v printed %q, want one JSON object of URLs: %v", argv, line, err)
	}
	return urls
}

// postJSON calls orchd's HTTP API with body as JSON (no body when nil),
// decoding a successful answer into out (when not nil); it returns the
// status and, for an error answer, its message.
func postJSON(t *testing.T, url string, body, out any) (int, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(http.MethodPost, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return do(t, req, out)
}

// getJSON calls orchd's HTTP API with GET, decoding a successful answer
// into out; it returns the status and, for an error answer, its message.
func getJSON(t *testing.T, url string, out any) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	return do(t, req, out)
}

// do sends req and decodes a successful answer into out; it returns the
// status and, for an error answer, its message.
func do(t *testing.T, req *http.Request, out any) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	if resp.StatusCode >= 300 {
		var e httpapi.ErrorBody
		if json.Unmarshal(raw, &e) != nil || e.Error.Message == "" {
			return resp.StatusCode, strings.TrimSpace(string(raw))
		}
		return resp.StatusCode, e.Error.Message
	}
	if out != nil && len(raw) > 0 {
		if err := json.Unmarshal(raw, out); err != nil {
			t.Fatalf("%s %s: decode %s: %v", req.Method, req.URL, raw, err)
		}
	}
	return resp.StatusCode, ""
}

// waitDelegation polls GET /v1/delegations/{id} until cond(rec) holds
// (10 s), returning the record.
func waitDelegation(t *testing.T, base, id string, cond func(delegation.Record) bool) delegation.Record {
	t.Helper()
	var rec delegation.Record
	testwait.Succeeds(t, 10*time.Second, "delegation "+id+" reaching the expected condition", func() error {
		rec = delegation.Record{}
		if code, msg := getJSON(t, base+"/v1/delegations/"+id, &rec); code != http.StatusOK {
			t.Fatalf("get delegation %s: %d %s", id, code, msg)
		}
		if !cond(rec) {
			return fmt.Errorf("last state %s, error %q", rec.State, rec.Error)
		}
		return nil
	})
	return rec
}

// events reads the delegation's server-sent events from the start:
// all of them until the stream ends when until is nil, else up to the
// first event until accepts (failing the test if none does within 10 s).
func events(t *testing.T, base, id string, until func(delegation.Event) bool) []delegation.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/delegations/"+id+"/events", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("events of %s: %s", id, resp.Status)
	}
	var evs []delegation.Event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev delegation.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		evs = append(evs, ev)
		if until != nil && until(ev) {
			return evs
		}
	}
	if until != nil {
		t.Fatalf("no awaited event among %d events of %s (%v)", len(evs), id, sc.Err())
	}
	return evs
}

// artifactTexts joins each artifact's text parts.
func artifactTexts(arts []*a2a.Artifact) []string {
	var out []string
	for _, a := range arts {
		var b strings.Builder
		for _, p := range a.Parts {
			if txt, ok := p.Content.(a2a.Text); ok {
				b.WriteString(string(txt))
			}
		}
		out = append(out, b.String())
	}
	return out
}

// checkStreamed checks a delegation to a stream peer: its three chunks
// reach the delegation's events as they come, one event each, the later
// two appended, between WORKING and COMPLETED, and the record ends with
// the whole artifact.
func checkStreamed(t *testing.T, base, id string) {
	t.Helper()
	var arts, states []string
	var appends []bool
	for _, ev := range events(t, base, id, nil) {
		switch ev.Kind {
		case "artifact":
			arts = append(arts, artifactTexts([]*a2a.Artifact{ev.Artifact})...)
			appends = append(appends, ev.Append)
		case "state":
			states = append(states, string(ev.State))
		}
	}
	if want := []string{"part 1", "part 2", "part 3"}; !slices.Equal(arts, want) || !slices.Equal(appends, []bool{false, true, true}) {
		t.Errorf("artifact events %q, appending %v; want %q, the first whole and the others appended", arts, appends, want)
	}
	if !slices.Contains(states, string(a2a.TaskStateWorking)) || states[len(states)-1] != string(a2a.TaskStateCompleted) {
		t.Errorf("state events %q, want WORKING … COMPLETED", states)
	}
	rec := waitDelegation(t, base, id, func(r delegation.Record) bool { return r.State.Terminal() })
	if got := artifactTexts(rec.Artifacts); rec.State != a2a.TaskStateCompleted || !slices.Equal(got, []string{"part 1part 2part 3"}) {
		t.Errorf("ended %s with artifacts %q, want COMPLETED with the merged [part 1part 2part 3]", rec.State, got)
	}
}

// delegate starts a delegation at the orchd at base and returns its record.
func delegate(t *testing.T, base string, body map[string]any) delegation.Record {
	t.Helper()
	var rec delegation.Record
	if code, msg := postJSON(t, base+"/v1/delegations", body, &rec); code != http.StatusCreated {
		t.Fatalf("delegate %v: %d %s", body, code, msg)
	}
	return rec
}

// tryDelegate asks the orchd at base to delegate body and returns the
// status, the record when it accepted, and the decision: the record's, or
// the refusal's details (every candidate with its reasons).
func tryDelegate(t *testing.T, base string, body map[string]any) (int, delegation.Record, *delegation.Decision) {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(base+"/v1/delegations", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		delegation.Record
		Error *struct {
			Code    string              `json:"code"`
			Details delegation.Decision `json:"details"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatalf("delegate %v: %d, undecodable answer: %v", body, resp.StatusCode, err)
	}
	if out.Error != nil {
		return resp.StatusCode, delegation.Record{}, &out.Error.Details
	}
	return resp.StatusCode, out.Record, out.Record.Decision
}

// inState holds once a delegation is in state s.
func inState(s a2a.TaskState) func(delegation.Record) bool {
	return func(r delegation.Record) bool { return r.State == s }
}
