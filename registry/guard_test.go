package registry

import (
	"errors"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// TestGuard_Check_SpecialRanges checks one address per special-purpose
// range, and public addresses, against the strict configuration. It calls
// the decision function directly, so nothing is dialled.
func TestGuard_Check_SpecialRanges(t *testing.T) {
	t.Parallel()
	g := mustGuard(t, nil)
	tests := []struct {
		ip   string
		want string // "" means allowed; otherwise a part of the refusal
	}{
		// public
		{"93.184.216.34", ""},
		{"8.8.8.8", ""},
		{"2606:2800:220:1::1", ""},
		{"::ffff:8.8.8.8", ""},

		// IPv4 special-purpose registry
		{"0.0.0.0", "0.0.0.0 is in 0.0.0.0/8 (unspecified)"},
		{"0.1.2.3", "0.1.2.3 is in 0.0.0.0/8 (special-purpose)"},
		{"10.0.0.1", "10.0.0.1 is in 10.0.0.0/8 (private)"},
		{"100.64.0.1", "100.64.0.1 is in 100.64.0.0/10 (special-purpose)"},
		{"100.127.255.254", "100.127.255.254 is in 100.64.0.0/10"},
		{"127.0.0.1", "127.0.0.1 is in 127.0.0.0/8 (loopback)"},
		{"127.255.0.9", "127.255.0.9 is in 127.0.0.0/8 (loopback)"},
		{"169.254.169.254", "169.254.169.254 is in 169.254.0.0/16 (link-local)"},
		{"172.16.0.1", "172.16.0.1 is in 172.16.0.0/12 (private)"},
		{"192.0.0.8", "192.0.0.8 is in 192.0.0.0/24 (special-purpose)"},
		{"192.0.2.1", "192.0.2.1 is in 192.0.2.0/24 (special-purpose)"},
		{"192.88.99.1", "192.88.99.1 is in 192.88.99.0/24 (special-purpose)"},
		{"192.168.1.1", "192.168.1.1 is in 192.168.0.0/16 (private)"},
		{"198.18.0.1", "198.18.0.1 is in 198.18.0.0/15 (special-purpose)"},
		{"198.19.255.1", "198.19.255.1 is in 198.18.0.0/15"},
		{"198.51.100.7", "198.51.100.7 is in 198.51.100.0/24 (special-purpose)"},
		{"203.0.113.7", "203.0.113.7 is in 203.0.113.0/24 (special-purpose)"},
		{"224.0.0.1", "224.0.0.1 is in 224.0.0.0/4 (multicast)"},
		{"239.1.1.1", "239.1.1.1 is in 224.0.0.0/4 (multicast)"},
		{"240.0.0.1", "240.0.0.1 is in 240.0.0.0/4 (special-purpose)"},
		{"255.255.255.255", "255.255.255.255 is in 240.0.0.0/4"},

		// IPv6: everything outside global unicast, and the special ranges inside it
		{"::", ":: is outside 2000::/3, the IPv6 global unicast range (unspecified)"},
		{"::1", "::1 is outside 2000::/3, the IPv6 global unicast range (loopback)"},
		{"fc00::1", "fc00::1 is outside 2000::/3, the IPv6 global unicast range (private)"},
		{"fd12:3456::1", "fd12:3456::1 is outside 2000::/3, the IPv6 global unicast range (private)"},
		{"fe80::1", "fe80::1 is outside 2000::/3, the IPv6 global unicast range (link-local)"},
		{"fe80::1%eth0", "fe80::1 is outside 2000::/3, the IPv6 global unicast range (link-local)"},
		{"ff02::1", "ff02::1 is outside 2000::/3, the IPv6 global unicast range (multicast)"},
		{"100::1", "100::1 is outside 2000::/3, the IPv6 global unicast range"},
		{"2001::1", "2001::1 is in 2001::/23 (special-purpose)"},
		{"2001:db8::1", "2001:db8::1 is in 2001:db8::/32 (special-purpose)"},
		{"3fff::1", "3fff::1 is in 3fff::/20 (special-purpose)"},
		{"2620:4f:8000::1", "2620:4f:8000::1 is in 2620:4f:8000::/48 (special-purpose)"},

		// IPv4-mapped is the IPv4 address itself
		{"::ffff:127.0.0.1", "127.0.0.1 is in 127.0.0.0/8 (loopback)"},
		{"::ffff:10.0.0.1", "10.0.0.1 is in 10.0.0.0/8 (private)"},
		{"::ffff:169.254.169.254", "169.254.169.254 is in 169.254.0.0/16 (link-local)"},

		// forms that carry an IPv4 address to a translator or tunnel: the
		// embedded address is judged first, then the address dialled
		{"64:ff9b::10.0.0.1", "64:ff9b::a00:1 embeds 10.0.0.1 (NAT64), which is in 10.0.0.0/8 (private)"},
		{"64:ff9b::127.0.0.1", "64:ff9b::7f00:1 embeds 127.0.0.1 (NAT64), which is in 127.0.0.0/8 (loopback)"},
		{"64:ff9b::8.8.8.8", "64:ff9b::808:808 is outside 2000::/3, the IPv6 global unicast range (NAT64)"},
		{"64:ff9b:1::169.254.169.254", "64:ff9b:1::a9fe:a9fe embeds 169.254.169.254 (local-use NAT64), which is in 169.254.0.0/16 (link-local)"},
		{"64:ff9b:1::8.8.8.8", "64:ff9b:1::808:808 is outside 2000::/3, the IPv6 global unicast range (local-use NAT64)"},
		{"::10.0.0.1", "::a00:1 embeds 10.0.0.1 (IPv4-compatible), which is in 10.0.0.0/8 (private)"},
		{"::8.8.8.8", "::808:808 is outside 2000::/3, the IPv6 global unicast range (IPv4-compatible)"},
		{"::2", "::2 embeds 0.0.0.2 (IPv4-compatible), which is in 0.0.0.0/8 (special-purpose)"},
		{"2002:a00:1::1", "2002:a00:1::1 embeds 10.0.0.1 (6to4), which is in 10.0.0.0/8 (private)"},
		{"2002:c612:1::", "2002:c612:1:: embeds 198.18.0.1 (6to4), which is in 198.18.0.0/15 (special-purpose)"},
		{"2002:808:808::1", "2002:808:808::1 is in 2002::/16 (6to4)"},
	}
	for _, tt := range tests {
		err := g.check(netip.MustParseAddr(tt.ip))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tt.ip, err)
		case tt.want == "":
		case err == nil:
			t.Errorf("%s: allowed, want refused with %q", tt.ip, tt.want)
		case !errors.Is(err, ErrBlockedAddress) || !strings.Contains(err.Error(), tt.want):
			t.Errorf("%s: err = %v, want ErrBlockedAddress containing %q", tt.ip, err, tt.want)
		}
	}
	if err := g.check(netip.Addr{}); !errors.Is(err, ErrBlockedAddress) {
		t.Errorf("the zero address: err = %v, want ErrBlockedAddress", err)
	}
}

