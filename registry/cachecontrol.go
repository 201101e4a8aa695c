package registry

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// cachePolicy is what a response's headers say about storing and reusing
// it (RFC 9111 §5.2.2).
type cachePolicy struct {
	noStore        bool
	noCache        bool
	mustRevalidate bool
	// lifetime is the freshness lifetime; hasLifetime is false when the
	// response gives none and the default TTL applies.
	lifetime    time.Duration
	hasLifetime bool
	// age is the Age header: how old the response already was.
	age time.Duration
	// swr and sie are stale-while-revalidate and stale-if-error, or -1
	// when absent.
	swr, sie time.Duration
}

// parseCachePolicy reads Cache-Control, Expires, Date and Age. Unknown
// directives are ignored and malformed values disregarded, as RFC 9111 asks.
func parseCachePolicy(h http.Header, now time.Time) cachePolicy {
	p := cachePolicy{swr: -1, sie: -1}
	var maxAge, sMaxAge time.Duration = -1, -1
	for _, line := range h.Values("Cache-Control") {
		for _, d := range strings.Split(line, ",") {
			name, val, _ := strings.Cut(strings.TrimSpace(d), "=")
			val = strings.Trim(strings.TrimSpace(val), `"`)
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "no-store":
				p.noStore = true
			case "no-cache":
				p.noCache = true
			case "must-revalidate", "proxy-revalidate":
				p.mustRevalidate = true
			case "max-age":
				maxAge = seconds(val)
			case "s-maxage":
				sMaxAge = seconds(val)
			case "stale-while-revalidate":
				p.swr = seconds(val)
			case "stale-if-error":
				p.sie = seconds(val)
			}
		}
	}
	switch {
	case p.noCache:
		p.lifetime, p.hasLifetime = 0, true
	case sMaxAge >= 0: // orchd is a cache shared by all its callers
		p.lifetime, p.hasLifetime = sMaxAge, true
	case maxAge >= 0:
		p.lifetime, p.hasLifetime = maxAge, true
	case h.Get("Expires") != "":
		// An invalid Expires, such as "0", means already expired.
		exp, err := http.ParseTime(h.Get("Expires"))
		date, dErr := http.ParseTime(h.Get("Date"))
		if dErr != nil {
			date = now
		}
		p.hasLifetime = true
		if err == nil && exp.After(date) {
			p.lifetime = exp.Sub(date)
		}
	}
	if a := seconds(h.Get("Age")); a > 0 {
		p.age = a
	}
	return p
}

// seconds parses a delta-seconds value; -1 when malformed.
func seconds(s string) time.Duration {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	const maxDelta = 1 << 31 // RFC 9111 §1.2.2
	return time.Duration(min(n, maxDelta)) * time.Second
}

// hasDirectives reports whether a 304 carries freshness information that
// replaces the stored response's.
func hasDirectives(h http.Header) bool {
	return h.Get("Cache-Control") != "" || h.Get("Expires") != ""
}
