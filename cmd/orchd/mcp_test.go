package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/internal/orchdtest"
	"github.com/orchd/orchd/internal/syncbuf"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testproxy"
	"github.com/orchd/orchd/mcpserver"
	"github.com/orchd/orchd/orchestrator"
	"github.com/orchd/orchd/registry"
)

// mcpVersions are the protocol versions the tests' hosts ask for: the
// newest, without sessions, and the newest with them.
var mcpVersions = []string{"2026-07-28", "2025-11-25"}

// mcpFleet runs an orchd with an agent that answers, one that asks a
// question first and one that works a while, and returns its base URL.
func mcpFleet(t *testing.T) string {
	t.Helper()
	reply := testagent.Start(t, testagent.Options{Name: "replier", Skill: "reply"}, testagent.Reply("hello from the agent"))
	ask := testagent.Start(t, testagent.Options{Name: "asker", Skill: "ask"}, testagent.Ask())
	work := testagent.Start(t, testagent.Options{Name: "worker", Skill: "work", Streaming: true}, testagent.Work(50*time.Millisecond))
	return orchdtest.Node(t, "mcp-cli-node", nil, registry.Spec{ID: "reply", URL: reply.URL},
		registry.Spec{ID: "ask", URL: ask.URL}, registry.Spec{ID: "work", URL: work.URL})
}

// mcpHost is a host that launched orchd mcp.
type mcpHost struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
}

// mcpCommand returns orchd mcp --server base as a child process, with
// env added to its environment.
func mcpCommand(t *testing.T, base string, env ...string) (*exec.Cmd, *syncbuf.Buffer) {
	t.Helper()
	cmd := helpers.Command(t, "orchd", "mcp", "--server", base)
	cmd.Env = append(cmd.Env, env...)
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	return cmd, &stderr
}

// launch starts orchd mcp --server base as a host does, and connects
// go-sdk's client to it over its stdin and stdout asking for version;
// opts may be nil. The session is closed when the test ends.
func launch(t *testing.T, base, version string, opts *mcp.ClientOptions, env ...string) (*mcp.ClientSession, *mcpHost, error) {
	t.Helper()
	cmd, stderr := mcpCommand(t, base, env...)
	h := &mcpHost{cmd: cmd, stderr: stderr}
	c := mcp.NewClient(&mcp.Implementation{Name: "orchd-test-host", Version: "1.0.0"}, opts)
	// A bridge that did not end when its stdin did would be sent SIGTERM
	// only after a minute.
	cs, err := c.Connect(t.Context(), &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Minute},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		return nil, h, err
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, h, nil
}

// directVersion returns the protocol version go-sdk's client agrees with
// the orchd at base over HTTP when it asks for version.
func directVersion(t *testing.T, base, version string) string {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "orchd-test-client", Version: "1.0.0"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: base + mcpserver.Path, MaxRetries: -1},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	return cs.InitializeResult().ProtocolVersion
}

// callTool calls tool with args through cs and decodes its structured
// content into out.
func callTool(t *testing.T, cs *mcp.ClientSession, params *mcp.CallToolParams, out any) *mcp.CallToolResult {
	t.Helper()
	res, err := cs.CallTool(t.Context(), params)
	if err != nil {
		t.Fatalf("%s: %v", params.Name, err)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s: structured content %s: %v", params.Name, b, err)
	}
	return res
}

