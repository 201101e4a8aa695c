package registry

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
)

// guard refuses connections to addresses a card URL must not reach. It
// checks the address actually dialled, after DNS resolution, so a name that
// resolves to a private address (or rebinds to one) is refused too.
type guard struct {
	allowNets  []netip.Prefix
	allowHosts map[string]bool
}

type allowedHostKey struct{}

func newGuard(nets, hosts []string) (*guard, error) {
	g := &guard{allowHosts: map[string]bool{}}
	for _, n := range nets {
		p, err := netip.ParsePrefix(strings.TrimSpace(n))
		if err != nil {
			addr, aErr := netip.ParseAddr(strings.TrimSpace(n))
			if aErr != nil {
				return nil, fmt.Errorf("allowNetworks %q: not a CIDR prefix or address", n)
			}
			p = netip.PrefixFrom(addr, addr.BitLen())
		}
		g.allowNets = append(g.allowNets, p.Masked())
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

// control runs on every connection attempt with the resolved address.
func (g *guard) control(ctx context.Context, network, address string, _ syscall.RawConn) error {
	if allowed, _ := ctx.Value(allowedHostKey{}).(bool); allowed {
		return nil
	}
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot parse %s", ErrBlockedAddress, address)
	}
	return g.check(ap.Addr())
}

// check refuses non-public addresses that no allow-list entry covers.
func (g *guard) check(ip netip.Addr) error {
	ip = ip.Unmap()
	for _, p := range g.allowNets {
		if p.Contains(ip) {
			return nil
		}
	}
	var kind string
	switch {
	case ip.IsLoopback():
		kind = "loopback"
	case ip.IsPrivate():
		kind = "private"
	case ip.IsMulticast():
		kind = "multicast"
	case ip.IsLinkLocalUnicast():
		kind = "link-local"
	case ip.IsUnspecified():
		kind = "unspecified"
	default:
		return nil
	}
	return fmt.Errorf("%w: %s is a %s address (allow it with allowNetworks)", ErrBlockedAddress, ip, kind)
}