// TestGuard_Check_AllowNetworks checks the exceptions: an allowed network
// allows its IPv4-mapped form, but not its translated or tunnelled forms,
// whose own prefix must be allowed as well.
func TestGuard_Check_AllowNetworks(t *testing.T) {
	t.Parallel()
	dev := []string{"127.0.0.0/8", "::1/128"} // the embedded defaults
	tests := []struct {
		name  string
		allow []string
		ip    string
		want  string // "" means allowed
	}{
		{"dev default: loopback", dev, "127.0.0.1", ""},
		{"dev default: all of 127/8", dev, "127.3.4.5", ""},
		{"dev default: ::1", dev, "::1", ""},
		{"dev default: mapped loopback", dev, "::ffff:127.0.0.1", ""},
		{"dev default: private still refused", dev, "10.0.0.1", "10.0.0.1 is in 10.0.0.0/8 (private)"},
		{"dev default: NAT64 loopback refused", dev, "64:ff9b::127.0.0.1", "64:ff9b::7f00:1 is outside 2000::/3"},
		{"dev default: compatible loopback refused", dev, "::127.0.0.1", "::7f00:1 is outside 2000::/3"},
		{"dev default: 6to4 loopback refused", dev, "2002:7f00:1::", "2002:7f00:1:: is in 2002::/16 (6to4)"},
		{"dev default: ::2 refused", dev, "::2", "::2 embeds 0.0.0.2"},
		{"address entry", []string{"192.168.7.7"}, "192.168.7.7", ""},
		{"address entry is one address", []string{"192.168.7.7"}, "192.168.7.8", "192.168.7.8 is in 192.168.0.0/16 (private)"},
		{"unmasked prefix entry", []string{"10.1.2.3/16"}, "10.1.200.1", ""},
		{"IPv4 network allows its mapped form", []string{"10.0.0.0/8"}, "::ffff:10.9.9.9", ""},
		{"mapped-form entry means the IPv4 network", []string{"::ffff:10.0.0.0/104"}, "10.9.9.9", ""},
		{"mapped-form address entry", []string{"::ffff:10.0.0.1"}, "10.0.0.1", ""},
		{"mapped-form entry covers only its network", []string{"::ffff:10.0.0.0/104"}, "172.16.0.1", "172.16.0.1 is in 172.16.0.0/12"},
		{"zone ignored", []string{"fe80::/10"}, "fe80::1%eth0", ""},
		{"NAT64 prefix allows public IPv4", []string{"64:ff9b::/96"}, "64:ff9b::8.8.8.8", ""},
		{"NAT64 prefix alone keeps private IPv4 out", []string{"64:ff9b::/96"}, "64:ff9b::10.0.0.1", "64:ff9b::a00:1 embeds 10.0.0.1 (NAT64), which is in 10.0.0.0/8 (private)"},
		{"IPv4 network alone keeps NAT64 out", []string{"10.0.0.0/8"}, "64:ff9b::10.0.0.1", "64:ff9b::a00:1 is outside 2000::/3, the IPv6 global unicast range (NAT64)"},
		{"NAT64 and the IPv4 network", []string{"64:ff9b::/96", "10.0.0.0/8"}, "64:ff9b::10.0.0.1", ""},
		{"local-use NAT64 prefix", []string{"64:ff9b:1::/48"}, "64:ff9b:1::8.8.8.8", ""},
		{"local-use NAT64 keeps link-local out", []string{"64:ff9b:1::/48"}, "64:ff9b:1::169.254.169.254", "embeds 169.254.169.254 (local-use NAT64)"},
		{"6to4 prefix allows public IPv4", []string{"2002::/16"}, "2002:808:808::1", ""},
		{"6to4 prefix keeps private IPv4 out", []string{"2002::/16"}, "2002:c0a8:101::1", "2002:c0a8:101::1 embeds 192.168.1.1 (6to4), which is in 192.168.0.0/16 (private)"},
		{"compatible prefix keeps private IPv4 out", []string{"::/96"}, "::10.0.0.1", "::a00:1 embeds 10.0.0.1 (IPv4-compatible)"},
		{"compatible prefix and the IPv4 network", []string{"::/96", "10.0.0.0/8"}, "::10.0.0.1", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := mustGuard(t, tt.allow).check(netip.MustParseAddr(tt.ip))
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("%s with %v: refused: %v", tt.ip, tt.allow, err)
			case tt.want == "":
			case !errors.Is(err, ErrBlockedAddress) || !strings.Contains(err.Error(), tt.want):
				t.Errorf("%s with %v: err = %v, want ErrBlockedAddress containing %q", tt.ip, tt.allow, err, tt.want)
			}
		})
	}
}

