package httpgate

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// firstByteServer serves 200 on a loopback listener behind AwaitFirstByte
// with the given idle wait, with a header timeout of 100ms, and returns
// its address.
func firstByteServer(t *testing.T, idle time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:           http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ReadHeaderTimeout: 100 * time.Millisecond,
		IdleTimeout:       idle,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(AwaitFirstByte(ln, idle)) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve = %v, want ErrServerClosed", err)
		}
	})
	return ln.Addr().String()
}

// sendAfter dials addr, waits, sends what, and returns the status line of
// the answer or the read's error.
func sendAfter(t *testing.T, addr string, wait time.Duration, what string) (string, error) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(wait)
	if _, err := io.WriteString(c, what); err != nil {
		return "", err
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return bufio.NewReader(c).ReadString('\n')
}

func TestAwaitFirstByte(t *testing.T) {
	t.Parallel()
	const request = "GET / HTTP/1.1\r\nHost: orchd\r\n\r\n"
	addr := firstByteServer(t, 2*time.Second)
	tests := []struct {
		name    string
		wait    time.Duration
		send    string
		wantErr bool
	}{
		// Past the header timeout, within the idle one: net/http alone
		// closes such a connection at the header timeout.
		{name: "first request after a wait", wait: 500 * time.Millisecond, send: request},
		{name: "first request at once", send: request},
		// The header timeout still counts from the first byte.
		{name: "headers that never end", send: "GET / HTTP/1.1\r\nHost: orc", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			line, err := sendAfter(t, addr, tt.wait, tt.send)
			if tt.wantErr {
				if err == nil || time.Since(start) > 5*time.Second {
					t.Errorf("answered %q after %s, want the connection closed at the header timeout", line, time.Since(start))
				}
				return
			}
			if err != nil || line != "HTTP/1.1 200 OK\r\n" {
				t.Errorf("answer %q, %v; want 200", line, err)
			}
		})
	}
}

// TestAwaitFirstByte_SilentClosed checks a connection that sends nothing
// is closed once the idle wait is over, as an idle one would be.
func TestAwaitFirstByte_SilentClosed(t *testing.T) {
	t.Parallel()
	addr := firstByteServer(t, 300*time.Millisecond)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("read = %d, %v; want EOF", n, err)
	}
	if took := time.Since(start); took < 250*time.Millisecond {
		t.Errorf("closed after %s, before the idle wait of 300ms", took)
	}
}

// TestAwaitFirstByte_Close checks Close closes the connections still
// waiting for their first byte (and TestMain that no goroutine is left).
func TestAwaitFirstByte_Close(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := AwaitFirstByte(ln, time.Minute)
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(50 * time.Millisecond) // accepted, waiting
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if n, err := c.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Errorf("read after Close = %d, %v; want EOF", n, err)
	}
	if _, err := l.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close = %v, want net.ErrClosed", err)
	}
}
