package httpgate

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestStreamDeadlines_ClientThatStopsReading serves an endless event
// stream to a client that reads its head and then nothing: once the
// connection's buffers are full the stream's next write fails within the
// timeout, and the handler returns. A plain answer's writes get no
// deadline.
func TestStreamDeadlines_ClientThatStopsReading(t *testing.T) {
	t.Parallel()
	const timeout = 200 * time.Millisecond
	ended := make(chan error, 1)
	chunk := strings.Repeat("x", 64<<10)
	srv := httptest.NewServer(StreamDeadlines(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for {
			if _, err := fmt.Fprintf(w, "data: %s\n\n", chunk); err != nil {
				ended <- err
				return
			}
			w.(http.Flusher).Flush()
			if r.Context().Err() != nil {
				ended <- r.Context().Err()
				return
			}
		}
	}), timeout))
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := fmt.Fprintf(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(conn).ReadString('\n'); err != nil || !strings.Contains(line, "200") {
		t.Fatalf("status line %q, %v", line, err)
	}
	// Read nothing more: the server fills the buffers, then its write
	// waits until the deadline.
	select {
	case err := <-ended:
		if !strings.Contains(err.Error(), "timeout") {
			t.Errorf("the stream ended with %v, want a write timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the stream to a client that reads nothing still runs after 30s")
	}

	// A plain answer is not a stream: its writer sets no deadline.
	w := &streamWriter{ResponseWriter: httptest.NewRecorder(), timeout: timeout}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if w.stream {
		t.Error("an application/json answer taken for an event stream")
	}
}
