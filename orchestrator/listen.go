package orchestrator

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
)

// checkAdvertised refuses a configuration whose Agent Card would advertise
// an address no other agent can reach. With agent.url empty the card's
// interface URLs are built from the listen address, and a host that binds
// every interface (0.0.0.0, ::, or none at all) names no host to call;
// agent.url itself must not name one either.
func checkAdvertised(listen, agentURL string) error {
	if agentURL != "" {
		u, err := url.Parse(agentURL)
		if err != nil {
			return fmt.Errorf("agent.url %q: %w", agentURL, err)
		}
		if unspecifiedHost(u.Hostname()) {
			return fmt.Errorf("agent.url %q names no host other agents can reach: set it to the URL they reach this orchd at, e.g. http://orchd.example.com:8080", agentURL)
		}
		return nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("listen %q: %w", listen, err)
	}
	if unspecifiedHost(host) {
		return fmt.Errorf("listen %s binds every interface, so orchd's agent card has no address to advertise: set agent.url to the URL other agents reach this orchd at, e.g. http://orchd.example.com:8080", listen)
	}
	return nil
}

// unspecifiedHost reports whether host, from a listen address or a URL,
// is empty or an unspecified IP address (0.0.0.0, ::, ::ffff:0.0.0.0).
func unspecifiedHost(host string) bool {
	if host == "" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsUnspecified()
}

// beyondLoopback reports whether a listener bound to addr can be reached
// from other machines: any address but a loopback one.
func beyondLoopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return !ok || !tcp.IP.IsLoopback()
}

// checkExposed refuses to serve beyond loopback with no authentication
// configured, unless the operator said so (--insecure-no-auth); then it
// says in the log that anyone who reaches the address may do anything.
func (d *Daemon) checkExposed(addr net.Addr) error {
	if !beyondLoopback(addr) || d.authn != nil {
		return nil
	}
	if !d.cfg.InsecureNoAuth {
		return fmt.Errorf("listen %s: reachable beyond loopback with no authentication configured: set auth.tokens, auth.jwt or auth.mtls (docs/security.md), listen on 127.0.0.1, or pass --insecure-no-auth when an authenticating proxy or a private network stands in front", addr)
	}
	d.log.Warn("listening beyond loopback with no authentication (--insecure-no-auth): anyone who can reach this address can register agents, delegate work and cancel or steer delegations",
		"addr", addr.String())
	return nil
}