func TestNewGuard_BadEntries(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"not-a-cidr", "10.0.0.0/33", "", "fe80::/10%eth0"} {
		if _, err := newGuard([]string{bad}, nil); err == nil || !strings.Contains(err.Error(), "allowNetworks") {
			t.Errorf("newGuard(%q): err = %v, want an allowNetworks error", bad, err)
		}
	}
}

// TestGuard_Check_DoesNotAllocate keeps the allowed path free of heap
// allocations; every connection attempt runs it.
func TestGuard_Check_DoesNotAllocate(t *testing.T) {
	g := mustGuard(t, []string{"127.0.0.0/8", "::1/128", "64:ff9b::/96"})
	for _, s := range []string{"8.8.8.8", "2606:2800:220:1::1", "127.0.0.1", "::ffff:127.0.0.1", "::1", "64:ff9b::8.8.8.8"} {
		ip := netip.MustParseAddr(s)
		if n := testing.AllocsPerRun(1000, func() { _ = g.check(ip) }); n != 0 {
			t.Errorf("check(%s) allocates %.1f times per call, want 0", s, n)
		}
	}
}

// TestFetch_SpecialAddressRefusedBeforeConnecting fetches cards from URLs
// whose host is a literal special address. The guard must refuse in the
// dialer's Control, after the socket is made and before it connects. A
// fence behind the guard refuses anything but loopback, so even a broken
// guard sends nothing off the machine, and counts what got past the guard.
func TestFetch_SpecialAddressRefusedBeforeConnecting(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		passed []string
	)
	fence := func(address string) error {
		mu.Lock()
		passed = append(passed, address)
		mu.Unlock()
		if ap, err := netip.ParseAddrPort(address); err != nil || !ap.Addr().Unmap().IsLoopback() {
			return errors.New("test fence: only loopback may be dialled")
		}
		return nil
	}
	r, err := New(Config{dialFence: fence}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)

	ipv6 := canUseIPv6()
	tests := []struct {
		url  string
		want string
		v6   bool
	}{
		{"http://0.1.2.3", "0.1.2.3 is in 0.0.0.0/8", false},
		{"http://100.64.0.1:8080", "100.64.0.1 is in 100.64.0.0/10", false},
		{"http://198.18.0.1", "198.18.0.1 is in 198.18.0.0/15", false},
		{"https://169.254.169.254", "169.254.169.254 is in 169.254.0.0/16 (link-local)", false},
		{"http://[::ffff:10.0.0.1]", "10.0.0.1 is in 10.0.0.0/8 (private)", false},
		{"http://[64:ff9b::a00:1]", "embeds 10.0.0.1 (NAT64)", true},
		{"http://[::a00:1]", "embeds 10.0.0.1 (IPv4-compatible)", true},
		{"http://[2002:a00:1::1]", "embeds 10.0.0.1 (6to4)", true},
		{"http://[fd00::1]", "fd00::1 is outside 2000::/3", true},
	}
	for _, tt := range tests {
		if tt.v6 && !ipv6 {
			t.Logf("%s: skipped, no IPv6 sockets here", tt.url)
			continue
		}
		_, err := r.Inspect(t.Context(), tt.url)
		var oe *net.OpError
		switch {
		case !errors.Is(err, ErrBlockedAddress) || !strings.Contains(err.Error(), tt.want):
			t.Errorf("%s: err = %v, want ErrBlockedAddress containing %q", tt.url, err, tt.want)
		case !errors.As(err, &oe) || oe.Op != "dial":
			t.Errorf("%s: err = %v, want the refusal from the dial", tt.url, err)
		}
	}
	mu.Lock()
	if len(passed) != 0 {
		t.Errorf("the guard let %v through to the dial", passed)
	}
	mu.Unlock()

	// The fence is on the path: an allowed loopback dial reaches it.
	s := newCardServer(t, card("Local", ""))
	local, err := New(Config{AllowNetworks: []string{"127.0.0.0/8"}, dialFence: fence}, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(local.Close)
	if _, err := local.Inspect(t.Context(), s.URL); err != nil {
		t.Fatalf("allowed loopback card: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(passed) == 0 {
		t.Error("the fence saw no dial; it does not guard this test")
	}
}

func mustGuard(t *testing.T, allow []string) *guard {
	t.Helper()
	g, err := newGuard(allow, nil)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// canUseIPv6 reports whether this machine can make IPv6 sockets; the guard
// runs after the socket is made, so without them an IPv6 dial fails first.
func canUseIPv6() bool {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return false
	}
	l.Close()
	return true
}
