// Package testproxy holds an HTTP proxy for tests that need a kept-alive
// connection to close under a request, as a server's idle timeout closes
// it just as the client sends on it.
package testproxy

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Closing relays HTTP/1.1 requests to a server and closes a connection,
// unanswered, when the POST number closeAt on it arrives (NewClosing).
// An agent card it relays names the proxy instead of the server, so
// that the agent's client comes back through it.
type Closing struct {
	// URL is the proxy's base URL.
	URL            string
	posted, closed atomic.Int64
}

// Posted is how many POSTs reached the proxy, those it closed a
// connection on included.
func (p *Closing) Posted() int64 { return p.posted.Load() }

// Closed is how many connections the proxy closed under a POST.
func (p *Closing) Closed() int64 { return p.closed.Load() }

// NewClosing starts a Closing proxy to the server at target (host:port)
// that closes each connection at its POST number closeAt. It stops when
// the test ends, ending the requests it relays.
func NewClosing(t testing.TB, target string, closeAt int) *Closing {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	self := ln.Addr().String()
	p := &Closing{URL: "http://" + self}
	tr := &http.Transport{}
	// stop ends the relayed requests, a stream among them.
	ctx, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		stop()
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		tr.CloseIdleConnections()
	})
	relay := func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for posts := 0; ; {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if req.Method == http.MethodPost {
				p.posted.Add(1)
				if posts++; posts == closeAt {
					p.closed.Add(1)
					return
				}
			}
			req.URL.Scheme, req.URL.Host, req.RequestURI = "http", target, ""
			resp, err := tr.RoundTrip(req.WithContext(ctx))
			if err != nil {
				return
			}
			if strings.HasSuffix(req.URL.Path, "agent-card.json") {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				b = bytes.ReplaceAll(b, []byte(target), []byte(self))
				resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
				resp.Header.Del("Etag")
			}
			err = resp.Write(c)
			resp.Body.Close()
			if err != nil {
				return
			}
		}
	}
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Go(func() { relay(c) })
		}
	})
	return p
}
