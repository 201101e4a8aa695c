package registry

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"

	"code.dny.dev/ssrf"
)

// guard refuses connections to addresses a card URL must not reach. It
// checks the address actually dialled, after DNS resolution, so a name that
// resolves to a private address (or rebinds to one) is refused too.
//
// Which addresses are special comes from code.dny.dev/ssrf, generated from
// the IANA IPv4 and IPv6 special-purpose address registries: every IPv4
// special-purpose range, and every IPv6 address outside global unicast
// (2000::/3) or in a special range inside it. allowNetworks are the
// exceptions. Before deciding, the guard unwraps an IPv4 address carried
// inside an IPv6 one (see [embeddings]) and judges both.
type guard struct {
	allowHosts map[string]bool
	special    *ssrf.Guardian
	embeddings []embedding
	fence      func(address string) error
}

// embedding is an IPv6 range whose addresses carry an IPv4 address that a
// translator or tunnel delivers the connection to.
type embedding struct {
	prefix netip.Prefix
	except netip.Prefix // addresses of prefix that carry none
	at     int          // byte offset of the IPv4 address
	name   string
}

// embeddings lists the IPv6 forms that carry an IPv4 address. IPv4-mapped
// addresses (::ffff:0:0/96) are not among them: they are the IPv4 address
// itself and are unmapped before anything else.
func embeddings() []embedding {
	return []embedding{
		// RFC 6052 NAT64 well-known prefix.
		{prefix: ssrf.IPv6NAT64Prefix, at: 12, name: "NAT64"},
		// RFC 8215 local-use NAT64 space, read as a /96 NAT64 prefix.
		{prefix: netip.MustParsePrefix("64:ff9b:1::/48"), at: 12, name: "local-use NAT64"},
		// RFC 3056 6to4: 2002:V4ADDR::/48.
		{prefix: netip.MustParsePrefix("2002::/16"), at: 2, name: "6to4"},
		// RFC 4291 2.5.5.1 IPv4-compatible, deprecated; :: and ::1 are not.
		{prefix: netip.MustParsePrefix("::/96"), except: netip.MustParsePrefix("::/127"), at: 12, name: "IPv4-compatible"},
	}
}

type allowedHostKey struct{}

// ParseNetworks parses an allowNetworks list into IPv4 and IPv6 prefixes.
// An entry is a CIDR prefix or a single address; one written in
// IPv4-mapped form (::ffff:10.0.0.0/104) means the IPv4 network
// (10.0.0.0/8), as mapped addresses are judged as IPv4.
func ParseNetworks(nets []string) (v4, v6 []netip.Prefix, err error) {
	for _, n := range nets {
		p, err := netip.ParsePrefix(strings.TrimSpace(n))
		if err != nil {
			addr, aErr := netip.ParseAddr(strings.TrimSpace(n))
			if aErr != nil {
				return nil, nil, fmt.Errorf("allowNetworks %q: not a CIDR prefix or address", n)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		if p = p.Masked(); p.Addr().Is4() {
			v4 = append(v4, p)
		} else {
			v6 = append(v6, p)
		}
	}
	return v4, v6, nil
}

// newGuard parses the allow-lists (ParseNetworks).
func newGuard(nets, hosts []string) (*guard, error) {
	v4, v6, err := ParseNetworks(nets)
	if err != nil {
		return nil, err
	}
	g := &guard{
		allowHosts: map[string]bool{},
		special: ssrf.New(ssrf.WithAnyNetwork(), ssrf.WithAnyPort(),
			ssrf.WithAllowedV4Prefixes(v4...), ssrf.WithAllowedV6Prefixes(v6...)),
		embeddings: embeddings(),
	}
	for _, h := range hosts {
		g.allowHosts[strings.ToLower(strings.TrimSpace(h))] = true
	}
	return g, nil
}

// dialContext marks connections to allow-listed host names before dialling.
func (g *guard) dialContext(d *net.Dialer) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err == nil && g.allowHosts[strings.ToLower(host)] {
			ctx = context.WithValue(ctx, allowedHostKey{}, true)
		}
		return d.DialContext(ctx, network, addr)
	}
}

// control runs on every connection attempt with the resolved address,
// after the socket is made and before it connects, so a refused address is
// never sent a packet.
func (g *guard) control(ctx context.Context, network, address string, _ syscall.RawConn) error {
	if allowed, _ := ctx.Value(allowedHostKey{}).(bool); !allowed {
		ap, err := netip.ParseAddrPort(address)
		if err != nil {
			return fmt.Errorf("%w: cannot parse %s", ErrBlockedAddress, address)
		}
		if err := g.check(ap.Addr()); err != nil {
			return err
		}
	}
	if g.fence != nil {
		return g.fence(address)
	}
	return nil
}

// check refuses special-purpose addresses that no allowNetworks entry
// covers. An IPv4-mapped address is judged as its IPv4 address. An address
// that carries an IPv4 address (NAT64, 6to4, IPv4-compatible) is refused
// unless both the IPv4 address and the address itself are public or
// allowed. The allowed path does not allocate.
func (g *guard) check(ip netip.Addr) error {
	if !ip.IsValid() {
		return fmt.Errorf("%w: no address", ErrBlockedAddress)
	}
	ip = ip.Unmap().WithZone("")
	kind := ""
	if e, v4, ok := g.embedded(ip); ok {
		if g.special.SafeAddr(v4) != nil {
			return fmt.Errorf("%w: %s embeds %s (%s), which is %s; allow it with allowNetworks",
				ErrBlockedAddress, ip, v4, e.name, describe(v4, ""))
		}
		kind = e.name
	}
	if g.special.SafeAddr(ip) != nil {
		return fmt.Errorf("%w: %s is %s; allow it with allowNetworks", ErrBlockedAddress, ip, describe(ip, kind))
	}
	return nil
}

// embedded returns the IPv4 address ip carries, and the form carrying it.
func (g *guard) embedded(ip netip.Addr) (embedding, netip.Addr, bool) {
	if !ip.Is6() {
		return embedding{}, netip.Addr{}, false
	}
	for _, e := range g.embeddings {
		if e.prefix.Contains(ip) && !e.except.Contains(ip) {
			b := ip.As16()
			return e, netip.AddrFrom4([4]byte(b[e.at : e.at+4])), true
		}
	}
	return embedding{}, netip.Addr{}, false
}

// describe says where a refused address sits, for the error: the
// special-purpose range from the registry that holds it, or that it is
// outside IPv6 global unicast, and what kind of address it is. It runs only
// on refusals.
func describe(ip netip.Addr, kind string) string {
	if kind == "" {
		kind = kindOf(ip)
	}
	if ip.Is6() && !ssrf.IPv6GlobalUnicast.Contains(ip) {
		where := fmt.Sprintf("outside %s, the IPv6 global unicast range", ssrf.IPv6GlobalUnicast)
		if kind == "" {
			return where
		}
		return where + " (" + kind + ")"
	}
	denied := ssrf.IPv4DeniedPrefixes
	if ip.Is6() {
		denied = ssrf.IPv6DeniedPrefixes
	}
	if kind == "" {
		kind = "special-purpose"
	}
	for _, p := range denied {
		if p.Contains(ip) {
			return fmt.Sprintf("in %s (%s)", p, kind)
		}
	}
	return "a " + kind + " address"
}

// kindOf names the common kinds of non-public address, or returns "".
func kindOf(ip netip.Addr) string {
	switch {
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsPrivate():
		return "private"
	case ip.IsLinkLocalUnicast():
		return "link-local"
	case ip.IsMulticast():
		return "multicast"
	}
	return ""
}
