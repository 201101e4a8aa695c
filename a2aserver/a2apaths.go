package a2aserver

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/errordetails"

	"github.com/orchd/orchd/httpgate"
)

// Everything under pathA2A is orchd's A2A surface. A request there that no
// endpoint serves is answered in the error format of the binding its path
// names, never with the HTTP API's error body, so an A2A client that
// mistypes a URL still reads an A2A error (docs/a2a.md, "Paths").
const pathA2A = "/a2a/"

// The JSON-RPC codes and A2A reasons of the errors the path and media
// type checks answer with.
const (
	jsonRPCMethodNotFound = -32601
	jsonRPCContentType    = -32005
	reasonMethodNotFound  = "METHOD_NOT_FOUND"
	reasonContentType     = "CONTENT_TYPE_NOT_SUPPORTED"
)

// binding is one of the two HTTP bindings orchd serves A2A over, in one
// protocol version.
type binding struct {
	jsonRPC bool
	// legacy marks the 0.3 HTTP+JSON interface, whose error bodies carry
	// the fields legacyRESTErrors adds.
	legacy bool
}

// bindingOf names the binding a path under pathA2A belongs to by its
// prefix: /a2a/jsonrpc… and /a2a/v0.3/jsonrpc… are JSON-RPC, everything
// else (/a2a/rest…, /a2a/v0.3/rest…, and paths naming neither) is answered
// as HTTP+JSON, the binding whose errors need no request to be read.
func bindingOf(path string) binding {
	switch {
	case strings.HasPrefix(path, pathJSONRPC), strings.HasPrefix(path, pathJSONRPC03):
		return binding{jsonRPC: true}
	case strings.HasPrefix(path, pathREST03):
		return binding{legacy: true}
	}
	return binding{}
}

// maxUnknownPathBody bounds what is read of the body of a request to an
// unknown JSON-RPC path, to find the request id to answer with.
const maxUnknownPathBody = 64 << 10

// unknownA2APath answers a request under pathA2A that no endpoint serves:
// JSON-RPC paths with a Method Not Found error object (HTTP 404, the id
// of the request when its body names one), others with a google.rpc.Status
// NOT_FOUND body (HTTP 404) whose reason is METHOD_NOT_FOUND, so a2a-go's
// clients read a2a.ErrMethodNotFound from either.
func unknownA2APath(w http.ResponseWriter, r *http.Request) {
	msg := "no A2A endpoint at " + r.URL.Path + "; the agent card at /.well-known/agent-card.json lists orchd's interfaces"
	b := bindingOf(r.URL.Path)
	if b.jsonRPC {
		var id any
		if r.Body != nil {
			body, _ := io.ReadAll(io.LimitReader(r.Body, maxUnknownPathBody))
			id = httpgate.JSONRPCID(body)
		}
		writeJSONRPCError(w, http.StatusNotFound, id, jsonRPCMethodNotFound, reasonMethodNotFound, msg)
		return
	}
	writeRESTError(w, http.StatusNotFound, "NOT_FOUND", reasonMethodNotFound, msg, b.legacy)
}

// jsonRPCMediaType refuses a JSON-RPC POST whose Content-Type names a
// media type other than JSON with ContentTypeNotSupportedError (-32005),
// HTTP 200 as every JSON-RPC error, carrying the request's id when the
// body names one. A request without Content-Type is read as JSON, as
// a2a-go reads it; other methods go on to a2a-go's handler, which refuses
// them with -32600. Answers are labelled application/json unless the
// handler says otherwise (event streams): a2a-go's 0.3 handler writes its
// errors with no Content-Type, which clients then sniff as text/plain.
func jsonRPCMediaType(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		if r.Method != http.MethodPost || acceptedMediaType(ct) {
			w.Header().Set("Content-Type", "application/json")
			next.ServeHTTP(w, r)
			return
		}
		var id any
		if r.Body != nil {
			body, _ := io.ReadAll(io.LimitReader(r.Body, maxUnknownPathBody))
			id = httpgate.JSONRPCID(body)
		}
		writeJSONRPCError(w, http.StatusOK, id, jsonRPCContentType, reasonContentType, mediaTypeMessage(ct))
	})
}

// restMediaType refuses an HTTP+JSON request with a body whose
// Content-Type names a media type other than JSON: HTTP 415 with a
// google.rpc.Status body whose reason is CONTENT_TYPE_NOT_SUPPORTED, which
// a2a-go's clients read as a2a.ErrUnsupportedContentType. Requests without
// a body (GET, DELETE, an empty cancel) or without Content-Type pass.
func restMediaType(legacy bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody || acceptedMediaType(ct) {
			next.ServeHTTP(w, r)
			return
		}
		writeRESTError(w, http.StatusUnsupportedMediaType, "INVALID_ARGUMENT", reasonContentType, mediaTypeMessage(ct), legacy)
	})
}

// acceptedMediaType says whether a request's Content-Type is one orchd's
// A2A endpoints read: none at all, application/json (JSON-RPC, A2A 1.0
// §9.1) or application/a2a+json (HTTP+JSON, A2A 1.0 §11.1), with any
// parameters. A value that does not parse is not accepted.
func acceptedMediaType(ct string) bool {
	if strings.TrimSpace(ct) == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	return mt == "application/json" || mt == "application/a2a+json"
}

