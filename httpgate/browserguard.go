package httpgate

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
)

// BrowserGuard keeps a web page the operator happens to open from acting
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
// console's cookie by itself but never a header. The paths GuardConfig.Open
// lists (the agent card, public and served to any origin; the push
// webhook, each delegation's own token in a header) are not checked.
type BrowserGuard struct {
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
	// open and openPrefixes are the paths, and the path prefixes, the
	// guard does not check (GuardConfig.Open).
	open, openPrefixes []string
	forbid             func(w http.ResponseWriter, r *http.Request, msg string) bool
	log                *slog.Logger
}

// GuardConfig is what a BrowserGuard knows of the daemon it guards.
type GuardConfig struct {
	// Hosts are orchd's own host names besides IP addresses and
	// localhost: the listen address's host and http.allowedHosts.
	Hosts []string
	// Sites are the base URLs orchd is reached at, each with the setting
	// that names it (agent.url, delegation.pushURL): their hosts are
	// orchd's own, and their origins may post to it.
	Sites []Site
	// Authenticates is set when the daemon authenticates callers; then
	// APIKeyHeader, if set, carries credentials as Authorization does.
	Authenticates bool
	APIKeyHeader  string
	// Open lists the paths the guard does not check: a path, or a
	// prefix when it ends in "/".
	Open []string
	// Forbid answers a refused request in the error shape of the front
	// its path is for, and reports whether it did; nil, or false, leaves
	// the answer to the plain HTTP error (403, ErrorBody).
	Forbid func(w http.ResponseWriter, r *http.Request, msg string) bool
	// Log receives the refusals; nil discards them.
	Log *slog.Logger
}

// Site is a base URL orchd is reached at, and the setting that names it.
type Site struct {
	Setting, URL string
}

// NewBrowserGuard returns the guard cfg describes.
func NewBrowserGuard(cfg GuardConfig) (*BrowserGuard, error) {
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &BrowserGuard{hosts: map[string]bool{}, origin: http.NewCrossOriginProtection(), authenticates: cfg.Authenticates,
		apiKeyHeader: cfg.APIKeyHeader, forbid: cfg.Forbid, log: log}
	for _, p := range cfg.Open {
		if strings.HasSuffix(p, "/") {
			b.openPrefixes = append(b.openPrefixes, p)
		} else {
			b.open = append(b.open, p)
		}
	}
	for _, h := range cfg.Hosts {
		b.hosts[hostName(h)] = true
	}
	for _, s := range cfg.Sites {
		if s.URL == "" {
			continue
		}
		u, err := url.Parse(s.URL)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return nil, fmt.Errorf("config: %s %q: want an absolute http or https URL", s.Setting, s.URL)
		}
		b.hosts[hostName(u.Hostname())] = true
		if err := b.origin.AddTrustedOrigin(u.Scheme + "://" + u.Host); err != nil {
			return nil, fmt.Errorf("config: %s %q: %w", s.Setting, s.URL, err)
		}
	}
	b.origin.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.refuse(w, r, "cross-origin request refused: a browser sent it for a page of another site (Origin "+QuoteCut(r.Header.Get("Origin"))+
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
func (b *BrowserGuard) ownHost(host string) bool {
	h := hostName(host)
	if h == "" || h == "localhost" || b.hosts[h] {
		return true
	}
	_, err := netip.ParseAddr(h)
	return err == nil
}

// Origin is the guard's protection from other sites' posts, which knows
// orchd's own origins, for fronts that check requests themselves.
func (b *BrowserGuard) Origin() *http.CrossOriginProtection { return b.origin }

// checks reports whether r is a request a browser could have sent on
// its own, which the guard checks.
func (b *BrowserGuard) checks(r *http.Request) bool {
	if slices.Contains(b.open, r.URL.Path) {
		return false
	}
	for _, p := range b.openPrefixes {
		if strings.HasPrefix(r.URL.Path, p) {
			return false
		}
	}
	if !b.authenticates {
		return true
	}
	return r.Header.Get("Authorization") == "" && (b.apiKeyHeader == "" || r.Header.Get(b.apiKeyHeader) == "")
}

// Wrap refuses, before next sees them, the requests of a page of another
// site or of a host name rebound to orchd.
func (b *BrowserGuard) Wrap(next http.Handler) http.Handler {
	checked := b.origin.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !b.checks(r) {
			next.ServeHTTP(w, r)
			return
		}
		if !b.ownHost(r.Host) {
			b.refuse(w, r, "Host "+QuoteCut(r.Host)+" is not a name of this orchd, so a browser may have been pointed at it by another site: "+
				"requests must name an IP address, localhost, or the host of listen, agent.url or delegation.pushURL; "+
				"add the names callers use to http.allowedHosts")
			return
		}
		checked.ServeHTTP(w, r)
	})
}

// refuse answers a refused request with 403: in the error shape of the
// front its path is for (GuardConfig.Forbid), else with ErrorBody.
func (b *BrowserGuard) refuse(w http.ResponseWriter, r *http.Request, msg string) {
	b.log.InfoContext(r.Context(), "browser request refused", "method", r.Method, "path", r.URL.Path, "reason", msg)
	if r.ContentLength != 0 {
		w.Header().Set("Connection", "close") // the body is left unread
	}
	if b.forbid != nil && b.forbid(w, r, msg) {
		return
	}
	WriteError(w, &Error{Status: http.StatusForbidden, Code: "permission_denied", Msg: msg})
}
