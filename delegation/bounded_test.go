package delegation

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestBoundedAnswers reads answers of each kind through the bound: one
// within it whole, one that declares more or runs past it refused, and an
// event stream of any length as it is.
func TestBoundedAnswers(t *testing.T) {
	t.Parallel()
	const limit = 100
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := strings.Repeat("x", map[string]int{"/small": limit, "/declared": limit + 1, "/chunked": 10 * limit, "/stream": 10 * limit}[r.URL.Path])
		switch r.URL.Path {
		case "/stream":
			w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		case "/chunked":
			w.(http.Flusher).Flush() // no Content-Length
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	hc := boundedAnswers(srv.Client(), limit)
	for _, tc := range []struct {
		path    string
		refused bool
		n       int
	}{
		{"/small", false, limit},
		{"/declared", true, 0},
		{"/chunked", true, 0},
		{"/stream", false, 10 * limit},
	} {
		resp, err := hc.Get(srv.URL + tc.path)
		var n int
		if err == nil {
			var b []byte
			b, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			n = len(b)
		}
		if tc.refused != errors.Is(err, ErrAnswerTooLarge) || !tc.refused && n != tc.n {
			t.Errorf("%s: read %d bytes, err %v; want refused %v", tc.path, n, err, tc.refused)
		}
	}
}