// Through orchd mcp a host lists orchd's tools and delegates, speaking
// the version it would speak to the daemon directly, and the bridge ends
// when the host closes its stdin.
func TestMCP_ToolsAndDelegate(t *testing.T) {
	base := mcpFleet(t)
	for _, v := range mcpVersions {
		t.Run(v, func(t *testing.T) {
			cs, h, err := launch(t, base, v, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := cs.InitializeResult().ProtocolVersion, directVersion(t, base, v); got != want {
				t.Errorf("the host agreed %s through orchd mcp, %s directly", got, want)
			}
			tools, err := cs.ListTools(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools.Tools {
				names = append(names, tool.Name)
			}
			if m := missing(strings.Join(names, " "), mcpserver.ToolDelegate, mcpserver.ToolStatus, mcpserver.ToolReply, mcpserver.ToolAgents); m != nil {
				t.Errorf("tools/list lacks %q: %v", m, names)
			}
			var st mcpserver.Status
			res := callTool(t, cs, &mcp.CallToolParams{Name: mcpserver.ToolDelegate, Arguments: map[string]any{"text": "say hello", "skill": "reply"}}, &st)
			if res.IsError || st.State != "completed" || st.Message != "hello from the agent" || st.Delegation == "" {
				t.Fatalf("orchd_delegate: %+v", st)
			}

			start := time.Now()
			if err := cs.Close(); err != nil {
				t.Errorf("orchd mcp ended with %v; stderr:\n%s", err, h.stderr)
			}
			if took := time.Since(start); took > 30*time.Second {
				t.Errorf("orchd mcp took %s to end after its stdin closed", took)
			}
			if h.stderr.String() != "" {
				t.Errorf("stderr: %s", h.stderr)
			}
		})
	}
}

// The daemon's question to the user (an elicitation) reaches the host
// through orchd mcp, and the host's answer reaches the agent; progress
// notifications reach it too.
func TestMCP_ElicitationAndProgress(t *testing.T) {
	base := mcpFleet(t)
	for _, v := range mcpVersions {
		t.Run(v, func(t *testing.T) {
			var mu sync.Mutex
			var asked []string
			var progress []string
			cs, _, err := launch(t, base, v, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					mu.Lock()
					asked = append(asked, req.Params.Message)
					mu.Unlock()
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": "2024"}}, nil
				},
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					mu.Lock()
					progress = append(progress, req.Params.ProgressToken.(string)+": "+req.Params.Message)
					mu.Unlock()
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			var st mcpserver.Status
			callTool(t, cs, &mcp.CallToolParams{Name: mcpserver.ToolDelegate, Arguments: map[string]any{"text": "count", "skill": "ask"}}, &st)
			if st.State != "completed" || st.Message != "answered: 2024" {
				t.Fatalf("the asking agent: %+v", st)
			}
			params := &mcp.CallToolParams{Name: mcpserver.ToolDelegate, Arguments: map[string]any{"text": "work", "skill": "work"}}
			params.SetProgressToken("tok-1")
			callTool(t, cs, params, &st)
			if st.State != "completed" {
				t.Fatalf("the working agent: %+v", st)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(asked) != 1 || !strings.Contains(asked[0], "which year?") {
				t.Errorf("the user was asked %q", asked)
			}
			if len(progress) == 0 || !strings.HasPrefix(progress[0], "tok-1: ") {
				t.Errorf("progress: %q", progress)
			}
		})
	}
}

// orchd mcp sends $ORCHD_TOKEN to a daemon that authenticates its
// callers, and stops, saying why, when the daemon refuses it.
func TestMCP_Token(t *testing.T) {
	reply := testagent.Start(t, testagent.Options{Name: "replier", Skill: "reply"}, testagent.Reply("hello from the agent"))
	cfg, err := orchestrator.LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	const token = "mcp-token-0123456789"
	cfg.Auth.Tokens = []auth.TokenConfig{{Token: token, Principal: "alice"}}
	cfg.Agents = []registry.Spec{{ID: "reply", URL: reply.URL}}
	base := orchdtest.Start(t, cfg)

	t.Run("accepted", func(t *testing.T) {
		cs, h, err := launch(t, base, mcpVersions[1], nil, tokenEnv+"="+token)
		if err != nil {
			t.Fatal(err)
		}
		var st mcpserver.Status
		callTool(t, cs, &mcp.CallToolParams{Name: mcpserver.ToolDelegate, Arguments: map[string]any{"text": "say hello", "skill": "reply"}}, &st)
		if st.State != "completed" || st.Message != "hello from the agent" {
			t.Fatalf("orchd_delegate: %+v", st)
		}
		if err := cs.Close(); err != nil || h.stderr.String() != "" {
			t.Errorf("orchd mcp ended with %v; stderr:\n%s", err, h.stderr)
		}
	})
	for _, tc := range []struct{ name, token string }{{"wrong", "mcp-token-wrong-0123456789"}, {"none", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			_, h, err := launch(t, base, mcpVersions[1], nil, tokenEnv+"="+tc.token)
			if err == nil {
				t.Fatal("the host connected")
			}
			if !strings.Contains(err.Error(), "HTTP 401") {
				t.Errorf("the host was told %q", err)
			}
			if code := h.cmd.ProcessState.ExitCode(); code != exitFailure {
				t.Errorf("exit %d, want %d", code, exitFailure)
			}
			errOut := h.stderr.String()
			if m := missing(errOut, "orchd: orchd at "+base+"/mcp refused the call", "(HTTP 401); set ORCHD_TOKEN"); m != nil {
				t.Errorf("stderr lacks %q:\n%s", m, errOut)
			}
			if tc.token != "" && strings.Contains(errOut, tc.token) {
				t.Errorf("stderr shows the token:\n%s", errOut)
			}
		})
	}
}

// The daemon closes a kept-alive connection once it has been idle for
// its http.idleTimeout; a message the bridge sends on it as it closes is
// sent again on a new connection, and the bridge goes on. Here a proxy
// closes each connection when its second POST arrives, unanswered.
// Without staleconn.Resend the call fails: "reach orchd at …: EOF".
func TestMCP_DaemonClosesAKeptConnection(t *testing.T) {
	base := mcpFleet(t)
	proxy := testproxy.NewClosing(t, strings.TrimPrefix(base, "http://"), 2)
	for _, v := range mcpVersions {
		t.Run(v, func(t *testing.T) {
			closed := proxy.Closed()
			cs, h, err := launch(t, proxy.URL, v, nil)
			if err != nil {
				t.Fatalf("connect through a proxy closing kept connections: %v; stderr:\n%s", err, h.stderr)
			}
			for i := range 3 {
				var st mcpserver.Status
				res := callTool(t, cs, &mcp.CallToolParams{Name: mcpserver.ToolDelegate, Arguments: map[string]any{"text": fmt.Sprint("say hello ", i), "skill": "reply"}}, &st)
				if res.IsError || st.State != "completed" || st.Message != "hello from the agent" {
					t.Fatalf("orchd_delegate %d: %+v", i, st)
				}
			}
			if n := proxy.Closed() - closed; n == 0 {
				t.Error("the proxy closed no connection under a message: the test tests nothing")
			}
			if err := cs.Close(); err != nil {
				t.Errorf("orchd mcp ended with %v; stderr:\n%s", err, h.stderr)
			}
			if h.stderr.String() != "" {
				t.Errorf("stderr: %s", h.stderr)
			}
		})
	}
}

// A daemon that cannot be reached is said so to the host and on stderr,
// and the bridge still ends when the host closes its stdin.
func TestMCP_DaemonUnreachable(t *testing.T) {
	gone := httptest.NewServer(nil)
	gone.Close()
	_, h, err := launch(t, gone.URL, mcpVersions[1], nil)
	if err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("the host was told %v", err)
	}
	if code := h.cmd.ProcessState.ExitCode(); code != exitOK {
		t.Errorf("exit %d after stdin closed; stderr:\n%s", code, h.stderr)
	}
	if m := missing(h.stderr.String(), "reach orchd at "+gone.URL+"/mcp", "connection refused"); m != nil {
		t.Errorf("stderr lacks %q:\n%s", m, h.stderr)
	}
}

// SIGTERM ends orchd mcp with exit 0, its session open.
func TestMCP_SIGTERM(t *testing.T) {
	base := mcpFleet(t)
	cs, h, err := launch(t, base, mcpVersions[1], nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.ListTools(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// How it ended is for the exit code to say, checked below: Wait's
	// error is the connection's.
	ended := make(chan struct{})
	go func() { _ = cs.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("orchd mcp did not end on SIGTERM")
	}
	if err := cs.Close(); err != nil && !errors.Is(err, mcp.ErrConnectionClosed) {
		t.Errorf("orchd mcp ended with %v; stderr:\n%s", err, h.stderr)
	}
	if code := h.cmd.ProcessState.ExitCode(); code != exitOK {
		t.Errorf("exit %d; stderr:\n%s", code, h.stderr)
	}
}

// headerLog records, for each request an MCP server gets, its HTTP method,
// its JSON-RPC method and the headers Streamable HTTP defines.
type headerLog struct {
	mu    sync.Mutex
	lines []string
}

// wrap records the requests to h.
func (l *headerLog) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		var m struct {
			Method string `json:"method"`
		}
		_ = json.Unmarshal(body, &m)
		if m.Method == "" && len(body) > 0 {
			m.Method = "(answer)"
		}
		line := fmt.Sprintf("%s %s version=%q session=%t method=%q name=%q auth=%q", r.Method, m.Method,
			r.Header.Get("Mcp-Protocol-Version"), r.Header.Get("Mcp-Session-Id") != "",
			r.Header.Get("Mcp-Method"), r.Header.Get("Mcp-Name"), r.Header.Get("Authorization"))
		l.mu.Lock()
		l.lines = append(l.lines, line)
		l.mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// take returns the requests recorded but the GETs, and forgets them all.
// (go-sdk's client opens a GET stream for what a server sends outside
// any request; orchd mcp does not.)
func (l *headerLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if !strings.HasPrefix(line, "GET ") {
			out = append(out, line)
		}
	}
	l.lines = nil
	return out
}

// bearer adds a bearer token to the requests it sends.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// echoServer serves at /mcp a go-sdk server with a tool, echo, that
// answers "echo: " and its text, with sessions unless stateless, its
// handler wrapped in wrap.
func echoServer(t *testing.T, stateless bool, wrap func(http.Handler) http.Handler) (*httptest.Server, *mcp.Server) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "echo", Version: "1.0.0"}, nil)
	type in struct {
		Text string `json:"text"`
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(_ context.Context, _ *mcp.CallToolRequest, args in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + args.Text}}}, nil, nil
	})
	mux := http.NewServeMux()
	mux.Handle(mcpserver.Path, wrap(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{Stateless: stateless})))
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs, srv
}

