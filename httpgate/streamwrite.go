package httpgate

import (
	"mime"
	"net/http"
	"time"
)

// Event streams to clients that stop reading.
//
// An event stream (the API's /events, A2A's streaming answers) stays open
// as long as the work it follows, so the server has no write timeout. A
// client that stops reading without closing its connection would hold its
// stream, and what is queued for it, forever: once the connection's
// buffers are full, the next write waits. Each write of an event stream
// therefore gets a deadline, http.streamWriteTimeout from the moment it is
// made; a write that cannot go out by then fails, the stream ends and the
// connection closes. A slow reader that keeps reading is not cut off: the
// deadline is for one write, not the stream.

// StreamDeadlines sets a write deadline before every write of an answer that
// is an event stream (text/event-stream), and leaves other answers as
// they are.
func StreamDeadlines(next http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(&streamWriter{ResponseWriter: w, rc: http.NewResponseController(w), timeout: timeout}, r)
	})
}

// streamWriter is an answer whose writes get a deadline once it is known
// to be an event stream: at its header.
type streamWriter struct {
	http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	// decided is set at the header; stream says it is an event stream.
	decided, stream bool
}

func (s *streamWriter) WriteHeader(code int) {
	s.decide()
	s.ResponseWriter.WriteHeader(code)
}

func (s *streamWriter) Write(p []byte) (int, error) {
	s.decide()
	s.deadline()
	return s.ResponseWriter.Write(p)
}

// Flush sends what is buffered, within the deadline for an event stream.
func (s *streamWriter) Flush() {
	s.decide()
	s.deadline()
	_ = s.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// decide reads, once, whether the answer is an event stream.
func (s *streamWriter) decide() {
	if s.decided {
		return
	}
	s.decided = true
	s.stream = eventStream(s.Header())
}

// eventStream reports whether an answer's header says it is an event
// stream.
func eventStream(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

// deadline gives an event stream's next write until timeout from now.
func (s *streamWriter) deadline() {
	if s.stream {
		_ = s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	}
}
