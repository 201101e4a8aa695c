package httpgate

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// browserGuard keeps a web page the operator happens to open from acting
// on orchd through the operator's browser (docs/security.md, "Browsers").
// Two requests are refused before any route sees them:
//
//   - DNS rebinding: a page whose host name the attacker points at orchd's
//     address, so the browser takes orchd for the page's own origin. Such
//     a request names the attacker's host in Host, where orchd's callers
//     name one of orchd's own (ownHost).
//   - Cross-site requests that change something (POST and the like): the
//     browser says where they come from in Sec-Fetch-Site or Origin, and
//     anything but orchd's own origins is refused.
//
// Only requests a browser could send on its own are checked: every
// request to a daemon without authentication, and on a daemon with it
// those that carry no credential in a header (Authorization or
// auth.apiKeyHeader), as a browser adds a client certificate and the
// console's cookie by itself but never a header. The agent card (public,
// served to any origin) and the push webhook (each delegation's own token
// in a header) are not checked.
type browserGuard struct {
	// hosts are orchd's own host names besides IP addresses and
	// localhost, in lower case: the hosts of listen, agent.url and
	// delegation.pushURL, and http.allowedHosts.
	hosts map[string]bool
	// origin refuses state-changing requests from other origins: those a
	// browser marks cross-site or same-site, and, from browsers that do
	// not send Sec-Fetch-Site, those whose Origin is neither the Host they
	// name (which hosts allowed) nor one of orchd's advertised origins.
	origin *http.CrossOriginProtection
	// authenticates is set when the daemon authenticates callers; then
	// apiKeyHeader, if set, carries credentials as Authorization does.
	authenticates bool
	apiKeyHeader  string
	log           *slog.Logger
}

// newBrowserGuard returns the guard of a daemon configured with cfg.
func newBrowserGuard(cfg Config, authenticates bool, log *slog.Logger) (*browserGuard, error) {
	b := &browserGuard{hosts: map[string]bool{}, origin: http.NewCrossOriginProtection(), authenticates: authenticates,
		apiKeyHeader: cfg.Auth.APIKeyHeader, log: log}
	if host, _, err := net.SplitHostPort(cfg.Listen); err == nil && !unspecifiedHost(host) {
		b.hosts[hostName(host)] = true
	}
	for _, h := range cfg.HTTP.AllowedHosts {
		b.hosts[hostName(h)] = true
	}
	for _, s := range []struct{ setting, url string }{{"agent.url", cfg.Agent.URL}, {"delegation.pushURL", cfg.Delegation.PushURL}} {
		if s.url == "" {
			continue
		}
		u, err := url.Parse(s.url)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("config: %s %q: want an absolute http or https URL", s.setting, s.url)
		}
		b.hosts[hostName(u.Hostname())] = true
		if err := b.origin.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
			return nil, fmt.Errorf("config: %s %q: %w", s.setting, s.url, err)
		}
	}
	b.origin.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.refuse(w, r, "cross-origin request refused: a browser sent it for a page of another site (Origin "+quoteCut(r.Header.Get("Origin"))+
			"); orchd takes state-changing requests from browsers only from its own pages")
	}))
	return b, nil
}

// hostName is a host, or a Host header's host without its port, as hosts
// keeps it: lower case, without brackets or a trailing dot.
func hostName(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// ownHost reports whether a request's Host is one of orchd's names. An IP
// address is: a browser sends one only to the address it names, so no
// other site's page can be rebound to it; so are localhost, which
// browsers resolve to loopback themselves, and an empty Host (HTTP/1.0,
// which no browser speaks).
func (b *browserGuard) ownHost(host string) bool {
	h := hostName(host)
	if h == "" || h == "localhost" || b.hosts[h] {
		return true
	}
	_, err := netip.ParseAddr(h)
	return err == nil
}

// checks reports whether r is a request a browser could have sent on
// its own, which the guard checks.
func (b *browserGuard) checks(r *http.Request) bool {
	if r.URL.Path == a2asrv.WellKnownAgentCardPath || strings.HasPrefix(r.URL.Path, pathPush+"/") {
		return false
	}
	if !b.authenticates {
		return true
	}
	return r.Header.Get("Authorization") == "" && (b.apiKeyHeader == "" || r.Header.Get(b.apiKeyHeader) == "")
}

// wrap refuses, before next sees them, the requests of a page of another
// site or of a host name rebound to orchd.
func (b *browserGuard) wrap(next http.Handler) http.Handler {
	checked := b.origin.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !b.checks(r) {
			next.ServeHTTP(w, r)
			return
		}
		if !b.ownHost(r.Host) {
			b.refuse(w, r, "Host "+quoteCut(r.Host)+" is not a name of this orchd, so a browser may have been pointed at it by another site: "+
				"requests must name an IP address, localhost, or the host of listen, agent.url or delegation.pushURL; "+
				"add the names callers use to http.allowedHosts")
			return
		}
		checked.ServeHTTP(w, r)
	})
}

// refuse answers a refused request with 403: in the error shape of the
// A2A binding its path names (a2apaths.go), else with the API's.
func (b *browserGuard) refuse(w http.ResponseWriter, r *http.Request, msg string) {
	b.log.InfoContext(r.Context(), "browser request refused", "method", r.Method, "path", r.URL.Path, "reason", msg)
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close") // the body is left unread
	}
	if !strings.HasPrefix(r.URL.Path, pathA2A) {
		writeAPIError(w, &apiError{status: http.StatusForbidden, code: "permission_denied", msg: msg})
		return
	}
	if bd := bindingOf(r.URL.Path); bd.jsonRPC {
		writeJSONRPCError(w, http.StatusForbidden, nil, jsonRPCUnauthorized, reasonUnauthorized, msg)
	} else {
		writeRESTError(w, http.StatusForbidden, "PERMISSION_DENIED", reasonUnauthorized, msg, bd.legacy)
	}
}

// The JSON-RPC code and A2A reason of a refused browser request: A2A's
// unauthorized error.
const (
	jsonRPCUnauthorized = -31403
	reasonUnauthorized  = "UNAUTHORIZED"
)

// quoteCut quotes a value a client sent, cut to 100 bytes, for a
// refusal's message.
func quoteCut(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return fmt.Sprintf("%q", s)
}
