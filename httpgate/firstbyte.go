package httpgate

import (
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Connections that have not sent their first request yet.
//
// net/http's server gives a new connection ReadHeaderTimeout to send its
// first request and closes it past that, while a connection that has
// served a request waits IdleTimeout for its next one. An HTTP client
// keeps connections it dialed and did not need (two requests raced for
// one, and the other connection came free first) among its idle ones,
// for as long as any: Go's for 90 s. So the server closed such a
// connection after 10 s, and a request the client sent on it at that
// moment failed with EOF; net/http's client sends a request again on a
// new connection only when it is idempotent, so a POST to orchd (a new
// delegation, a steer) failed.
//
// AwaitFirstByte hands the server a connection only once its first byte
// has arrived, waiting up to the idle timeout for it, as net/http itself
// waits for each later request: the server's header timeout then counts
// from the first byte of the first request too. A connection that sends
// nothing within the idle timeout is closed, as an idle one would be.
// Over TLS the byte is the handshake's, which a client sends at once:
// the wait for the first request after it is the server's as before
// (HTTP/2, which clients negotiate over TLS, tells them when it closes).

// AwaitFirstByte returns ln whose Accept returns each connection once
// its first byte has arrived, within idle of its acceptance (no limit
// when idle is not positive); a connection silent that long is closed.
// Close closes ln and the connections still waiting.
func AwaitFirstByte(ln net.Listener, idle time.Duration) net.Listener {
	l := &firstByteListener{Listener: ln, idle: idle, ready: make(chan accepted), done: make(chan struct{}),
		waiting: make(map[net.Conn]struct{})}
	l.wg.Go(l.acceptLoop)
	return l
}

// firstByteListener is AwaitFirstByte's listener: acceptLoop accepts,
// a goroutine per new connection waits for its first byte (await), and
// Accept takes what is ready.
type firstByteListener struct {
	net.Listener
	idle time.Duration
	// ready passes a connection that sent its first byte, or an error of
	// the listener's Accept, to Accept. Unbuffered: an error waits for
	// the server's next Accept, which comes after its back-off.
	ready chan accepted
	// done is closed by Close; wg counts acceptLoop and the waits.
	done      chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup
	mu        sync.Mutex
	waiting   map[net.Conn]struct{} // connections whose first byte has not come; nil once closed
}

// accepted is a connection ready to serve, or an error of Accept.
type accepted struct {
	conn net.Conn
	err  error
}

// Accept returns the next connection whose first byte has arrived.
func (l *firstByteListener) Accept() (net.Conn, error) {
	select {
	case a := <-l.ready:
		return a.conn, a.err
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// Close closes the listener and the connections still waiting for their
// first byte, and returns once its goroutines have ended.
func (l *firstByteListener) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.done)
		err = l.Listener.Close()
		l.mu.Lock()
		for c := range l.waiting {
			_ = c.Close()
		}
		l.waiting = nil
		l.mu.Unlock()
		l.wg.Wait()
	})
	return err
}

// acceptLoop accepts connections until the listener closes, and starts a
// wait for each one's first byte.
func (l *firstByteListener) acceptLoop() {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select { // the server backs off before it asks again
			case l.ready <- accepted{err: err}:
				continue
			case <-l.done:
				return
			}
		}
		l.mu.Lock()
		if l.waiting == nil { // closed meanwhile
			l.mu.Unlock()
			_ = c.Close()
			return
		}
		l.waiting[c] = struct{}{}
		l.mu.Unlock()
		l.wg.Go(func() { l.await(c) })
	}
}

// await reads c's first byte, within idle, and hands c to Accept with the
// byte put back; it closes c when none comes or the listener closes.
func (l *firstByteListener) await(c net.Conn) {
	var b [1]byte
	if l.idle > 0 {
		_ = c.SetReadDeadline(time.Now().Add(l.idle))
	}
	n, _ := c.Read(b[:]) // an error with the byte comes again at the next read
	l.mu.Lock()
	closed := l.waiting == nil
	if !closed {
		delete(l.waiting, c)
	}
	l.mu.Unlock()
	if n == 0 || closed {
		_ = c.Close()
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	fc := &firstByteConn{Conn: c, first: b[0]}
	fc.pending.Store(true)
	select {
	case l.ready <- accepted{conn: fc}:
	case <-l.done:
		_ = c.Close()
	}
}

// firstByteConn is a connection whose first byte was read ahead: its
// first Read returns it.
type firstByteConn struct {
	net.Conn
	first   byte
	pending atomic.Bool
}

func (c *firstByteConn) Read(p []byte) (int, error) {
	if len(p) > 0 && c.pending.Load() && c.pending.CompareAndSwap(true, false) {
		p[0] = c.first
		return 1, nil
	}
	return c.Conn.Read(p)
}

// CloseWrite half-closes a TCP connection, as net/http does before it
// closes one whose request it did not read whole, so the client reads
// the answer rather than a reset.
func (c *firstByteConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
