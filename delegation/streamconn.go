package delegation

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"slices"
	"sync"
	"sync/atomic"
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
// DialContext, and every other request through base. HTTPS, where an
// agent speaking HTTP/2 carries many streams on one connection, and a
// base with a proxy go through base.
//
// A stream read to its end leaves its connection for the next stream to
// the same address, as base keeps its own: at most base's
// MaxIdleConnsPerHost of them (http.DefaultMaxIdleConnsPerHost when 0),
// each for at most its IdleConnTimeout (90 s when 0). Streams that end at
// once (an agent, or an orchd below, answering a streamed message with a
// Message) would otherwise each dial a connection: 14% of the upper
// orchd's CPU in a chain of two. A kept connection that its peer closed
// meanwhile is found so before it is used, and dropped. A stream closed
// before its end, or whose context ended, closes its connection. A
// request's client trace (net/http/httptrace) is told of its connection,
// kept or new, and of the answer's first byte, as net/http tells it.
func OwnStreamConns(base *http.Transport) http.RoundTripper {
	return &ownStreams{base: base, idle: map[string][]*idleConn{}}
}

// ownStreams is the transport OwnStreamConns returns.
type ownStreams struct {
	base *http.Transport

	mu   sync.Mutex
	idle map[string][]*idleConn // by address, the latest kept last
}

