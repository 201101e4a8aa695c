package orchestrator

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
)

// The limits the endpoint tests run under: small, so bodies over them are
// cheap to send.
const (
	testMaxBody    = 16 << 10
	testMaxAPIBody = 8 << 10
	testMaxDepth   = 16
)

// nested returns a JSON object n levels deep.
func nested(n int) string {
	return strings.Repeat(`{"a":`, n-1) + "{}" + strings.Repeat("}", n-1)
}

// refusalShape is how an endpoint answers a refused body.
type refusalShape int

const (
	shapeJSONRPC refusalShape = iota
	shapeREST
	shapeREST03
	shapeAPI
)

// limitedEndpoint is one endpoint that takes a body, with a body builder:
// text pads the message (or URL) and meta is the message metadata's
// "extra" value, JSON.
type limitedEndpoint struct {
	name, path string
	shape      refusalShape
	body       func(text, meta string) string
	// ok is the status of an answer to a body within the limits.
	ok int
}

var limitedEndpoints = []limitedEndpoint{
	{"A2A 1.0 JSON-RPC", pathJSONRPC, shapeJSONRPC, func(text, meta string) string {
		return `{"jsonrpc":"2.0","id":"req-7","method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"` +
			text + `"}],"metadata":{"skill":"echo","extra":` + meta + `}}}}`
	}, 200},
	{"A2A 1.0 HTTP+JSON", pathREST + "/message:send", shapeREST, func(text, meta string) string {
		return `{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"` + text + `"}],"metadata":{"skill":"echo","extra":` + meta + `}}}`
	}, 200},
	{"A2A 0.3 JSON-RPC", pathJSONRPC03, shapeJSONRPC, func(text, meta string) string {
		return `{"jsonrpc":"2.0","id":7,"method":"message/send","params":{"message":{"kind":"message","messageId":"m1","role":"user","parts":[{"kind":"text","text":"` +
			text + `"}],"metadata":{"skill":"echo","extra":` + meta + `}}}}`
	}, 200},
	{"A2A 0.3 HTTP+JSON", pathREST03 + "/v1/message:send", shapeREST03, func(text, meta string) string {
		return `{"message":{"messageId":"m1","role":"ROLE_USER","content":[{"text":"` + text + `"}],"metadata":{"skill":"echo","extra":` + meta + `}}}`
	}, 200},
	{"API delegations", "/v1/delegations", shapeAPI, func(text, meta string) string {
		return `{"text":"` + text + `","skill":"echo","metadata":{"extra":` + meta + `}}`
	}, 201},
	{"API policy evaluate", "/v1/policy:evaluate", shapeAPI, func(text, meta string) string {
		return `{"request":{"skill":"echo` + text + `","metadata":{"extra":` + meta + `}}}`
	}, 200},
	{"API agents", "/v1/agents", shapeAPI, func(text, meta string) string {
		if strings.Count(meta, "{") > testMaxDepth { // a Spec has no free-form field: nest a wrong id
			return `{"url":"http://127.0.0.1:1/` + text + `","id":` + meta + `}`
		}
		return `{"url":"http://127.0.0.1:1/` + text + `"}`
	}, 502},
}

// startLimited runs a daemon with the test limits and an echo agent.
func startLimited(t *testing.T, h HTTPConfig) (base string, echo *testagent.Agent) {
	t.Helper()
	echo = testagent.Start(t, testagent.Options{Name: "Echo", Skill: "echo"}, testagent.Reply("pong"))
	cfg := loadDefaults(t)
	cfg.HTTP = h
	cfg.Agents = []registry.Spec{{ID: "echo", URL: echo.URL}}
	return startDaemon(t, cfg), echo
}

// hideLength makes the client send a body chunked.
type hideLength struct{ io.Reader }