// mediaTypeMessage is the refusal's message; the refused value is quoted
// and cut, as it came from the client.
func mediaTypeMessage(ct string) string {
	return "request Content-Type " + httpgate.QuoteCut(ct) + " is not supported: send application/json or application/a2a+json"
}

// restFallback makes the answers of a2a-go's HTTP+JSON handlers to paths
// and methods they do not route A2A errors: their inner ServeMux answers
// those with a plain-text "404 page not found" or "405 method not allowed"
// (http.Error), which no A2A client reads. Those become google.rpc.Status
// bodies with the same status (and the mux's Allow header), reason
// METHOD_NOT_FOUND. Every other answer, a2a-go's own JSON errors and event
// streams included, passes through untouched.
func restFallback(legacy bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&fallbackWriter{ResponseWriter: w, r: r, legacy: legacy}, r)
	})
}

// fallbackWriter replaces a ServeMux's plain-text 404 and 405 answers.
type fallbackWriter struct {
	http.ResponseWriter
	r      *http.Request
	legacy bool
	// replaced is set once the mux's answer was replaced; its body is
	// dropped.
	replaced, wrote bool
}

func (w *fallbackWriter) WriteHeader(code int) {
	if w.wrote {
		return
	}
	w.wrote = true
	if (code == http.StatusNotFound || code == http.StatusMethodNotAllowed) &&
		strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		w.replaced = true
		w.Header().Del("X-Content-Type-Options")
		msg := "no A2A HTTP+JSON method at " + w.r.Method + " " + w.r.URL.Path
		status := "NOT_FOUND"
		if code == http.StatusMethodNotAllowed {
			msg = "method " + w.r.Method + " is not allowed on " + w.r.URL.Path + " (Allow: " + w.Header().Get("Allow") + ")"
			status = "UNIMPLEMENTED"
		}
		writeRESTError(w.ResponseWriter, code, status, reasonMethodNotFound, msg, w.legacy)
		return
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *fallbackWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		return len(b), nil
	}
	return w.ResponseWriter.Write(b)
}

// Flush passes on to the underlying writer, as event streams need.
func (w *fallbackWriter) Flush() {
	if !w.replaced {
		_ = http.NewResponseController(w.ResponseWriter).Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *fallbackWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// a2aErrorInfo is the google.rpc.ErrorInfo detail a2a-go puts in every
// error answer.
func a2aErrorInfo(reason string) *errordetails.Typed {
	return errordetails.NewErrorInfo(reason, a2a.ProtocolDomain, map[string]string{"timestamp": time.Now().UTC().Format(time.RFC3339)})
}

// writeJSONRPCError writes a JSON-RPC error response as a2a-go's handlers
// write them, with status.
func writeJSONRPCError(w http.ResponseWriter, status int, id any, code int, reason, msg string) {
	type rpcError struct {
		Code    int                   `json:"code"`
		Message string                `json:"message"`
		Data    []*errordetails.Typed `json:"data,omitempty"`
	}
	httpgate.WriteJSON(w, status, struct {
		JSONRPC string   `json:"jsonrpc"`
		ID      any      `json:"id"`
		Error   rpcError `json:"error"`
	}{"2.0", id, rpcError{code, msg, []*errordetails.Typed{a2aErrorInfo(reason)}}}, "")
}

// writeRESTError writes a google.rpc.Status error body as a2a-go's
// HTTP+JSON handlers write them; legacy adds the fields every 0.3 client
// reads (resterrors.go).
func writeRESTError(w http.ResponseWriter, status int, grpcStatus, reason, msg string, legacy bool) {
	type statusBody struct {
		Code    int                   `json:"code"`
		Status  string                `json:"status"`
		Message string                `json:"message"`
		Details []*errordetails.Typed `json:"details"`
	}
	body := struct {
		Error statusBody `json:"error"`
	}{statusBody{status, grpcStatus, msg, []*errordetails.Typed{a2aErrorInfo(reason)}}}
	if !legacy {
		httpgate.WriteJSON(w, status, body, "")
		return
	}
	b, err := json.Marshal(body)
	if err != nil {
		httpgate.WriteJSON(w, status, body, "")
		return
	}
	b = withLegacyFields(b)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Forbid answers a request to an A2A endpoint refused before the
// endpoint saw it (httpgate.BrowserGuard) with 403 and A2A's unauthorized
// error, in the error shape of the binding its path names, and reports
// true; false for a path that is not an A2A endpoint's.
func Forbid(w http.ResponseWriter, r *http.Request, msg string) bool {
	if !strings.HasPrefix(r.URL.Path, pathA2A) {
		return false
	}
	if bd := bindingOf(r.URL.Path); bd.jsonRPC {
		writeJSONRPCError(w, http.StatusForbidden, nil, jsonRPCUnauthorized, reasonUnauthorized, msg)
	} else {
		writeRESTError(w, http.StatusForbidden, "PERMISSION_DENIED", reasonUnauthorized, msg, bd.legacy)
	}
	return true
}

// The JSON-RPC code and A2A reason of a refused browser request: A2A's
// unauthorized error.
const (
	jsonRPCUnauthorized = -31403
	reasonUnauthorized  = "UNAUTHORIZED"
)
