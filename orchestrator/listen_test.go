package orchestrator

import (
	"bufio"
	"context"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/internal/syncbuf"
)

func TestCheckAdvertised(t *testing.T) {
	t.Parallel()
	tests := []struct {
		listen, agentURL string
		want             string // in the error; "" for none
	}{
		{"127.0.0.1:8080", "", ""},
		{"[::1]:8080", "", ""},
		{"localhost:8080", "", ""},
		{"10.1.2.3:8080", "", ""},
		{"0.0.0.0:8080", "", "listen 0.0.0.0:8080 binds every interface, so orchd's agent card has no address to advertise: set agent.url"},
		{"[::]:8080", "", "set agent.url"},
		{":8080", "", "set agent.url"},
		{"[::ffff:0.0.0.0]:8080", "", "set agent.url"},
		{"0.0.0.0:8080", "https://orchd.example.com", ""},
		{"[::]:8080", "http://10.1.2.3:8080/", ""},
		{"0.0.0.0:8080", "http://0.0.0.0:8080", `agent.url "http://0.0.0.0:8080" names no host other agents can reach`},
		{"127.0.0.1:8080", "http://[::]:8080", "names no host"},
		{"127.0.0.1:8080", "http://%zz", "agent.url"},
	}
	for _, tc := range tests {
		err := checkAdvertised(tc.listen, tc.agentURL)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("checkAdvertised(%q, %q) = %v, want %q", tc.listen, tc.agentURL, err, tc.want)
		}
	}
}

// A daemon told to listen on every interface without agent.url does not
// start, and binds nothing.
func TestRun_RefusesWildcardListenWithoutAgentURL(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{"0.0.0.0:0", "[::]:0", ":0"} {
		cfg := loadDefaults(t)
		cfg.Listen = listen
		d, err := New(cfg, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		err = d.Run(ctx)
		cancel()
		if err == nil || !strings.Contains(err.Error(), "set agent.url") {
			t.Errorf("listen %s: Run = %v, want a refusal saying to set agent.url", listen, err)
		}
		if d.Addr() != nil {
			t.Errorf("listen %s: the daemon bound %v", listen, d.Addr())
		}
	}
}

const noAuthWarning = "with no authentication"

// A daemon with no authentication configured refuses every address but
// loopback ones unless told otherwise (--insecure-no-auth), and then
// warns; one with authentication serves anywhere. Tests bind only
// loopback, so the other addresses are given to the check directly.
func TestCheckExposed(t *testing.T) {
	t.Parallel()
	authn, err := auth.New(auth.Config{Tokens: []auth.TokenConfig{{SHA256: strings.Repeat("ab", 32), Principal: "alice"}}}, auth.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = authn.Close() })
	for _, tc := range []struct {
		addr    net.Addr
		exposed bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, false},
		{&net.TCPAddr{IP: net.IPv4(127, 1, 2, 3), Port: 8080}, false},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 8080}, false},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8080}, true},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 8080}, true}, // what 0.0.0.0 binds on a dual-stack host
		{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080}, true},
		{&net.TCPAddr{IP: net.ParseIP("fd00::1"), Port: 8080}, true},
		{&net.UnixAddr{Name: "/run/orchd.sock", Net: "unix"}, true},
	} {
		var out syncbuf.Buffer
		d := &Daemon{log: slog.New(slog.NewTextHandler(&out, nil))}
		err := d.checkExposed(tc.addr)
		if got := err != nil; got != tc.exposed || tc.exposed && !strings.Contains(err.Error(), "--insecure-no-auth") {
			t.Errorf("%v: refused %v (%v), want %v", tc.addr, got, err, tc.exposed)
		}
		d.cfg.InsecureNoAuth = true
		err = d.checkExposed(tc.addr)
		if warned := strings.Contains(out.String(), noAuthWarning) && strings.Contains(out.String(), "level=WARN"); err != nil || warned != tc.exposed {
			t.Errorf("%v with --insecure-no-auth: %v, warned %v (log %q)", tc.addr, err, warned, out.String())
		}
		if err := (&Daemon{authn: authn, log: d.log}).checkExposed(tc.addr); err != nil {
			t.Errorf("%v with authentication: %v", tc.addr, err)
		}
	}

	// A daemon on loopback does not warn.
	var out syncbuf.Buffer
	cfg := loadDefaults(t)
	cfg.Listen = "127.0.0.1:0"
	d, err := New(cfg, slog.New(slog.NewTextHandler(&out, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	// Stopped before it serves, a daemon returns without saying so: wait
	// for it to serve, not only to bind.
	deadline := time.After(10 * time.Second)
	for !strings.Contains(out.String(), "orchd serving") {
		select {
		case err := <-done:
			t.Fatalf("Run = %v before serving", err)
		case <-deadline:
			t.Fatalf("not serving within 10s:\n%s", out.String())
		case <-time.After(5 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if strings.Contains(out.String(), noAuthWarning) || !strings.Contains(out.String(), "orchd serving") {
		t.Errorf("a daemon on loopback logged:\n%s", out.String())
	}
}

// TestServe_NewConnectionWaitsForItsFirstRequest opens a connection to
// a daemon and sends its first request only after the 10 s net/http
// gives a request's headers: it is answered, as HTTP clients keep
// connections they dialed and did not need among their idle ones and
// send on them later (httpgate.AwaitFirstByte).
func TestServe_NewConnectionWaitsForItsFirstRequest(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the header timeout")
	}
	t.Parallel()
	base := startDaemon(t, loadDefaults(t))
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	time.Sleep(readHeaderTimeout + 500*time.Millisecond)
	if _, err := c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "HTTP/1.1 200 OK\r\n" {
		t.Errorf("first request after %s: %q, %v; want 200", readHeaderTimeout, line, err)
	}
}