// TestBodyLimits_EveryEndpoint sends each endpoint a body within the
// limits, one whose Content-Length is over the limit, one as long sent
// chunked and one nested too deeply. The over-limit ones are refused in
// the endpoint's own error shape naming the limit, and nothing of them
// reaches the agent.
func TestBodyLimits_EveryEndpoint(t *testing.T) {
	t.Parallel()
	base, echo := startLimited(t, HTTPConfig{MaxBodyBytes: testMaxBody, MaxAPIBodyBytes: testMaxAPIBody, MaxJSONDepth: testMaxDepth})
	for _, ep := range limitedEndpoints {
		limit, setting := testMaxBody, "http.maxBodyBytes"
		if ep.shape == shapeAPI {
			limit, setting = testMaxAPIBody, "http.maxAPIBodyBytes"
		}
		big := ep.body(strings.Repeat("x", limit), "null")
		cases := []struct {
			name    string
			body    io.Reader
			status  int
			setting string
			msg     string
			// id is the JSON-RPC id the refusal carries.
			id any
		}{
			{"within limits", strings.NewReader(ep.body("hello", nested(testMaxDepth-6))), ep.ok, "", "", nil},
			{"Content-Length over", strings.NewReader(big), http.StatusRequestEntityTooLarge, setting,
				fmt.Sprintf("request body of %d bytes is over the limit of %d bytes (%s)", len(big), limit, setting), nil},
			{"chunked over", hideLength{strings.NewReader(big)}, http.StatusRequestEntityTooLarge, setting,
				fmt.Sprintf("request body is over the limit of %d bytes (%s)", limit, setting), jsonRPCIDOf(ep)},
			{"too deep", strings.NewReader(ep.body("hello", nested(200))), http.StatusBadRequest, "http.maxJSONDepth",
				fmt.Sprintf("levels deep, over the limit of %d (http.maxJSONDepth)", testMaxDepth), jsonRPCIDOf(ep)},
		}
		for _, tc := range cases {
			t.Run(ep.name+"/"+tc.name, func(t *testing.T) {
				req, err := http.NewRequestWithContext(t.Context(), "POST", base+ep.path, tc.body)
				if err != nil {
					t.Fatal(err)
				}
				if _, chunked := tc.body.(hideLength); chunked {
					req.ContentLength = -1
				}
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set(a2a.SvcParamVersion, "1.0")
				if strings.Contains(ep.path, "v0.3") {
					req.Header.Set(a2a.SvcParamVersion, "0.3")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil {
					t.Fatal(err)
				}
				checkRefusal(t, ep.shape, resp, b, tc.status, tc.setting, tc.msg, tc.id)
			})
		}
	}
	for _, m := range echo.Messages() {
		if len(testagent.Text(m)) > 100 {
			t.Errorf("the agent received an oversized message of %d bytes", len(testagent.Text(m)))
		}
		if depth := jsonDepth(m.Metadata); depth > testMaxDepth {
			t.Errorf("the agent received metadata %d deep", depth)
		}
	}
	if n := len(echo.Messages()); n != 5 {
		t.Errorf("the agent received %d messages, want the 5 within the limits (four A2A interfaces and the API)", n)
	}
}

// jsonRPCIDOf is the id ep's body carries, as a refusal echoes it.
func jsonRPCIDOf(ep limitedEndpoint) any {
	switch ep.path {
	case pathJSONRPC:
		return "req-7"
	case pathJSONRPC03:
		return float64(7)
	}
	return nil
}

// jsonDepth is how deeply a decoded JSON value's objects and arrays nest.
func jsonDepth(v any) int {
	d := 0
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			d = max(d, jsonDepth(e))
		}
	case []any:
		for _, e := range v {
			d = max(d, jsonDepth(e))
		}
	default:
		return 0
	}
	return d + 1
}

