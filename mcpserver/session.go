package mcpserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/orchd/orchd/httpgate"
)

// Sessions belong to their callers.
//
// An older client's session (2025-11-25 and before) is bound to the
// principal that opened it (carryCaller gives the SDK its identity key as
// TokenInfo.UserID), and the SDK refuses a request for the session with
// anyone else's credentials. It refuses with a bare 403 and the text
// "session user mismatch", which clients show as "Forbidden" and take for
// a broken connection. sessionOwned answers that refusal instead as a
// JSON-RPC error that says what happened: clients show its message, and
// the session's owner carries on.

// sdkSessionMismatch is the text the SDK refuses another caller's session
// with (mcp.StreamableHTTPHandler, go-sdk v1.8.0).
const sdkSessionMismatch = "session user mismatch"

// errOthersSession is the message of the refusal.
const errOthersSession = "this MCP session was opened by another caller: open a session of your own (initialize) with your own credentials"

// sessionOwned answers the SDK's refusal of another caller's session in
// next as a JSON-RPC error naming the reason; every other answer passes
// through as it is.
func sessionOwned(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Session-Id") == "" {
			next.ServeHTTP(w, r)
			return
		}
		sw := &sessionWriter{ResponseWriter: w, r: r}
		next.ServeHTTP(sw, r)
		sw.finish()
	})
}

// sessionWriter holds back a 403 until its body shows whether it is the
// SDK's refusal of another caller's session.
type sessionWriter struct {
	http.ResponseWriter
	r *http.Request
	// held is set while a 403 waits for its body.
	held bool
	// replaced is set once the refusal was answered in its place: what
	// the SDK writes after is dropped.
	replaced bool
}

func (s *sessionWriter) WriteHeader(code int) {
	if code == http.StatusForbidden && !s.held && !s.replaced {
		s.held = true
		return
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *sessionWriter) Write(p []byte) (int, error) {
	switch {
	case s.replaced:
		return len(p), nil
	case s.held && bytes.HasPrefix(p, []byte(sdkSessionMismatch)):
		s.held, s.replaced = false, true
		s.refuse()
		return len(p), nil
	case s.held:
		s.held = false
		s.ResponseWriter.WriteHeader(http.StatusForbidden)
	}
	return s.ResponseWriter.Write(p)
}

// finish sends a 403 still held back: one that had no body.
func (s *sessionWriter) finish() {
	if s.held {
		s.held = false
		s.ResponseWriter.WriteHeader(http.StatusForbidden)
	}
}

// refuse answers the request as a JSON-RPC error (invalid request) with
// the id of the request it refuses, which the SDK has not read: a client
// matches the error to its call by it.
func (s *sessionWriter) refuse() {
	var id any
	if s.r.Body != nil {
		b, _ := io.ReadAll(s.r.Body) // bounded: BodyLimits read it whole before
		id = httpgate.JSONRPCID(b)
	}
	h := s.Header()
	h.Del("X-Content-Type-Options")
	h.Set("Content-Type", "application/json")
	s.ResponseWriter.WriteHeader(http.StatusForbidden)
	_ = json.NewEncoder(s.ResponseWriter).Encode(map[string]any{"jsonrpc": "2.0", "id": id,
		"error": map[string]any{"code": -32600, "message": errOthersSession}})
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (s *sessionWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
