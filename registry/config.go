package registry

import (
	"crypto/x509"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"time"

	"github.com/orchd/orchd/capability"
)

// Config tunes the registry. Every field's zero value selects the default
// documented on it, so Config{} is a safe, strict configuration: it refuses
// card URLs that resolve to loopback, private or other special-purpose
// addresses.
type Config struct {
	// Timeout bounds one card fetch, redirects included. Default 10s.
	Timeout time.Duration
	// MaxCardBytes bounds a card body. Default 1 MiB.
	MaxCardBytes int64
	// MaxRedirects bounds the redirects followed per fetch. Default 3; a
	// negative value follows none.
	MaxRedirects int
	// AllowNetworks lists CIDR prefixes (or single addresses) card fetches
	// may reach even though they are special-purpose (loopback, private,
	// link-local, multicast and the rest of the IANA special-purpose
	// registries). Empty allows none of those. An entry in IPv4-mapped form
	// means its IPv4 network. An address carrying an IPv4 address (NAT64,
	// 6to4, IPv4-compatible) needs both it and the IPv4 address allowed or
	// public.
	AllowNetworks []string
	// AllowHosts lists host names card fetches may reach whatever they
	// resolve to.
	AllowHosts []string
	// UserAgent is sent with card fetches. Default "orchd".
	UserAgent string
	// RootCAs verifies https card servers; nil means the system roots.
	RootCAs *x509.CertPool

	// MaxEntries bounds the card cache (an LRU). Default 4096. Registered
	// agents keep their profile when their cache entry is evicted; they
	// only lose their validators and are fetched in full next time.
	MaxEntries int
	// DefaultTTL is the freshness lifetime of a card whose response has
	// neither Cache-Control max-age nor Expires. Default 5m.
	DefaultTTL time.Duration
	// MinRefreshInterval is the shortest time between two revalidations of
	// one card, so a card sent with no-cache or max-age=0 is not fetched in
	// a loop. Default 1s.
	MinRefreshInterval time.Duration
	// StaleWhileRevalidate is how long past expiry an ad-hoc lookup may be
	// served while it is revalidated in the background, when the response
	// gives no stale-while-revalidate. Default 1m.
	StaleWhileRevalidate time.Duration
	// StaleIfError is how long past expiry an ad-hoc lookup may be served
	// when revalidation fails, when the response gives no stale-if-error.
	// Default 24h. Registered agents always keep their last good card.
	StaleIfError time.Duration
	// MinBackoff and MaxBackoff bound the wait before retrying a card that
	// failed: it doubles from MinBackoff with each failure in a row.
	// Defaults 1s and 5m.
	MinBackoff time.Duration
	MaxBackoff time.Duration
	// UnhealthyAfter is how many failed refreshes in a row mark an agent
	// unhealthy. Default 3.
	UnhealthyAfter int
	// BreakerAfter is how many calls in a row to an agent's A2A endpoint
	// must fail through the agent's fault to open its circuit breaker
	// (see [Breaker]). Default 3; a negative value turns breakers off.
	BreakerAfter int
	// BreakerMinBackoff and BreakerMaxBackoff bound how long an open
	// breaker refuses new work: BreakerMinBackoff the first time, doubling
	// each time it opens again without a call succeeding in between, up to
	// BreakerMaxBackoff. A call trying the agent again that has not ended
	// within BreakerMaxBackoff is given up on. Defaults 1s and 1m.
	BreakerMinBackoff time.Duration
	BreakerMaxBackoff time.Duration
	// DriftHistory is how many drift records each agent keeps. Default 16.
	DriftHistory int
	// RefreshInterval is how often the refresher looks for expired agents.
	// Default 1s.
	RefreshInterval time.Duration
	// RefreshConcurrency bounds concurrent background refreshes. Default 4.
	RefreshConcurrency int

	// RequireSignatures refuses agents whose card is unsigned or carries
	// no signature that verifies: Add and AddOrRetry fail with
	// ErrSignature, and a refresh that fetches such a card fails, keeping
	// the last good card (the failure counts towards UnhealthyAfter and is
	// recorded as drift).
	RequireSignatures bool
	// CardKeyURLs lists the JWKS URLs a card signature's jku may name:
	// only those are fetched (through the SSRF guard, within Timeout and
	// 256 KiB, cached for 5m), and their keys are trusted for every agent.
	// Empty follows no jku.
	CardKeyURLs []string

	// Deprecated adds capability names or extension URIs to the Tier 3
	// (deprecated) list; see capability.Options.
	Deprecated []string
	// Client is what orchd's client speaks; nil means
	// capability.DefaultClient().
	Client capability.ClientSupport

	// Now returns the current time; nil means time.Now. Tests set it to
	// move time without sleeping.
	Now func() time.Time

	// TracerProvider records a span per card fetch; nil records nothing.
	TracerProvider trace.TracerProvider
	// MeterProvider records the card cache's metrics; nil records nothing.
	MeterProvider metric.MeterProvider

	// Store keeps the registered agents, with their last good cards,
	// validators and drift history, so a restart serves them without the
	// network and several processes sharing the store see each other's
	// changes; see [AgentStore]. nil keeps nothing: agents added through
	// Add are forgotten on restart.
	Store AgentStore
	// StoreTimeout bounds each call to Store. Default 5s.
	StoreTimeout time.Duration

	// dialFence, when set, runs on every connection the SSRF guard allows,
	// before it is made; an error refuses it. Tests set it to refuse all
	// but loopback, so a guard that wrongly lets an address through cannot
	// send traffic off the machine.
	dialFence func(address string) error
}

// withDefaults returns c with zero fields replaced by their defaults.
func (c Config) withDefaults() Config {
	set := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	set(&c.Timeout, 10*time.Second)
	set(&c.DefaultTTL, 5*time.Minute)
	set(&c.MinRefreshInterval, time.Second)
	set(&c.StaleWhileRevalidate, time.Minute)
	set(&c.StaleIfError, 24*time.Hour)
	set(&c.MinBackoff, time.Second)
	set(&c.MaxBackoff, 5*time.Minute)
	set(&c.RefreshInterval, time.Second)
	set(&c.BreakerMinBackoff, time.Second)
	set(&c.BreakerMaxBackoff, time.Minute)
	set(&c.StoreTimeout, 5*time.Second)
	if c.MaxCardBytes <= 0 {
		c.MaxCardBytes = capability.DefaultMaxBytes
	}
	if c.MaxRedirects == 0 {
		c.MaxRedirects = 3
	}
	if c.UserAgent == "" {
		c.UserAgent = "orchd"
	}
	if c.MaxEntries <= 0 {
		c.MaxEntries = 4096
	}
	if c.UnhealthyAfter <= 0 {
		c.UnhealthyAfter = 3
	}
	if c.BreakerAfter == 0 {
		c.BreakerAfter = 3
	}
	if c.DriftHistory <= 0 {
		c.DriftHistory = 16
	}
	if c.RefreshConcurrency <= 0 {
		c.RefreshConcurrency = 4
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// backoff returns the wait before retry number n (n >= 1).
func (c Config) backoff(n int) time.Duration { return doubling(c.MinBackoff, c.MaxBackoff, n) }