// idleConn is a stream's connection kept for the next stream, with the
// reader its answers were read through, and the timer closing it once it
// has been kept for the idle timeout.
type idleConn struct {
	addr  string
	conn  net.Conn
	br    *bufio.Reader
	timer *time.Timer
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
	addr := hostPort(req)
	trace := httptrace.ContextClientTrace(ctx)
	conn, br := t.take(addr)
	reused := conn != nil
	if conn == nil {
		dial := t.base.DialContext
		if dial == nil {
			dial = (&net.Dialer{}).DialContext
		}
		var err error
		if conn, err = dial(ctx, "tcp", addr); err != nil {
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
		br = bufio.NewReaderSize(conn, ownConnBuffer)
	}
	if d := t.base.ResponseHeaderTimeout; d > 0 {
		// Set before the context's end may interrupt the connection.
		if err := conn.SetReadDeadline(time.Now().Add(d)); err != nil {
			conn.Close()
			if req.Body != nil {
				req.Body.Close()
			}
			return nil, err
		}
	}
	// The context's end unblocks the stream's reads and writes, and leaves
	// the connection to Close: a stream whose answer has ended keeps it
	// for the next even when its context ends first, as it does once the
	// delegation settles.
	g := &connGuard{conn: conn}
	stop := context.AfterFunc(ctx, g.interrupt)
	fail := func(err error) (*http.Response, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	if trace != nil && trace.GotConn != nil {
		trace.GotConn(httptrace.GotConnInfo{Conn: conn, Reused: reused})
	}
	if err := req.Write(conn); err != nil {
		return fail(err)
	}
	if _, err := br.Peek(1); err != nil {
		return fail(err)
	}
	if trace != nil && trace.GotFirstResponseByte != nil {
		trace.GotFirstResponseByte()
	}
	var resp *http.Response
	var err error
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
		if err := g.clearReadDeadline(); err != nil {
			resp.Body.Close()
			return fail(err)
		}
	}
	body := &ownConnBody{ctx: ctx, body: resp.Body, conn: conn, stop: stop, guard: g}
	if !resp.Close && !req.Close && !t.base.DisableKeepAlives {
		body.keep = func() { t.put(&idleConn{addr: addr, conn: conn, br: br}) }
		body.br = br
	}
	resp.Body = body
	return resp, nil
}

// take returns the latest connection kept for addr that can carry a
// request, with its reader, or nil; those its peer closed meanwhile are
// closed.
func (t *ownStreams) take(addr string) (net.Conn, *bufio.Reader) {
	for {
		t.mu.Lock()
		kept := t.idle[addr]
		if len(kept) == 0 {
			t.mu.Unlock()
			return nil, nil
		}
		ic := kept[len(kept)-1]
		t.idle[addr] = kept[:len(kept)-1]
		if len(kept) == 1 {
			delete(t.idle, addr)
		}
		t.mu.Unlock()
		if !ic.timer.Stop() {
			continue // closed by its timer meanwhile
		}
		if unusable(ic.conn) {
			ic.conn.Close()
			continue
		}
		return ic.conn, ic.br
	}
}

// put keeps ic for the next stream to its address, unless as many are
// kept already; its timer closes it after the idle timeout.
func (t *ownStreams) put(ic *idleConn) {
	most := t.base.MaxIdleConnsPerHost
	if most == 0 {
		most = http.DefaultMaxIdleConnsPerHost
	}
	idleFor := t.base.IdleConnTimeout
	if idleFor == 0 {
		idleFor = defaultOwnConnIdle
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if most < 0 || len(t.idle[ic.addr]) >= most {
		ic.conn.Close()
		return
	}
	t.idle[ic.addr] = append(t.idle[ic.addr], ic)
	ic.timer = time.AfterFunc(idleFor, func() { t.drop(ic) })
}

// drop forgets the kept connection ic and closes it.
func (t *ownStreams) drop(ic *idleConn) {
	t.mu.Lock()
	kept := t.idle[ic.addr]
	if i := slices.Index(kept, ic); i >= 0 {
		t.idle[ic.addr] = slices.Delete(kept, i, i+1)
		if len(t.idle[ic.addr]) == 0 {
			delete(t.idle, ic.addr)
		}
	}
	t.mu.Unlock()
	ic.conn.Close()
}

// defaultOwnConnIdle is how long a stream's connection is kept for the
// next when the base transport sets no IdleConnTimeout.
const defaultOwnConnIdle = 90 * time.Second

// CloseIdleConnections closes base's idle connections and the streams'
// connections kept for the next.
func (t *ownStreams) CloseIdleConnections() {
	t.base.CloseIdleConnections()
	t.mu.Lock()
	var kept []*idleConn
	for _, ics := range t.idle {
		kept = append(kept, ics...)
	}
	clear(t.idle)
	t.mu.Unlock()
	for _, ic := range kept {
		if ic.timer.Stop() {
			ic.conn.Close()
		}
	}
}

// hostPort is the address to dial for req: its URL's host, with the
// scheme's port when it names none.
func hostPort(req *http.Request) string {
	port := req.URL.Port()
	if port == "" {
		port = "80"
	}
	return net.JoinHostPort(req.URL.Hostname(), port)
}

// ownConnBody is a stream's body on its own connection: closing it keeps
// the connection for the next stream when the body was read to its end
// and keep is set, and closes it otherwise.
type ownConnBody struct {
	ctx   context.Context
	body  io.ReadCloser
	conn  net.Conn
	stop  func() bool
	guard *connGuard
	once  sync.Once
	// keep, when set, keeps the connection for the next stream; br is the
	// reader the answer was read through, which must hold nothing more.
	keep func()
	br   *bufio.Reader
	// ended is set once a read met the body's end, and reading while a
	// read runs: Close may be called meanwhile.
	ended, reading atomic.Bool
}

// Read reads the body; once the request's context has ended (and closed
// the connection), it fails with the context's error, as net/http's
// bodies do.
func (b *ownConnBody) Read(p []byte) (int, error) {
	b.reading.Store(true)
	defer b.reading.Store(false)
	n, err := b.body.Read(p)
	if errors.Is(err, io.EOF) {
		b.ended.Store(true)
	}
	if err != nil && !errors.Is(err, io.EOF) && b.ctx.Err() != nil {
		err = b.ctx.Err()
	}
	return n, err
}

// Close keeps the connection for the next stream, or closes it. A
// stream's reader often stops at its final event, just before the end
// of the answer that follows it: what is left is read first, waiting at
// most ownConnDrain for it.
func (b *ownConnBody) Close() error {
	b.once.Do(func() {
		b.stop()
		b.guard.release()
		if b.keep != nil && (b.ended.Load() || b.drain()) && b.br.Buffered() == 0 && b.conn.SetDeadline(time.Time{}) == nil {
			b.keep()
			return
		}
		b.conn.Close()
	})
	return nil
}

// connGuard ends a stream's waits on its connection when its context
// ends, until the stream lets the connection go.
type connGuard struct {
	mu                    sync.Mutex
	conn                  net.Conn
	interrupted, released bool
}

// interrupt makes the connection's reads and writes fail at once, unless
// it was released.
func (g *connGuard) interrupt() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.released {
		g.interrupted = true
		_ = g.conn.SetDeadline(time.Unix(1, 0))
	}
}

// clearReadDeadline lifts the wait for the answer's header, unless the
// context's end interrupted the connection meanwhile.
func (g *connGuard) clearReadDeadline() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.interrupted {
		return nil
	}
	return g.conn.SetReadDeadline(time.Time{})
}

// release keeps interrupt from touching the connection from now on: it
// returns once one running now is done.
func (g *connGuard) release() {
	g.mu.Lock()
	g.released = true
	g.mu.Unlock()
}

// Bounds of reading the rest of a stream's answer when it is closed.
const (
	ownConnDrain    = 5 * time.Millisecond
	ownConnDrainMax = 4 << 10
)

// drain reads the rest of the body, unless a read runs now, and reports
// whether it met its end within ownConnDrain and ownConnDrainMax bytes.
func (b *ownConnBody) drain() bool {
	if b.reading.Load() || b.conn.SetReadDeadline(time.Now().Add(ownConnDrain)) != nil {
		return false
	}
	var buf [512]byte
	for read := 0; read <= ownConnDrainMax; {
		n, err := b.body.Read(buf[:])
		read += n
		if errors.Is(err, io.EOF) {
			return b.conn.SetReadDeadline(time.Time{}) == nil
		}
		if err != nil {
			return false
		}
	}
	return false
}
