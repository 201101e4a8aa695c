package delegation

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchd/orchd/internal/testwait"
)

// connCounter counts the connections a test server accepted and closed.
type connCounter struct {
	mu             sync.Mutex
	opened, closed int
}

func (c *connCounter) state(_ net.Conn, s http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch s {
	case http.StateNew:
		c.opened++
	case http.StateClosed, http.StateHijacked:
		c.closed++
	}
}

func (c *connCounter) counts() (opened, closed int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.opened, c.closed
}

// sseServer streams "data: one", then waits for release (or the client
// to go) before "data: two" and the end, counting its connections. Each
// of configure changes the server before it starts.
func sseServer(t *testing.T, release <-chan struct{}, tls bool, configure ...func(*http.Server)) (*httptest.Server, *connCounter) {
	t.Helper()
	cc := &connCounter{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Accept") != "text/event-stream" {
			_, _ = io.WriteString(w, "plain")
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusEarlyHints) // informational, before the answer
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "data: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, "data: two\n\n")
	})
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = cc.state
	for _, c := range configure {
		c(srv.Config)
	}
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, cc
}

// streamRequest is a request opening a stream, marked as jsonrpcStreams
// marks its own.
func streamRequest(t *testing.T, ctx context.Context, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(withOwnConn(ctx), http.MethodPost, url, strings.NewReader(`{"jsonrpc":"2.0"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	return req
}

// readStream reads a stream opened through hc to its end and closes it,
// returning what it read.
func readStream(t *testing.T, hc *http.Client, url string) string {
	t.Helper()
	resp, err := hc.Do(streamRequest(t, t.Context(), url))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestOwnStreamConns_StreamOnItsOwnConnection reads a stream on a
// connection of its own, to its end, through the informational answer
// before it; the connection is kept for the next stream, which does not
// dial, until the idle connections are closed.
func TestOwnStreamConns_StreamOnItsOwnConnection(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv, cc := sseServer(t, release, false)
	base := &http.Transport{}
	own := OwnStreamConns(base)
	hc := &http.Client{Transport: own}
	resp, err := hc.Do(streamRequest(t, t.Context(), srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	br := bufio.NewReader(resp.Body)
	if line, err := br.ReadString('\n'); err != nil || line != "data: one\n" {
		t.Fatalf("first line %q, %v: the stream is not read as it comes", line, err)
	}
	close(release)
	rest, err := io.ReadAll(br)
	if err != nil || string(rest) != "\ndata: two\n\n" {
		t.Fatalf("rest %q, %v", rest, err)
	}
	resp.Body.Close()
	if got := readStream(t, hc, srv.URL); got != "data: one\n\ndata: two\n\n" {
		t.Fatalf("the second stream read %q", got)
	}
	if opened, closed := cc.counts(); opened != 1 || closed != 0 {
		t.Errorf("%d connections opened and %d closed for two streams one after the other, want 1 and 0", opened, closed)
	}
	own.(interface{ CloseIdleConnections() }).CloseIdleConnections()
	testwait.Until(t, 5*time.Second, "the kept connection closed", func() bool {
		opened, closed := cc.counts()
		return opened == 1 && closed == 1
	})
}

// TestOwnStreamConns_KeptOnlyWhileUsable checks what ends a kept
// connection, or keeps one from being kept: a stream closed before its
// end, the idle timeout, the peer closing it, a full pool.
func TestOwnStreamConns_KeptOnlyWhileUsable(t *testing.T) {
	t.Parallel()
	released := make(chan struct{})
	close(released)
	t.Run("closed before its end", func(t *testing.T) {
		t.Parallel()
		srv, cc := sseServer(t, make(chan struct{}), false)
		hc := &http.Client{Transport: OwnStreamConns(&http.Transport{})}
		resp, err := hc.Do(streamRequest(t, t.Context(), srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		testwait.Until(t, 5*time.Second, "the stream's connection closed", func() bool {
			_, closed := cc.counts()
			return closed == 1
		})
	})
	t.Run("stopped before the end that follows", func(t *testing.T) {
		t.Parallel()
		srv, cc := sseServer(t, released, false)
		hc := &http.Client{Transport: OwnStreamConns(&http.Transport{})}
		for range 2 {
			resp, err := hc.Do(streamRequest(t, t.Context(), srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			head := make([]byte, 5)
			if _, err := io.ReadFull(resp.Body, head); err != nil || string(head) != "data:" {
				t.Fatalf("read %q, %v", head, err)
			}
			resp.Body.Close() // the rest is read first, and the connection kept
		}
		if opened, closed := cc.counts(); opened != 1 || closed != 0 {
			t.Errorf("%d connections opened and %d closed, want 1 and 0", opened, closed)
		}
	})
	t.Run("context ended after the answer", func(t *testing.T) {
		t.Parallel()
		srv, cc := sseServer(t, released, false)
		hc := &http.Client{Transport: OwnStreamConns(&http.Transport{})}
		for range 2 {
			ctx, cancel := context.WithCancel(t.Context())
			resp, err := hc.Do(streamRequest(t, ctx, srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			head := make([]byte, 5)
			if _, err := io.ReadFull(resp.Body, head); err != nil {
				t.Fatal(err)
			}
			cancel() // as a delegation that settled at the answer's last event
			resp.Body.Close()
		}
		if opened, closed := cc.counts(); opened != 1 || closed != 0 {
			t.Errorf("%d connections opened and %d closed, want 1 and 0", opened, closed)
		}
	})
	t.Run("idle timeout", func(t *testing.T) {
		t.Parallel()
		srv, cc := sseServer(t, released, false)
		hc := &http.Client{Transport: OwnStreamConns(&http.Transport{IdleConnTimeout: 50 * time.Millisecond})}
		readStream(t, hc, srv.URL)
		testwait.Until(t, 5*time.Second, "the kept connection closed after its idle timeout", func() bool {
			_, closed := cc.counts()
			return closed == 1
		})
	})
	t.Run("closed by the peer", func(t *testing.T) {
		t.Parallel()
		// The server closes a kept connection, saying nothing.
		srv, cc := sseServer(t, released, false, func(s *http.Server) { s.IdleTimeout = 20 * time.Millisecond })
		hc := &http.Client{Transport: OwnStreamConns(&http.Transport{})}
		readStream(t, hc, srv.URL)
		testwait.Until(t, 5*time.Second, "the server closed the idle connection", func() bool {
			_, closed := cc.counts()
			return closed == 1
		})
		if got := readStream(t, hc, srv.URL); got != "data: one\n\ndata: two\n\n" {
			t.Fatalf("the stream after the server closed the kept connection read %q", got)
		}
		if opened, _ := cc.counts(); opened != 2 {
			t.Errorf("%d connections opened, want 2: the closed one dropped, a new one dialed", opened)
		}
	})
	t.Run("full pool", func(t *testing.T) {
		t.Parallel()
		srv, cc := sseServer(t, released, false)
		hc := &http.Client{Transport: OwnStreamConns(&http.Transport{MaxIdleConnsPerHost: 1})}
		var bodies []io.ReadCloser // three streams open at once
		for range 3 {
			resp, err := hc.Do(streamRequest(t, t.Context(), srv.URL))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { resp.Body.Close() })
			bodies = append(bodies, resp.Body)
		}
		for _, body := range bodies {
			if _, err := io.ReadAll(body); err != nil {
				t.Fatal(err)
			}
			body.Close()
		}
		testwait.Until(t, 5*time.Second, "all but one of 3 connections closed", func() bool {
			opened, closed := cc.counts()
			return opened == 3 && closed == 2
		})
	})
}

// TestOwnStreamConns_ContextEndsTheStream cancels a stream's context
// while it waits: the read fails with the context's error, and the
// connection closes with the body.
func TestOwnStreamConns_ContextEndsTheStream(t *testing.T) {
	t.Parallel()
	srv, cc := sseServer(t, make(chan struct{}), false)
	hc := &http.Client{Transport: OwnStreamConns(&http.Transport{})}
	ctx, cancel := context.WithCancel(t.Context())
	resp, err := hc.Do(streamRequest(t, ctx, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(50*time.Millisecond, cancel)
	_, err = io.ReadAll(br)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("read after cancel: %v, want context.Canceled", err)
	}
	resp.Body.Close() // as the stream's reader does once its read failed
	testwait.Until(t, 5*time.Second, "the stream's connection closed", func() bool {
		_, closed := cc.counts()
		return closed == 1
	})
}

// TestOwnStreamConns_OtherRequestsThroughBase sends what does not open
// a plain-HTTP stream through the base transport: unmarked requests
// share its kept-alive connection, and a stream over HTTPS is its.
func TestOwnStreamConns_OtherRequestsThroughBase(t *testing.T) {
	t.Parallel()
	t.Run("unmarked", func(t *testing.T) {
		t.Parallel()
		srv, cc := sseServer(t, nil, false)
		base := &http.Transport{}
		defer base.CloseIdleConnections()
		hc := &http.Client{Transport: OwnStreamConns(base)}
		for range 3 {
			resp, err := hc.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "plain" {
				t.Fatalf("body %q", b)
			}
		}
		if opened, _ := cc.counts(); opened != 1 {
			t.Errorf("%d connections for 3 requests, want 1 kept alive by the base transport", opened)
		}
	})
	t.Run("https", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		close(release)
		srv, _ := sseServer(t, release, true)
		base := srv.Client().Transport.(*http.Transport)
		var baseDials sync.WaitGroup
		baseDials.Add(1)
		var once sync.Once
		dial := (&net.Dialer{}).DialContext
		base.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			once.Do(baseDials.Done)
			return dial(ctx, network, addr)
		}
		hc := &http.Client{Transport: OwnStreamConns(base)}
		resp, err := hc.Do(streamRequest(t, t.Context(), srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || string(b) != "data: one\n\ndata: two\n\n" {
			t.Fatalf("body %q, %v", b, err)
		}
		if resp.TLS == nil {
			t.Error("the HTTPS stream did not go through the base transport's TLS")
		}
		baseDials.Wait()
	})
}

// TestOwnStreamConns_Fails says why a stream could not open: an address
// nobody listens on, and an agent that sends no answer within the base
// transport's ResponseHeaderTimeout.
func TestOwnStreamConns_Fails(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	silent := ln.Addr().String()
	var accepted sync.WaitGroup
	accepted.Go(func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, c) // reads the request, never answers
		c.Close()
	})
	t.Cleanup(func() { ln.Close(); accepted.Wait() })
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()

	for _, tc := range []struct {
		name, addr string
		want       string
	}{
		{"nobody listens", refused, "connection refused"},
		{"no answer", silent, "timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hc := &http.Client{Transport: OwnStreamConns(&http.Transport{ResponseHeaderTimeout: 200 * time.Millisecond})}
			resp, err := hc.Do(streamRequest(t, t.Context(), "http://"+tc.addr))
			if err == nil {
				resp.Body.Close()
				t.Fatal("the stream opened")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}
