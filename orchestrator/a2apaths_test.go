package orchestrator

import (
	"context"
	"encoding/json"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/httpapi"
)

// replyExecutor answers every message with one agent message.
type replyExecutor struct{}

func (replyExecutor) Execute(context.Context, *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("ok")), nil)
	}
}

func (replyExecutor) Cancel(context.Context, *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) { yield(nil, a2a.ErrTaskNotCancelable) }
}

// directA2A serves a2a-go v2.4.0's own handlers as an a2a-go agent mounts
// them: JSON-RPC at /rpc and /rpc03 (0.3), HTTP+JSON under /rest and
// /rest03 (0.3).
func directA2A(t *testing.T) string {
	t.Helper()
	h := a2asrv.NewHandler(replyExecutor{})
	mux := http.NewServeMux()
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(h))
	mux.Handle("/rpc03", a2av0.NewJSONRPCHandler(h))
	mux.Handle("/rest/", http.StripPrefix("/rest", a2asrv.NewRESTHandler(h)))
	mux.Handle("/rest03/", http.StripPrefix("/rest03", a2av0.NewRESTHandler(h)))
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s.URL
}

// rawAnswer is what a test request got back.
type rawAnswer struct {
	status int
	header http.Header
	body   []byte
}

func sendRaw(t *testing.T, method, url, contentType, body string, header map[string]string) rawAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == "" {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
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
	return rawAnswer{resp.StatusCode, resp.Header, b}
}

