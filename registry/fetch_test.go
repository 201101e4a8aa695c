package registry

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestFetch_Safety(t *testing.T) {
	t.Parallel()
	good := card("Safe", "")
	huge := newCardServer(t, `{"name":"`+strings.Repeat("x", 2<<20)+`"}`)
	slow := newCardServer(t, good)
	slow.set(func(s *cardServer) { s.delay = 2 * time.Second })
	target := newCardServer(t, good)
	redirects := func(n int) string {
		mux := http.NewServeMux()
		mux.HandleFunc("/hop/{n}/", func(w http.ResponseWriter, r *http.Request) {
			var i int
			_, _ = fmt.Sscan(r.PathValue("n"), &i)
			if i >= n {
				http.Redirect(w, r, target.URL+WellKnownPath, http.StatusFound)
				return
			}
			http.Redirect(w, r, fmt.Sprintf("/hop/%d%s", i+1, WellKnownPath), http.StatusFound)
		})
		s := httptest.NewServer(mux)
		t.Cleanup(s.Close)
		return s.URL + "/hop/1"
	}
	tls := httptest.NewTLSServer(http.RedirectHandler(target.URL+WellKnownPath, http.StatusFound))
	t.Cleanup(tls.Close)
	pool := tls.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs

	r := newTestRegistry(t, Config{Timeout: 500 * time.Millisecond, RootCAs: pool})
	tests := []struct {
		name string
		url  string
		want error
		msg  string
	}{
		{"body limit", huge.URL, ErrCardTooLarge, "over 1048576 bytes"},
		{"timeout", slow.URL, nil, "Timeout"},
		{"three redirects", redirects(3), nil, ""},
		{"four redirects", redirects(4), nil, "more than 3 redirects"},
		{"https to http", tls.URL, nil, "downgrades https"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := r.Inspect(t.Context(), tt.url)
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("err = %v, want success", err)
				}
				return
			}
			var fe *FetchError
			if !errors.As(err, &fe) || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("err = %v; want a *FetchError wrapping %v containing %q", err, tt.want, tt.msg)
			}
		})
	}
}

func TestFetch_SSRFGuard(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("Internal", ""))
	port := s.URL[strings.LastIndex(s.URL, ":")+1:]

	strict, err := New(Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(strict.Close)
	_, err = strict.Inspect(t.Context(), s.URL)
	if !errors.Is(err, ErrBlockedAddress) || !strings.Contains(err.Error(), "127.0.0.1 is in 127.0.0.0/8 (loopback)") {
		t.Errorf("default config reached loopback: err = %v", err)
	}

	byHost, err := New(Config{AllowHosts: []string{"localhost"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(byHost.Close)
	if _, err := byHost.Inspect(t.Context(), "http://localhost:"+port); err != nil {
		t.Errorf("allow-listed host refused: %v", err)
	}
	if _, err := byHost.Inspect(t.Context(), s.URL); !errors.Is(err, ErrBlockedAddress) {
		t.Errorf("host allow-list let an address through: err = %v", err)
	}
	if _, err := New(Config{AllowNetworks: []string{"not-a-cidr"}}, nil); err == nil {
		t.Error("New accepted a malformed allowNetworks entry")
	}
}

func TestNormalizeURL(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"HTTP://Agents.Example.com/", "http://agents.example.com"},
		{"https://a.example.com/team/x//", "https://a.example.com/team/x"},
		{"  https://a.example.com  ", "https://a.example.com"},
		{"https://a.example.com/card.json", "https://a.example.com/card.json"},
	}
	for _, tt := range tests {
		if got, err := NormalizeURL(tt.in); err != nil || got != tt.want {
			t.Errorf("NormalizeURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "a.example.com", "file:///etc/passwd", "http://", "http://a.example.com/?q=1", "http://a.example.com/#f", "http://user@a.example.com"} {
		if _, err := NormalizeURL(bad); !errors.Is(err, ErrInvalidURL) {
			t.Errorf("NormalizeURL(%q): err = %v, want ErrInvalidURL", bad, err)
		}
	}
}

// The errors say what is wrong with the URL, and a URL written without
// its scheme gets the one it probably means.
func TestNormalizeURL_Messages(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw, err string
	}{
		{raw: "127.0.0.1:9001", err: `invalid agent URL "127.0.0.1:9001" has no scheme; did you mean "http://127.0.0.1:9001"?`},
		{raw: "localhost:9001/x", err: `invalid agent URL "localhost:9001/x" has no scheme; did you mean "http://localhost:9001/x"?`},
		{raw: "agent.example.com", err: `invalid agent URL "agent.example.com" has no scheme; did you mean "http://agent.example.com"?`},
		{raw: "ftp://x.example.com", err: `invalid agent URL "ftp://x.example.com": scheme must be http or https`},
		{raw: "http://", err: `invalid agent URL "http://": no host`},
		{raw: "http://u:p@x.example.com", err: `invalid agent URL "http://xxxxx@x.example.com": credentials in the URL are not accepted`},
		{raw: "https://token@x.example.com/a@b", err: `invalid agent URL "https://xxxxx@x.example.com/a@b": credentials in the URL are not accepted`},
		{raw: "u:secret@x.example.com:9001", err: `invalid agent URL "xxxxx@x.example.com:9001": scheme must be http or https`},
		{raw: "http://[::1", err: `invalid agent URL "http://[::1": missing ']' in host`},
		{raw: "http://x.example.com/?a=1", err: `invalid agent URL "http://x.example.com/?a=1": query and fragment are not accepted`},
		{raw: "", err: `invalid agent URL "": scheme must be http or https`},
	}
	for _, tt := range tests {
		if got, err := NormalizeURL(tt.raw); err == nil || err.Error() != tt.err || !errors.Is(err, ErrInvalidURL) {
			t.Errorf("NormalizeURL(%q) = %q, %v; want error %q", tt.raw, got, err, tt.err)
		}
	}
}