// checkRefusal checks an answer: with setting empty, that it is no
// refusal; otherwise that it is one in shape naming the limit.
func checkRefusal(t *testing.T, shape refusalShape, resp *http.Response, b []byte, status int, setting, msg string, id any) {
	t.Helper()
	if setting == "" {
		if resp.StatusCode != status {
			t.Fatalf("within the limits: %d %s, want %d", resp.StatusCode, b, status)
		}
		if bytes.Contains(b, []byte("limit of")) || (shape == shapeJSONRPC && bytes.Contains(b, []byte(`"error"`))) {
			t.Fatalf("within the limits: refused with %s", b)
		}
		return
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	type errorInfo struct {
		Type     string            `json:"@type"`
		Reason   string            `json:"reason"`
		Domain   string            `json:"domain"`
		Metadata map[string]string `json:"metadata"`
	}
	checkInfo := func(infos []errorInfo) {
		t.Helper()
		want := errorInfo{Type: "type.googleapis.com/google.rpc.ErrorInfo", Reason: "INVALID_REQUEST", Domain: a2a.ProtocolDomain,
			Metadata: map[string]string{"setting": setting}}
		if len(infos) != 1 {
			t.Errorf("error details %+v, want one ErrorInfo", infos)
			return
		}
		got := infos[0]
		got.Metadata = map[string]string{"setting": got.Metadata["setting"]}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("error details (-want +got):\n%s", diff)
		}
	}
	switch shape {
	case shapeJSONRPC:
		var rpc struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   struct {
				Code    int         `json:"code"`
				Message string      `json:"message"`
				Data    []errorInfo `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &rpc); err != nil {
			t.Fatalf("answer %d %s: %v", resp.StatusCode, b, err)
		}
		type answer struct {
			Status, Code int
			JSONRPC      string
		}
		if diff := cmp.Diff(answer{Status: 200, Code: -32600, JSONRPC: "2.0"}, answer{resp.StatusCode, rpc.Error.Code, rpc.JSONRPC}); diff != "" {
			t.Fatalf("answer %s (-want +got):\n%s", b, diff)
		}
		if !strings.Contains(rpc.Error.Message, msg) {
			t.Errorf("error message %q, want it to say %q", rpc.Error.Message, msg)
		}
		var gotID any
		_ = json.Unmarshal(rpc.ID, &gotID)
		if string(rpc.ID) == "" || gotID != id {
			t.Errorf("id %s, want %v", rpc.ID, id)
		}
		checkInfo(rpc.Error.Data)
	case shapeREST, shapeREST03:
		var st struct {
			Code    int    `json:"code"`
			Type    string `json:"type"`
			Message string `json:"message"`
			Error   struct {
				Code    int         `json:"code"`
				Status  string      `json:"status"`
				Message string      `json:"message"`
				Details []errorInfo `json:"details"`
			} `json:"error"`
		}
		if err := json.Unmarshal(b, &st); err != nil {
			t.Fatalf("answer %d %s: %v", resp.StatusCode, b, err)
		}
		type answer struct {
			Status, Code int
			CodeStatus   string
		}
		if diff := cmp.Diff(answer{status, status, "INVALID_ARGUMENT"}, answer{resp.StatusCode, st.Error.Code, st.Error.Status}); diff != "" {
			t.Fatalf("answer %s, want a google.rpc.Status (-want +got):\n%s", b, diff)
		}
		if !strings.Contains(st.Error.Message, msg) {
			t.Errorf("error message %q, want it to say %q", st.Error.Message, msg)
		}
		checkInfo(st.Error.Details)
		if shape == shapeREST03 {
			type rpcFields struct {
				Code          int
				Type, Message string
			}
			if diff := cmp.Diff(rpcFields{-32600, "InvalidRequestError", st.Error.Message}, rpcFields{st.Code, st.Type, st.Message}); diff != "" {
				t.Errorf("0.3 answer's JSON-RPC code, type and message (-want +got):\n%s", diff)
			}
		}
	case shapeAPI:
		var eb httpapi.ErrorBody
		if err := json.Unmarshal(b, &eb); err != nil {
			t.Fatalf("answer %d %s: %v", resp.StatusCode, b, err)
		}
		if diff := cmp.Diff(refusal{status, "invalid_argument"}, refusalOf(resp.StatusCode, eb)); diff != "" {
			t.Fatalf("answer %s (-want +got):\n%s", b, diff)
		}
		if !strings.Contains(eb.Error.Message, msg) {
			t.Errorf("error message %q, want it to say %q", eb.Error.Message, msg)
		}
	}
}

// TestBodyLimits_A2AClientsReadTheRefusal sends over-deep and oversized
// messages with a2a-go's clients over each A2A interface: each reads the
// refusal as an Invalid Request error naming the limit.
func TestBodyLimits_A2AClientsReadTheRefusal(t *testing.T) {
	t.Parallel()
	base, echo := startLimited(t, HTTPConfig{MaxBodyBytes: testMaxBody, MaxJSONDepth: testMaxDepth})
	full, err := (&agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}).Resolve(t.Context(), base, askDual())
	if err != nil {
		t.Fatal(err)
	}
	var deep any = map[string]any{}
	for range 100 {
		deep = map[string]any{"a": deep}
	}
	for _, it := range full.SupportedInterfaces {
		t.Run(string(it.ProtocolBinding)+" "+string(it.ProtocolVersion), func(t *testing.T) {
			card := *full
			card.SupportedInterfaces = []*a2a.AgentInterface{it}
			c, err := a2aclient.NewFromCard(t.Context(), &card,
				a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{}), a2av0.WithRESTTransport(a2av0.RESTTransportConfig{}))
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name    string
				msg     *a2a.Message
				setting string
			}{
				{"oversized", a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(strings.Repeat("x", testMaxBody))), "http.maxBodyBytes"},
				{"too deep", a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi")), "http.maxJSONDepth"},
			} {
				tc.msg.Metadata = map[string]any{a2aserver.SkillMetadataKey: "echo"}
				if tc.name == "too deep" {
					tc.msg.Metadata["extra"] = deep
				}
				_, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: tc.msg})
				if !errors.Is(err, a2a.ErrInvalidRequest) || !strings.Contains(err.Error(), tc.setting) {
					t.Errorf("%s: %v, want ErrInvalidRequest naming %s", tc.name, err, tc.setting)
				}
			}
		})
	}
	if n := len(echo.Messages()); n != 0 {
		t.Errorf("the agent received %d messages", n)
	}
}

// TestBodyLimits_SlowBodiesTimeOut trickles bodies into every kind of
// endpoint, a byte at a time: each connection is answered and closed once
// the read timeout has passed, however much of its body is still to come.
func TestBodyLimits_SlowBodiesTimeOut(t *testing.T) {
	t.Parallel()
	const readTimeout = 500 * time.Millisecond
	base, _ := startLimited(t, HTTPConfig{ReadTimeout: Duration(readTimeout)})
	addr := strings.TrimPrefix(base, "http://")
	paths := []string{pathJSONRPC, pathREST + "/message:send", pathJSONRPC03, pathREST03 + "/v1/message:send", "/v1/delegations", "/metrics"}
	const perPath = 5
	var wg sync.WaitGroup
	for _, path := range paths {
		for range perPath {
			wg.Go(func() {
				start := time.Now() // before the server can start its clock
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					t.Error(err)
					return
				}
				defer conn.Close()
				if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", path); err != nil {
					t.Error(err)
					return
				}
				// Trickle the body until the server hangs up, for at most 10s.
				stop := make(chan struct{})
				defer close(stop)
				go func() {
					tick := time.NewTicker(50 * time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-stop:
							return
						case <-tick.C:
							if _, err := conn.Write([]byte(" ")); err != nil {
								return
							}
						}
					}
				}()
				_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
				resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
				if err != nil {
					t.Errorf("%s: no answer: %v", path, err)
					return
				}
				b, err := io.ReadAll(resp.Body) // to the connection's end
				resp.Body.Close()
				took := time.Since(start)
				if err != nil {
					t.Errorf("%s: reading to the connection's end: %v", path, err)
				}
				if took < readTimeout || took > readTimeout+3*time.Second {
					t.Errorf("%s: closed after %v, want just after %v", path, took, readTimeout)
				}
				if resp.StatusCode != http.StatusRequestTimeout && !(strings.Contains(path, "jsonrpc") && resp.StatusCode == http.StatusOK) {
					t.Errorf("%s: status %d", path, resp.StatusCode)
				}
				// Like the other refusals, an A2A one names the limit in its
				// ErrorInfo; the API's says timeout.
				want := `"metadata":{"limit":"500ms","setting":"http.readTimeout"`
				if strings.HasPrefix(path, "/v1/") || path == "/metrics" {
					want = `"code": "timeout"`
				}
				if !bytes.Contains(b, []byte(want)) || !bytes.Contains(b, []byte("(http.readTimeout)")) {
					t.Errorf("%s: answer %s, want it to contain %s", path, b, want)
				}
			})
		}
	}
	wg.Wait()
}

// TestBodyLimits_StreamsOutliveTheReadTimeout streams answers for longer
// than the read timeout, an A2A SendStreamingMessage and the API's
// delegation events: both stream to their end.
func TestBodyLimits_StreamsOutliveTheReadTimeout(t *testing.T) {
	if testing.Short() {
		t.Skip("takes ~2 s: streams for several read timeouts, twice")
	}
	t.Parallel()
	const readTimeout = 200 * time.Millisecond
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Work(4*readTimeout))
	cfg := loadDefaults(t)
	cfg.HTTP = HTTPConfig{ReadTimeout: Duration(readTimeout), IdleTimeout: Duration(readTimeout)}
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)

	c := a2aClient(t, base)
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey"))
	msg.Metadata = map[string]any{a2aserver.SkillMetadataKey: "research"}
	start := time.Now()
	var last a2a.Event
	for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			t.Fatalf("stream after %v: %v", time.Since(start), err)
		}
		last = ev
	}
	if took := time.Since(start); took < 2*readTimeout {
		t.Errorf("A2A stream ended after %v, want after more than %v", took, 2*readTimeout)
	}
	if st, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || st.Status.State != a2a.TaskStateCompleted {
		t.Errorf("A2A stream ended with %T %+v, want COMPLETED", last, last)
	}

	// On a connection of its own: the server closes idle ones after
	// readTimeout, and a POST sent on one it is closing is not retried.
	fresh := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := fresh.Post(base+"/v1/delegations", "application/json", strings.NewReader(`{"text": "survey", "skill": "research"}`))
	if err != nil {
		t.Fatal(err)
	}
	var rec delegation.Record
	err = json.NewDecoder(resp.Body).Decode(&rec)
	resp.Body.Close()
	if resp.StatusCode != 201 || err != nil {
		t.Fatalf("POST /v1/delegations = %d, %v", resp.StatusCode, err)
	}
	start = time.Now()
	evs := readEvents(t, base+"/v1/delegations/"+rec.ID+"/events", "")
	if took := time.Since(start); took < 2*readTimeout {
		t.Errorf("event stream ended after %v, want after more than %v", took, 2*readTimeout)
	}
	if len(evs) == 0 || evs[len(evs)-1].State != a2a.TaskStateCompleted {
		t.Errorf("event stream ended with %s, want COMPLETED last", kinds(evs))
	}
}

func TestHTTPConfig_Defaults(t *testing.T) {
	t.Parallel()
	want := HTTPConfig{MaxBodyBytes: 8 << 20, MaxAPIBodyBytes: 64 << 10, MaxJSONDepth: 64, MaxBufferedBodyBytes: 32 << 20,
		ReadTimeout: Duration(30 * time.Second), IdleTimeout: Duration(time.Minute), StreamWriteTimeout: Duration(30 * time.Second)}
	got := loadDefaults(t).HTTP
	if len(got.AllowedHosts) != 0 {
		t.Errorf("defaults.yaml http.allowedHosts = %q, want none", got.AllowedHosts)
	}
	if got.AllowedHosts = nil; !reflect.DeepEqual(got, want) { // [] in the file
		t.Errorf("defaults.yaml http = %+v, want %+v", got, want)
	}
	if got := (HTTPConfig{}).withDefaults(); !reflect.DeepEqual(got, want) {
		t.Errorf("zero http section = %+v, want the defaults %+v", got, want)
	}
	srv := HTTPConfig{ReadTimeout: Duration(time.Second)}.server(nil, slog.New(slog.DiscardHandler))
	type timeouts struct{ Read, Header, Idle, Write time.Duration }
	if diff := cmp.Diff(timeouts{time.Second, time.Second, time.Minute, 0}, timeouts{srv.ReadTimeout, srv.ReadHeaderTimeout, srv.IdleTimeout, srv.WriteTimeout}); diff != "" {
		t.Errorf("server timeouts (-want +got):\n%s", diff)
	}
	for _, body := range []string{"http:\n  maxBodyBytes: -1\n", "http:\n  maxAPIBodyBytes: -5\n", "http:\n  maxJSONDepth: -1\n", "http:\n  readTimeout: -1s\n",
		"http:\n  maxBufferedBodyBytes: -1\n", "http:\n  maxBufferedBodyBytes: 8388608\n", "http:\n  maxBodyBytes: 1024\n  maxBufferedBodyBytes: 1000\n"} {
		if _, err := LoadConfig(writeConfig(t, body)); err == nil || !strings.Contains(err.Error(), "http") && !strings.Contains(err.Error(), "duration") {
			t.Errorf("%q: err = %v", body, err)
		}
	}
	if _, err := LoadConfig(writeConfig(t, "http:\n  maxBodyBytes: 1024\n  maxJSONDepth: 8\n  maxBufferedBodyBytes: 1048576\n")); err != nil {
		t.Errorf("valid http section: %v", err)
	}
}

// stalled is a body that sends its head and then nothing more until the
// test ends: whatever waits for the rest of it waits that long.
func stalled(t *testing.T, head string) io.Reader {
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(head))
	}()
	t.Cleanup(func() {
		pw.Close()
		pr.Close()
	})
	return pr
}

// TestBodyLimits_RefusedCallersBodiesAreNotRead sends every A2A endpoint of
// a daemon with authentication requests without credentials whose bodies
// stall after their first bytes: declared larger than any ordinary
// request, or sent chunked past that size. Each is answered with the
// gate's refusal at once, without waiting for the rest. A small body
// without credentials is read and refused as a2a-go refuses it, with the
// request's own id.
func TestBodyLimits_RefusedCallersBodiesAreNotRead(t *testing.T) {
	t.Parallel()
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.HTTP.ReadTimeout = Duration(3 * time.Second) // what reading a stalled body would end in
	base := startDaemon(t, cfg)
	hc := &http.Client{Timeout: 10 * time.Second}
	for _, ep := range limitedEndpoints[:4] {
		body := ep.body(strings.Repeat("x", 4<<20), "{}")
		for _, tc := range []struct {
			name     string
			body     io.Reader
			declared int64
		}{
			{"declared", stalled(t, body[:1024]), int64(len(body))},
			{"chunked", stalled(t, body[:httpgate.MaxRefusedBodyBytes+1024]), -1},
		} {
			req, err := http.NewRequestWithContext(t.Context(), "POST", base+ep.path, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			req.ContentLength = tc.declared
			req.Header.Set("Content-Type", "application/json")
			began := time.Now()
			resp, err := hc.Do(req)
			if err != nil {
				t.Errorf("%s, %s: %v (after %v), want the refusal before the body ends", ep.name, tc.name, err, time.Since(began))
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(b), "authentication required") || !resp.Close {
				t.Errorf("%s, %s: %d %s %s", ep.name, tc.name, resp.StatusCode, resp.Header, b)
			}
		}
	}
	code, _ := callAs(t, "", "POST", base+pathJSONRPC, limitedEndpoints[0].body("hi", "{}"), nil)
	var rpc struct {
		ID    any `json:"id"`
		Error struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	resp, err := hc.Post(base+pathJSONRPC, "application/json", strings.NewReader(limitedEndpoints[0].body("hi", "{}")))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&rpc); err != nil {
		t.Fatalf("a small body without credentials: %v", err)
	}
	type answer struct {
		Status, Code int
		ID           any
	}
	if diff := cmp.Diff(answer{200, -31401, "req-7"}, answer{code, rpc.Error.Code, rpc.ID}); diff != "" {
		t.Errorf("a small body without credentials (-want +got):\n%s", diff)
	}
}

// TestBodyLimits_A2AClientsReadTheUnreadRefusal sends, with a2a-go's
// clients and no credentials, a message too large to be read from a
// refused caller, over each A2A interface, sent and streamed: each reads
// A2A's unauthenticated error.
func TestBodyLimits_A2AClientsReadTheUnreadRefusal(t *testing.T) {
	t.Parallel()
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	base := startDaemon(t, cfg)
	full, err := (&agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}).Resolve(t.Context(), base, askDual())
	if err != nil {
		t.Fatal(err)
	}
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(strings.Repeat("x", 4*httpgate.MaxRefusedBodyBytes)))
	for _, it := range full.SupportedInterfaces {
		t.Run(string(it.ProtocolBinding)+" "+string(it.ProtocolVersion), func(t *testing.T) {
			card := *full
			card.SupportedInterfaces = []*a2a.AgentInterface{it}
			c, err := a2aclient.NewFromCard(t.Context(), &card,
				a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{}), a2av0.WithRESTTransport(a2av0.RESTTransportConfig{}))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}); !errors.Is(err, a2a.ErrUnauthenticated) {
				t.Errorf("SendMessage: %v, want unauthenticated", err)
			}
			var streamErr error
			for _, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}) {
				if err != nil {
					streamErr = err
					break
				}
			}
			if !errors.Is(streamErr, a2a.ErrUnauthenticated) {
				t.Errorf("SendStreamingMessage: %v, want unauthenticated", streamErr)
			}
		})
	}
}