// errorOf reads an A2A error from an answer in the given shape: a
// JSON-RPC error object ("jsonrpc"), a google.rpc.Status body ("rest"),
// the same with the 0.3 fields ("rest03"), or the HTTP API's ("api"). It
// returns the JSON-RPC code (jsonrpc, rest03), the ErrorInfo reason and
// the JSON-RPC id, and fails the test if the body is not of that shape
// (strict: labelled application/json).
func errorOf(t *testing.T, shape string, a rawAnswer, strict bool) (code int, reason string, id any) {
	t.Helper()
	if shape == "api" {
		var api httpapi.ErrorBody
		if err := json.Unmarshal(a.body, &api); err != nil {
			t.Fatalf("not an API error (%v): %s", err, a.body)
		}
		if api.Error.Code == "" || api.Error.Message == "" {
			t.Fatalf("an API error without a code or a message: %s", a.body)
		}
		return 0, "", nil
	}
	var doc struct {
		JSONRPC string `json:"jsonrpc"`
		ID      any    `json:"id"`
		Code    int    `json:"code"`
		Type    string `json:"type"`
		Error   struct {
			Code    int    `json:"code"`
			Status  string `json:"status"`
			Message string `json:"message"`
			Data    []struct {
				Reason string `json:"reason"`
			} `json:"data"`
			Details []struct {
				Type   string `json:"@type"`
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	if strict && !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") {
		t.Fatalf("Content-Type %q, body %s", a.header.Get("Content-Type"), a.body)
	}
	if err := json.Unmarshal(a.body, &doc); err != nil {
		t.Fatalf("%s rawAnswer is not JSON: %v: %s", shape, err, a.body)
	}
	switch shape {
	case "jsonrpc":
		if doc.JSONRPC != "2.0" || doc.Error.Code == 0 {
			t.Fatalf("not a JSON-RPC error (version %q, code %d): %s", doc.JSONRPC, doc.Error.Code, a.body)
		}
		if doc.Error.Message == "" || len(doc.Error.Data) == 0 {
			t.Fatalf("a JSON-RPC error without a message or data: %s", a.body)
		}
		return doc.Error.Code, doc.Error.Data[len(doc.Error.Data)-1].Reason, doc.ID
	case "rest", "rest03":
		if doc.Error.Code != a.status || doc.Error.Status == "" {
			t.Fatalf("not a google.rpc.Status body for status %d (code %d, status %q): %s", a.status, doc.Error.Code, doc.Error.Status, a.body)
		}
		if len(doc.Error.Details) == 0 || doc.Error.Details[0].Type != "type.googleapis.com/google.rpc.ErrorInfo" {
			t.Fatalf("a google.rpc.Status body without an ErrorInfo first: %s", a.body)
		}
		if shape == "rest03" && (doc.Type == "" || doc.Code == 0) {
			t.Fatalf("0.3 error body without type and code: %s", a.body)
		}
		if shape == "rest" && doc.Type != "" {
			t.Fatalf("1.0 error body with the 0.3 fields: %s", a.body)
		}
		return doc.Code, doc.Error.Details[0].Reason, nil
	}
	t.Fatalf("unknown shape %q", shape)
	return 0, "", nil
}

func TestA2APaths_AnswerInTheirBindingsFormat(t *testing.T) {
	t.Parallel()
	base := startDaemon(t, loadDefaults(t))
	direct := directA2A(t)
	v1 := map[string]string{"A2A-Version": "1.0"}
	getTask := `{"jsonrpc":"2.0","id":7,"method":"GetTask","params":{"id":"nope"}}`
	getTask03 := `{"jsonrpc":"2.0","id":"seven","method":"tasks/get","params":{"id":"nope"}}`
	for _, tc := range []struct {
		name         string
		method, path string
		contentType  string
		body         string
		header       map[string]string
		status       int
		shape        string
		// code is the JSON-RPC code (jsonrpc, rest03 shapes); reason the
		// ErrorInfo reason.
		code   int
		reason string
		// id is the JSON-RPC id the rawAnswer must carry, as JSON.
		id string
		// directPath is the same request's path on a2a-go's own handlers;
		// sameAsDirect asserts the same status, code and reason there,
		// directStatus only the same status (a2a-go's body is plain text).
		directPath   string
		sameAsDirect bool
		directStatus bool
	}{
		// The JSON-RPC endpoints, with and without the trailing slash.
		{name: "1.0 JSON-RPC", method: "POST", path: "/a2a/jsonrpc", contentType: "application/json", body: getTask, header: v1,
			status: 200, shape: "jsonrpc", code: -32001, reason: "TASK_NOT_FOUND", id: "7", directPath: "/rpc", sameAsDirect: true},
		{name: "1.0 JSON-RPC, trailing slash", method: "POST", path: "/a2a/jsonrpc/", contentType: "application/json", body: getTask, header: v1,
			status: 200, shape: "jsonrpc", code: -32001, reason: "TASK_NOT_FOUND", id: "7", directPath: "/rpc", sameAsDirect: true},
		{name: "1.0 JSON-RPC, unknown method", method: "POST", path: "/a2a/jsonrpc/", contentType: "application/json", header: v1,
			body:   `{"jsonrpc":"2.0","id":8,"method":"tasks/get","params":{"id":"nope"}}`,
			status: 200, shape: "jsonrpc", code: -32601, reason: "METHOD_NOT_FOUND", id: "8", directPath: "/rpc", sameAsDirect: true},
		{name: "1.0 JSON-RPC, GET", method: "GET", path: "/a2a/jsonrpc", header: v1,
			status: 200, shape: "jsonrpc", code: -32600, reason: "INVALID_REQUEST", id: "null", directPath: "/rpc", sameAsDirect: true},
		{name: "1.0 JSON-RPC, GET with trailing slash", method: "GET", path: "/a2a/jsonrpc/", header: v1,
			status: 200, shape: "jsonrpc", code: -32600, reason: "INVALID_REQUEST", id: "null", directPath: "/rpc", sameAsDirect: true},
		{name: "1.0 JSON-RPC, malformed JSON", method: "POST", path: "/a2a/jsonrpc", contentType: "application/json", body: `{"jsonrpc":`, header: v1,
			status: 200, shape: "jsonrpc", code: -32700, reason: "PARSE_ERROR", id: "null", directPath: "/rpc", sameAsDirect: true},
		{name: "1.0 JSON-RPC, JSON with charset", method: "POST", path: "/a2a/jsonrpc", contentType: "application/json; charset=utf-8", body: getTask, header: v1,
			status: 200, shape: "jsonrpc", code: -32001, reason: "TASK_NOT_FOUND", id: "7", directPath: "/rpc", sameAsDirect: true},
		{name: "1.0 JSON-RPC, application/a2a+json", method: "POST", path: "/a2a/jsonrpc", contentType: "application/a2a+json", body: getTask, header: v1,
			status: 200, shape: "jsonrpc", code: -32001, reason: "TASK_NOT_FOUND", id: "7", directPath: "/rpc", sameAsDirect: true},
		{name: "1.0 JSON-RPC, no Content-Type", method: "POST", path: "/a2a/jsonrpc", body: getTask, header: v1,
			status: 200, shape: "jsonrpc", code: -32001, reason: "TASK_NOT_FOUND", id: "7", directPath: "/rpc", sameAsDirect: true},
		// Beyond a2a-go, which reads any body as JSON: a wrong media type.
		{name: "1.0 JSON-RPC, text/plain", method: "POST", path: "/a2a/jsonrpc", contentType: "text/plain", body: getTask, header: v1,
			status: 200, shape: "jsonrpc", code: -32005, reason: "CONTENT_TYPE_NOT_SUPPORTED", id: "7"},
		{name: "1.0 JSON-RPC, form", method: "POST", path: "/a2a/jsonrpc/", contentType: "application/x-www-form-urlencoded", body: "a=b", header: v1,
			status: 200, shape: "jsonrpc", code: -32005, reason: "CONTENT_TYPE_NOT_SUPPORTED", id: "null"},
		{name: "1.0 JSON-RPC, unparsable Content-Type", method: "POST", path: "/a2a/jsonrpc", contentType: "application/json; ===", body: getTask, header: v1,
			status: 200, shape: "jsonrpc", code: -32005, reason: "CONTENT_TYPE_NOT_SUPPORTED", id: "7"},
		// Unknown paths under the JSON-RPC prefixes.
		{name: "1.0 JSON-RPC, subpath", method: "POST", path: "/a2a/jsonrpc/v1/message:send", contentType: "application/json", body: getTask, header: v1,
			status: 404, shape: "jsonrpc", code: -32601, reason: "METHOD_NOT_FOUND", id: "7", directPath: "/rpc/v1/message:send", directStatus: true},
		{name: "1.0 JSON-RPC, longer name", method: "POST", path: "/a2a/jsonrpcx", contentType: "application/json", body: getTask, header: v1,
			status: 404, shape: "jsonrpc", code: -32601, reason: "METHOD_NOT_FOUND", id: "7", directPath: "/rpcx", directStatus: true},
		{name: "0.3 JSON-RPC, trailing slash", method: "POST", path: "/a2a/v0.3/jsonrpc/", contentType: "application/json", body: getTask03,
			status: 200, shape: "jsonrpc", code: -32001, reason: "TASK_NOT_FOUND", id: `"seven"`, directPath: "/rpc03", sameAsDirect: true},
		{name: "0.3 JSON-RPC, GET", method: "GET", path: "/a2a/v0.3/jsonrpc/",
			status: 200, shape: "jsonrpc", code: -32600, reason: "INVALID_REQUEST", id: "null", directPath: "/rpc03", sameAsDirect: true},
		{name: "0.3 JSON-RPC, text/plain", method: "POST", path: "/a2a/v0.3/jsonrpc", contentType: "text/plain; charset=utf-8", body: getTask03,
			status: 200, shape: "jsonrpc", code: -32005, reason: "CONTENT_TYPE_NOT_SUPPORTED", id: `"seven"`},
		{name: "0.3 JSON-RPC, subpath", method: "DELETE", path: "/a2a/v0.3/jsonrpc/x",
			status: 404, shape: "jsonrpc", code: -32601, reason: "METHOD_NOT_FOUND", id: "null"},

		// The 1.0 HTTP+JSON interface.
		{name: "1.0 REST, unknown task", method: "GET", path: "/a2a/rest/tasks/nope", header: v1,
			status: 404, shape: "rest", reason: "TASK_NOT_FOUND", directPath: "/rest/tasks/nope", sameAsDirect: true},
		{name: "1.0 REST, cancel an unknown task as application/a2a+json", method: "POST", path: "/a2a/rest/tasks/nope:cancel", contentType: "application/a2a+json", body: "{}", header: v1,
			status: 404, shape: "rest", reason: "TASK_NOT_FOUND", directPath: "/rest/tasks/nope:cancel", sameAsDirect: true},
		{name: "1.0 REST, unknown path", method: "GET", path: "/a2a/rest/agents", header: v1,
			status: 404, shape: "rest", reason: "METHOD_NOT_FOUND", directPath: "/rest/agents", directStatus: true},
		{name: "1.0 REST, wrong method", method: "GET", path: "/a2a/rest/message:send", header: v1,
			status: 405, shape: "rest", reason: "METHOD_NOT_FOUND", directPath: "/rest/message:send", directStatus: true},
		{name: "1.0 REST, the root", method: "POST", path: "/a2a/rest/", contentType: "application/json", body: "{}", header: v1,
			status: 404, shape: "rest", reason: "METHOD_NOT_FOUND", directPath: "/rest/", directStatus: true},
		{name: "1.0 REST, the interface URL itself", method: "GET", path: "/a2a/rest",
			status: 404, shape: "rest", reason: "METHOD_NOT_FOUND"},
		{name: "1.0 REST, longer name", method: "GET", path: "/a2a/restful/tasks",
			status: 404, shape: "rest", reason: "METHOD_NOT_FOUND"},
		{name: "1.0 REST, text/plain", method: "POST", path: "/a2a/rest/message:send", contentType: "text/plain", body: "hello", header: v1,
			status: 415, shape: "rest", reason: "CONTENT_TYPE_NOT_SUPPORTED"},
		// The 0.3 HTTP+JSON interface.
		{name: "0.3 REST, unknown task", method: "GET", path: "/a2a/v0.3/rest/v1/tasks/nope",
			status: 404, shape: "rest03", code: -32001, reason: "TASK_NOT_FOUND", directPath: "/rest03/v1/tasks/nope", directStatus: true},
		{name: "0.3 REST, unknown path", method: "GET", path: "/a2a/v0.3/rest/v2/tasks",
			status: 404, shape: "rest03", code: -32601, reason: "METHOD_NOT_FOUND", directPath: "/rest03/v2/tasks", directStatus: true},
		{name: "0.3 REST, wrong method", method: "DELETE", path: "/a2a/v0.3/rest/v1/message:send",
			status: 405, shape: "rest03", code: -32601, reason: "METHOD_NOT_FOUND", directPath: "/rest03/v1/message:send", directStatus: true},
		{name: "0.3 REST, the interface URL itself", method: "POST", path: "/a2a/v0.3/rest",
			status: 404, shape: "rest03", code: -32601, reason: "METHOD_NOT_FOUND"},
		{name: "0.3 REST, text/plain", method: "POST", path: "/a2a/v0.3/rest/v1/message:send", contentType: "text/plain", body: "hello",
			status: 415, shape: "rest03", code: -32005, reason: "CONTENT_TYPE_NOT_SUPPORTED"},
		// Elsewhere under /a2a/, and the HTTP API beside it.
		{name: "other A2A path", method: "GET", path: "/a2a/grpc",
			status: 404, shape: "rest", reason: "METHOD_NOT_FOUND"},
		{name: "the API is untouched", method: "GET", path: "/v1/nothing",
			status: 404, shape: "api"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := sendRaw(t, tc.method, base+tc.path, tc.contentType, tc.body, tc.header)
			if a.status != tc.status {
				t.Fatalf("%s %s = %d, want %d: %s", tc.method, tc.path, a.status, tc.status, a.body)
			}
			code, reason, id := errorOf(t, tc.shape, a, true)
			if code != tc.code || reason != tc.reason {
				t.Errorf("code %d reason %q, want %d %q: %s", code, reason, tc.code, tc.reason, a.body)
			}
			if tc.id != "" {
				if b, _ := json.Marshal(id); string(b) != tc.id {
					t.Errorf("id %s, want %s", b, tc.id)
				}
			}
			if tc.status == http.StatusMethodNotAllowed && a.header.Get("Allow") == "" {
				t.Errorf("405 without Allow")
			}
			if tc.directPath == "" {
				return
			}
			d := sendRaw(t, tc.method, direct+tc.directPath, tc.contentType, tc.body, tc.header)
			if d.status != a.status {
				t.Errorf("a2a-go answers %d, orchd %d", d.status, a.status)
			}
			if tc.directStatus && tc.status == http.StatusMethodNotAllowed && d.header.Get("Allow") != a.header.Get("Allow") {
				t.Errorf("Allow: a2a-go %q, orchd %q", d.header.Get("Allow"), a.header.Get("Allow"))
			}
			if !tc.sameAsDirect {
				return
			}
			dcode, dreason, did := errorOf(t, tc.shape, d, false) // a2av0 labels its JSON-RPC errors with no Content-Type
			if dcode != code || dreason != reason {
				t.Errorf("a2a-go answers %d %q, orchd %d %q", dcode, dreason, code, reason)
			}
			if db, _ := json.Marshal(did); tc.id != "" && string(db) != tc.id {
				t.Errorf("a2a-go's id %s, want %s", db, tc.id)
			}
		})
	}
}
