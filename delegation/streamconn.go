package delegation

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Agents' streams on connections of their own.
//
// A delegation to a streaming agent holds the agent's stream open for as
// long as the work lasts: seconds to hours. net/http holds two goroutines
// for each HTTP/1.1 connection, its read and write loops, with their
// stacks, buffers and channels, besides the goroutine that reads the
// stream: measured with 3,000 streams open, orchd held 3.3 goroutines
// and 25 KiB of goroutine stacks per stream. A stream on a connection of
// its own needs neither loop: the goroutine reading the stream writes
// the request and reads the answer itself, with net/http's own request
// writer (http.Request.Write) and response reader (http.ReadResponse).

// OwnStreamConns returns a transport sending each request that opens an
// agent's stream over plain HTTP (streamed JSON-RPC: SendStreamingMessage
// and SubscribeToTask) on a connection of its own, dialed with base's
// DialContext, and every other request through base. The connection is
// closed when the stream's body is closed or its context ends, so it is
// never reused. HTTPS, where an agent speaking HTTP/2 carries many
// streams on one connection, and a base with a proxy go through base.
func OwnStreamConns(base *http.Transport) http.RoundTripper {
	return &ownStreams{base: base}
}

// ownStreams is the transport OwnStreamConns returns.
type ownStreams struct {
	base *http.Transport
}

// ownConnKey marks a request's context: the request opens a stream that
// may go on a connection of its own (withOwnConn).
type ownConnKey struct{}

// withOwnConn marks ctx for the requests that open a stream.
func withOwnConn(ctx context.Context) context.Context {
	return context.WithValue(ctx, ownConnKey{}, true)
}

// ownConnBuffer is the buffer a stream's connection is read through:
// the answer's header lines and the chunks' sizes. The stream's reader
// (sseData) buffers what it reads itself, and a larger read passes this
// buffer by.
const ownConnBuffer = 512

// RoundTrip implements http.RoundTripper.
func (t *ownStreams) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" || t.base.Proxy != nil || req.Context().Value(ownConnKey{}) == nil {
		return t.base.RoundTrip(req)
	}
	ctx := req.Context()
	dial := t.base.DialContext
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "tcp", hostPort(req))
	if err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	fail := func(err error) (*http.Response, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if d := t.base.ResponseHeaderTimeout; d > 0 {
		if err := conn.SetReadDeadline(time.Now().Add(d)); err != nil {
			return fail(err)
		}
	}
	if err := req.Write(conn); err != nil {
		return fail(err)
	}
	br := bufio.NewReaderSize(conn, ownConnBuffer)
	var resp *http.Response
	for {
		if resp, err = http.ReadResponse(br, req); err != nil {
			return fail(err)
		}
		// An informational answer (100 Continue, 103 Early Hints) comes
		// before the real one.
		if resp.StatusCode >= 200 || resp.StatusCode < 100 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	if t.base.ResponseHeaderTimeout > 0 {
		if err := conn.SetReadDeadline(time.Time{}); err != nil {
			resp.Body.Close()
			return fail(err)
		}
	}
	resp.Body = &ownConnBody{ctx: ctx, body: resp.Body, conn: conn, stop: stop}
	return resp, nil
}

// CloseIdleConnections closes base's idle connections; a stream's own
// connection is never idle.
func (t *ownStreams) CloseIdleConnections() { t.base.CloseIdleConnections() }

// hostPort is the address to dial for req: its URL's host, with the
// scheme's port when it names none.
func hostPort(req *http.Request) string {
	port := req.URL.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(req.URL.Hostname(), port)
}

// ownConnBody is a stream's body on its own connection: closing it closes
// the connection.
type ownConnBody struct {
	ctx  context.Context
	body io.ReadCloser
	conn net.Conn
	stop func() bool
	once sync.Once
}

// Read reads the body; once the request's context has ended (and closed
// the connection), it fails with the context's error, as net/http's
// bodies do.
func (b *ownConnBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && b.ctx.Err() != nil {
		err = b.ctx.Err()
	}
	return n, err
}

// Close closes the connection.
func (b *ownConnBody) Close() error {
	b.once.Do(func() {
		b.stop()
		b.conn.Close()
	})
	return nil
}
