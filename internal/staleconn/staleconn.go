// Package staleconn sends an HTTP request again when the kept-alive
// connection it went out on turned out closed by the server.
//
// A server closes a kept-alive connection once it has been idle for the
// server's timeout (5 s for Python's uvicorn and for Node, 60 s for
// orchd) and drops what arrives on it after, unread. A request a client
// sends on it as that close comes in meets EOF, a reset or a broken pipe
// before any byte of an answer. net/http sends such a request again only
// when it is idempotent (a GET, or one with an Idempotency-Key header);
// Resend sends any request again, as browsers do. A server that read the
// request and then died without answering a byte could take it twice:
// that is the one case it is not safe for.
package staleconn

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"syscall"
)

// Resend returns a transport sending each request through rt, and again
// when the connection it went out on was a kept-alive one that closed
// before a byte of the answer came back. The next send may meet another
// kept connection the server closed too: it goes on so, each failed
// connection dropped, until a send is answered or fails on a new
// connection, at most maxSends times in all. A request whose body cannot
// be read again (no GetBody) is sent once. rt tells of the connection and
// of the answer's first byte through the request's client trace
// (net/http/httptrace), as net/http's transport does.
func Resend(rt http.RoundTripper) http.RoundTripper { return resend{rt: rt} }

// maxSends bounds the sends of one request: a new connection ends them
// sooner, once the kept ones the server closed are used up.
const maxSends = 8

// resend is the transport Resend returns.
type resend struct {
	rt http.RoundTripper
}

func (t resend) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return t.rt.RoundTrip(req)
	}
	next := req
	for sends := 1; ; sends++ {
		var s sent
		resp, err := t.rt.RoundTrip(next.WithContext(httptrace.WithClientTrace(req.Context(), s.trace())))
		if err == nil || !s.reused.Load() || s.answered.Load() || req.Context().Err() != nil || !closedUnderfoot(err) || sends == maxSends {
			return resp, err
		}
		next = req.Clone(req.Context())
		if req.GetBody != nil {
			body, berr := req.GetBody()
			if berr != nil {
				return nil, err
			}
			next.Body = body
		}
	}
}

// CloseIdleConnections closes the idle connections of the transport
// underneath, as http.Client.CloseIdleConnections expects.
func (t resend) CloseIdleConnections() {
	if c, ok := t.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// sent is what the transport told of a request's connection and answer.
type sent struct {
	reused, answered atomic.Bool
}

// trace reports into s.
func (s *sent) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		GotConn:              func(i httptrace.GotConnInfo) { s.reused.Store(i.Reused) },
		GotFirstResponseByte: func() { s.answered.Store(true) },
	}
}

// closedUnderfoot reports whether err is how net/http tells of a
// connection the server had closed: EOF or a reset where the answer
// should have been, a broken pipe while writing the request, or
// net/http's own "server closed idle connection" (the server's close
// came in as the request went out).
func closedUnderfoot(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "server closed idle connection")
}
