package a2aserver

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
)

// legacyRESTErrors makes the error bodies of orchd's 0.3 HTTP+JSON
// interface readable by every 0.3 client. The 0.3 specification fixes no
// REST error body: a2a-go writes google.rpc.Status ({"error": {"code":
// 404, "status": …, "details": [{"reason": "TASK_NOT_FOUND", …}]}}), the
// @a2a-js/sdk 0.3 client reads a JSON-RPC code at the top level and the
// Python a2a-sdk reads the error's name from "type" (docs/interop.md).
// Next to a2a-go's "error", the body gains "code" (the JSON-RPC code),
// "message" and "type" (the A2A error name) for the reason a2a-go gave,
// and is labelled application/json. Streams and successful answers pass
// through untouched.
func legacyRESTErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ew := &errorWriter{ResponseWriter: w}
		next.ServeHTTP(ew, r)
		if ew.buf == nil {
			return
		}
		body := withLegacyFields(ew.buf.Bytes())
		// a2a-go's 0.3 handler labels the body application/problem+json,
		// which a2a-go's own 0.3 client refuses to read (it takes only
		// application/json); the body is not RFC 9457 problem details.
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(ew.status)
		_, _ = w.Write(body)
	})
}

// errorWriter holds back a JSON error answer so its body can be extended.
type errorWriter struct {
	http.ResponseWriter
	status int
	buf    *bytes.Buffer // set while holding an error answer
	wrote  bool
}

func (w *errorWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if code >= 400 && strings.Contains(w.Header().Get("Content-Type"), "json") { // application/json, application/problem+json
		w.status, w.buf = code, new(bytes.Buffer)
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *errorWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.buf != nil {
		return w.buf.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// Flush sends buffered data to the client, as server-sent event streams
// need; a held-back error answer is sent whole at the end.
func (w *errorWriter) Flush() {
	if w.buf == nil {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *errorWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// a2aErrors maps the reasons of A2A errors to their JSON-RPC codes and
// names, as the A2A specification lists them.
var a2aErrors = map[string]struct {
	code int
	name string
}{
	"PARSE_ERROR":                        {-32700, "JSONParseError"},
	"INVALID_REQUEST":                    {-32600, "InvalidRequestError"},
	"METHOD_NOT_FOUND":                   {-32601, "MethodNotFoundError"},
	"INVALID_PARAMS":                     {-32602, "InvalidParamsError"},
	"INTERNAL_ERROR":                     {-32603, "InternalError"},
	"TASK_NOT_FOUND":                     {-32001, "TaskNotFoundError"},
	"TASK_NOT_CANCELABLE":                {-32002, "TaskNotCancelableError"},
	"PUSH_NOTIFICATION_NOT_SUPPORTED":    {-32003, "PushNotificationNotSupportedError"},
	"UNSUPPORTED_OPERATION":              {-32004, "UnsupportedOperationError"},
	"CONTENT_TYPE_NOT_SUPPORTED":         {-32005, "ContentTypeNotSupportedError"},
	"INVALID_AGENT_RESPONSE":             {-32006, "InvalidAgentResponseError"},
	"EXTENDED_AGENT_CARD_NOT_CONFIGURED": {-32007, "AuthenticatedExtendedCardNotConfiguredError"},
	"EXTENSION_SUPPORT_REQUIRED":         {-32008, "ExtensionSupportRequiredError"},
	"VERSION_NOT_SUPPORTED":              {-32009, "VersionNotSupportedError"},
}

// withLegacyFields adds "code", "message" and "type" to a google.rpc.Status
// error body whose reason is an A2A error; other bodies come back as they
// were.
func withLegacyFields(body []byte) []byte {
	var doc map[string]json.RawMessage
	if json.Unmarshal(body, &doc) != nil {
		return body
	}
	var status struct {
		Message string `json:"message"`
		Details []struct {
			Reason string `json:"reason"`
		} `json:"details"`
	}
	if json.Unmarshal(doc["error"], &status) != nil {
		return body
	}
	for _, d := range status.Details {
		e, ok := a2aErrors[d.Reason]
		if !ok {
			continue
		}
		for k, v := range map[string]any{"code": e.code, "message": status.Message, "type": e.name} {
			if _, taken := doc[k]; !taken {
				doc[k], _ = json.Marshal(v)
			}
		}
		out, err := json.Marshal(doc)
		if err != nil {
			return body
		}
		return out
	}
	return body
}
