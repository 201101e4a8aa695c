package staleconn_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/orchd/orchd/internal/staleconn"
	"github.com/orchd/orchd/internal/testproxy"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestResend posts twice through a proxy that closes each connection when
// its second POST arrives, unanswered: the second POST goes out on the
// first's kept connection, and is sent again on a new one. Through
// net/http alone it fails with EOF.
func TestResend(t *testing.T) {
	for _, tc := range []struct {
		name    string
		resend  bool
		wantErr string
		posted  int64
	}{
		{"resent", true, "", 3},
		{"net/http alone", false, "EOF", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				_, _ = w.Write(b)
			}))
			defer srv.Close()
			proxy := testproxy.NewClosing(t, strings.TrimPrefix(srv.URL, "http://"), 2)
			tr := &http.Transport{}
			defer tr.CloseIdleConnections()
			hc := &http.Client{Transport: tr}
			if tc.resend {
				hc.Transport = staleconn.Resend(tr)
			}
			var err error
			for i, body := range []string{"first", "second"} {
				var resp *http.Response
				if resp, err = hc.Post(proxy.URL, "text/plain", strings.NewReader(body)); err != nil {
					break
				}
				got, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(got) != body {
					t.Errorf("POST %d answered %q, want %q", i, got, body)
				}
			}
			if (err == nil) != (tc.wantErr == "") || err != nil && !strings.HasSuffix(err.Error(), tc.wantErr) {
				t.Errorf("the second POST: %v, want %q", err, tc.wantErr)
			}
			if n := proxy.Posted(); n != tc.posted {
				t.Errorf("%d POSTs reached the proxy, want %d", n, tc.posted)
			}
		})
	}
}

// TestResend_NotOnANewConnection posts through a proxy that closes every
// connection when its first POST arrives: a new connection closed under
// a request is the server's answer to it, and the request is sent once.
func TestResend_NotOnANewConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	proxy := testproxy.NewClosing(t, strings.TrimPrefix(srv.URL, "http://"), 1)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: staleconn.Resend(tr)}
	if resp, err := hc.Post(proxy.URL, "text/plain", strings.NewReader("once")); err == nil {
		resp.Body.Close()
		t.Fatal("the POST was answered through a proxy that answers none")
	}
	if n := proxy.Posted(); n != 1 {
		t.Errorf("%d POSTs reached the proxy, want 1", n)
	}
}

// TestResend_EveryStaleKeptConnection keeps three connections, each with
// one POST answered, behind a proxy that closes each at its second: the
// next POST goes out on each of them in turn, and then on a new one,
// which answers.
func TestResend_EveryStaleKeptConnection(t *testing.T) {
	const kept = 3
	var arrived sync.WaitGroup
	arrived.Add(kept)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/together" {
			arrived.Done()
			arrived.Wait() // each of the three holds its own connection
		}
	}))
	defer srv.Close()
	proxy := testproxy.NewClosing(t, strings.TrimPrefix(srv.URL, "http://"), 2)
	tr := &http.Transport{MaxIdleConnsPerHost: kept}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: staleconn.Resend(tr)}
	var wg sync.WaitGroup
	for range kept {
		wg.Go(func() {
			resp, err := hc.Post(proxy.URL+"/together", "text/plain", strings.NewReader("x"))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
		})
	}
	wg.Wait()
	resp, err := hc.Post(proxy.URL+"/after", "text/plain", strings.NewReader("y"))
	if err != nil {
		t.Fatalf("the POST after: %v", err)
	}
	resp.Body.Close()
	if got, want := [2]int64{proxy.Posted(), proxy.Closed()}, [2]int64{kept + kept + 1, kept}; got != want {
		t.Errorf("posted and closed %v, want %v: each kept connection, then a new one", got, want)
	}
}