// A server gets from orchd mcp the requests go-sdk's client sends it
// directly, headers and all, and the token on each: with sessions, and
// without them (2026-07-28, served only by a server without sessions).
func TestMCP_RequestsAsAClientSendsThem(t *testing.T) {
	for _, tc := range []struct {
		version   string
		stateless bool
	}{{"2026-07-28", true}, {"2025-11-25", false}} {
		t.Run(tc.version, func(t *testing.T) {
			var log headerLog
			hs, _ := echoServer(t, tc.stateless, log.wrap)

			echo := func(cs *mcp.ClientSession) {
				t.Helper()
				if got := cs.InitializeResult().ProtocolVersion; got != tc.version {
					t.Errorf("agreed %s, want %s", got, tc.version)
				}
				res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Content) != 1 || res.Content[0].(*mcp.TextContent).Text != "echo: hi" {
					t.Errorf("echo: %+v", res.Content)
				}
				if err := cs.Close(); err != nil {
					t.Error(err)
				}
			}
			const token = "echo-token-0123456789"
			c := mcp.NewClient(&mcp.Implementation{Name: "orchd-test-client", Version: "1.0.0"}, nil)
			direct, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: hs.URL + mcpserver.Path,
				HTTPClient: &http.Client{Transport: bearer(token)}, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: tc.version})
			if err != nil {
				t.Fatal(err)
			}
			echo(direct)
			want := log.take()

			bridged, h, err := launch(t, hs.URL, tc.version, nil, tokenEnv+"="+token)
			if err != nil {
				t.Fatal(err)
			}
			echo(bridged)
			if diff := cmp.Diff(want, log.take()); diff != "" {
				t.Errorf("requests (-direct +through orchd mcp):\n%s\nstderr: %s", diff, h.stderr)
			}
		})
	}
}

