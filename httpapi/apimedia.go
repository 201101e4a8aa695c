package httpapi

import (
	"log/slog"
	"mime"
	"net/http"

	"github.com/orchd/orchd/httpgate"
)

// jsonRequests refuses, with 415 and the API's error body, an HTTP API
// request that may carry a body other than JSON: a POST, PUT or PATCH, or
// any request with a body, whose Content-Type is not application/json.
// Such a request with neither a body nor a Content-Type passes (a bare
// POST …:cancel), as do reads with no body whatever they name.
//
// It keeps browsers from posting to the API from other sites: a form, or
// a script's "simple" request (text/plain, or a body with no type at
// all), is sent cross-site without asking the daemon first, while a JSON
// post is not sent before a CORS preflight the daemon never grants. It
// runs before the body is read.
func jsonRequests(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ct := r.Header.Get("Content-Type")
		hasBody := r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody
		mayHaveBody := hasBody || r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch
		if !mayHaveBody || ct == "" && !hasBody || isJSONMediaType(ct) {
			next.ServeHTTP(w, r)
			return
		}
		msg := "a request body needs Content-Type: application/json"
		if ct != "" {
			msg = "request Content-Type " + httpgate.QuoteCut(ct) + " is not supported: send application/json"
		}
		log.InfoContext(r.Context(), "request refused", "method", r.Method, "path", r.URL.Path, "error", msg)
		if hasBody {
			w.Header().Set("Connection", "close") // the body is left unread
		}
		httpgate.WriteError(w, &httpgate.Error{Status: http.StatusUnsupportedMediaType, Code: "invalid_argument", Msg: msg})
	})
}

// isJSONMediaType reports whether a Content-Type is application/json,
// with any parameters (charset=utf-8).
func isJSONMediaType(ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "application/json"
}

// writeRefusal answers a body the limits refused with the API's error
// body.
func writeRefusal(w http.ResponseWriter, rf *httpgate.Refusal) {
	httpgate.WriteError(w, &httpgate.Error{Status: rf.Status, Code: rf.Code, Msg: rf.Msg})
}