// A host that writes its messages at once and closes stdin gets every
// answer, and nothing else, on stdout: orchd mcp holds what follows an
// initialize until the session it opens is known, and ends once the calls
// it relayed are answered. A method the daemon does not serve is refused,
// and the bridge goes on.
func TestMCP_ScriptedHost(t *testing.T) {
	base := mcpFleet(t)
	cmd, stderr := mcpCommand(t, base)
	cmd.Stdin = strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"script","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","method":"notifications/nosuch"}
{"jsonrpc":"2.0","id":2,"method":"io.github.orchd/nosuch","params":{}}
{"jsonrpc":"2.0","id":3,"method":"tools/list"}
{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"orchd_delegate","arguments":{"text":"say hello","skill":"reply"}}}
`)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v; stderr:\n%s", err, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	type answer struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      int             `json:"id"`
		Result  json.RawMessage `json:"result"`
		Error   *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	got := map[int]answer{}
	for _, line := range lines {
		var a answer
		if err := json.Unmarshal([]byte(line), &a); err != nil || a.JSONRPC != "2.0" || a.ID == 0 {
			t.Fatalf("stdout line %q is not an answer", line)
		}
		got[a.ID] = a
	}
	if len(lines) != 4 || !strings.Contains(string(got[1].Result), `"protocolVersion":"2025-11-25"`) ||
		!strings.Contains(string(got[3].Result), `"name":"orchd_delegate"`) || !strings.Contains(string(got[4].Result), "hello from the agent") {
		t.Errorf("stdout:\n%s", out)
	}
	if e := got[2].Error; e == nil || e.Code != -32600 || !strings.Contains(e.Message, "orchd refused the message (HTTP 400)") || !strings.Contains(e.Message, "io.github.orchd/nosuch") {
		t.Errorf("the unknown method was answered %s", lines)
	}
	if m := missing(stderr.String(), "orchd refused the message (HTTP 400)", "notifications/nosuch"); m != nil {
		t.Errorf("stderr lacks %q:\n%s", m, stderr)
	}
}

// A session the server no longer has ends orchd mcp, saying so: the host
// has to start it again.
func TestMCP_SessionGone(t *testing.T) {
	hs, srv := echoServer(t, false, func(h http.Handler) http.Handler { return h })
	cs, h, err := launch(t, hs.URL, mcpVersions[1], nil)
	if err != nil {
		t.Fatal(err)
	}
	echo := &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}}
	// Answered once the messages before it, initialized too, were sent.
	if _, err := cs.CallTool(t.Context(), echo); err != nil {
		t.Fatal(err)
	}
	for ss := range srv.Sessions() {
		ss.Close()
	}
	_, err = cs.CallTool(t.Context(), echo)
	if err == nil || !strings.Contains(err.Error(), "no longer has this MCP session") {
		t.Errorf("the call in the session gone: %v; stderr: %s", err, h.stderr)
	}
	// How it ended is for the exit code to say, checked below: Wait's
	// error is the connection's.
	ended := make(chan struct{})
	go func() { _ = cs.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatal("orchd mcp did not end")
	}
	_ = cs.Close()
	if code := h.cmd.ProcessState.ExitCode(); code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	if m := missing(h.stderr.String(), "orchd: orchd at "+hs.URL+"/mcp no longer has this MCP session"); m != nil {
		t.Errorf("stderr lacks %q:\n%s", m, h.stderr)
	}
}
