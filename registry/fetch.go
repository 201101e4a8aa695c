package registry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/orchd/orchd/capability"
)

// Well-known card paths: A2A 0.3 and later, and the 0.2 path tried when the
// first answers 404 or 410.
const (
	WellKnownPath       = "/.well-known/agent-card.json"
	LegacyWellKnownPath = "/.well-known/agent.json"
)

// fetcher performs guarded card fetches.
type fetcher struct {
	cfg    Config
	client *http.Client
}

// fetched is one card response.
type fetched struct {
	cardURL     string
	legacy      bool
	notModified bool
	raw         []byte
	etag        string
	lastMod     string
	policy      cachePolicy
	header      http.Header
	at          time.Time
}

// NewTransport returns an HTTP transport that applies the SSRF guard of
// cfg (AllowNetworks, AllowHosts) to every connection, for talking to
// agents whose addresses come from their cards. It sets no response
// timeout, so streams last as long as their tasks; bound calls with
// contexts.
//
// Each connection reads and writes through buffers of connBufferSize, half
// net/http's default: an A2A request's headers fit, larger bodies and
// streams are copied past the buffer anyway, and an orchd with a thousand
// delegations in flight holds a thousand connections.
func NewTransport(cfg Config) (*http.Transport, error) {
	cfg = cfg.withDefaults()
	g, err := newGuard(cfg.AllowNetworks, cfg.AllowHosts)
	if err != nil {
		return nil, err
	}
	g.fence = cfg.dialFence
	dialer := &net.Dialer{Timeout: cfg.Timeout, ControlContext: g.control}
	return &http.Transport{
		Proxy:               nil, // a proxy would dial on our behalf and bypass the guard
		DialContext:         g.dialContext(dialer),
		TLSClientConfig:     &tls.Config{RootCAs: cfg.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: cfg.Timeout,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     idleConnTimeout,
		ForceAttemptHTTP2:   true,
		ReadBufferSize:      connBufferSize,
		WriteBufferSize:     connBufferSize,
	}, nil
}

// connBufferSize is the size of each agent connection's read and write
// buffers (NewTransport).
const connBufferSize = 2 << 10

// idleConnTimeout is how long an agent connection stays among the idle
// ones: under the 60 s an orchd downstream keeps an idle connection
// (http.idleTimeout), so an orchd hop does not send a request on a
// connection just as the next orchd closes it, which fails the request
// with EOF unless it is idempotent. net/http's default is 90 s.
const idleConnTimeout = 50 * time.Second

func newFetcher(cfg Config) (*fetcher, error) {
	transport, err := NewTransport(cfg)
	if err != nil {
		return nil, err
	}
	transport.ResponseHeaderTimeout = cfg.Timeout
	transport.MaxIdleConnsPerHost = 4
	client := &http.Client{
		Transport: transport,
		Timeout:   cfg.Timeout,
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if cfg.MaxRedirects < 0 || len(via) > cfg.MaxRedirects {
				return fmt.Errorf("more than %d redirects", max(cfg.MaxRedirects, 0))
			}
			prev := via[len(via)-1].URL
			if prev.Scheme == "https" && req.URL.Scheme != "https" {
				return fmt.Errorf("refusing redirect from %s to %s: it downgrades https", prev, req.URL)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("refusing redirect to %s", req.URL)
			}
			return nil
		},
	}
	return &fetcher{cfg: cfg, client: client}, nil
}

// close releases idle connections.
func (f *fetcher) close() { f.client.CloseIdleConnections() }

// cardURLs returns the URLs to try for an agent's base URL. A URL that
// already names a .json document is used as it is.
func cardURLs(base string) (primary, legacy string) {
	if strings.HasSuffix(strings.ToLower(base), ".json") {
		return base, ""
	}
	return base + WellKnownPath, base + LegacyWellKnownPath
}

// fetch GETs the card for base. With prev set it revalidates prev's card
// URL using its validators; otherwise it tries the well-known path and then
// the 0.2 path.
func (f *fetcher) fetch(ctx context.Context, base string, prev *entry) (*fetched, error) {
	if prev != nil && prev.cardURL != "" {
		return f.get(ctx, prev.cardURL, prev.legacy, prev)
	}
	primary, legacy := cardURLs(base)
	res, err := f.get(ctx, primary, false, nil)
	var fe *FetchError
	if legacy != "" && errors.As(err, &fe) && (fe.StatusCode == http.StatusNotFound || fe.StatusCode == http.StatusGone) {
		res, lErr := f.get(ctx, legacy, true, nil)
		if lErr == nil {
			return res, nil
		}
		return nil, fmt.Errorf("%w (and %s: %w)", err, LegacyWellKnownPath, lErr)
	}
	return res, err
}

func (f *fetcher) get(ctx context.Context, cardURL string, legacy bool, prev *entry) (*fetched, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cardURL, nil)
	if err != nil {
		return nil, &FetchError{URL: cardURL, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", f.cfg.UserAgent)
	if prev != nil && prev.profile != nil {
		if prev.etag != "" {
			req.Header.Set("If-None-Match", prev.etag)
		}
		if prev.lastMod != "" {
			req.Header.Set("If-Modified-Since", prev.lastMod)
		}
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return nil, &FetchError{URL: cardURL, Err: err}
	}
	defer resp.Body.Close()
	now := f.cfg.Now()
	res := &fetched{
		cardURL: cardURL, legacy: legacy, header: resp.Header, at: now,
		etag: resp.Header.Get("ETag"), lastMod: resp.Header.Get("Last-Modified"),
		policy: parseCachePolicy(resp.Header, now),
	}
	switch {
	case resp.StatusCode == http.StatusNotModified && prev != nil && prev.profile != nil:
		res.notModified = true
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return res, nil
	case resp.StatusCode != http.StatusOK:
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, &FetchError{URL: cardURL, StatusCode: resp.StatusCode}
	}
	if resp.ContentLength > f.cfg.MaxCardBytes {
		return nil, &FetchError{URL: cardURL, Err: fmt.Errorf("%w: Content-Length %d is over %d bytes", ErrCardTooLarge, resp.ContentLength, f.cfg.MaxCardBytes)}
	}
	res.raw, err = io.ReadAll(io.LimitReader(resp.Body, f.cfg.MaxCardBytes+1))
	if err != nil {
		return nil, &FetchError{URL: cardURL, Err: fmt.Errorf("read body: %w", err)}
	}
	if int64(len(res.raw)) > f.cfg.MaxCardBytes {
		return nil, &FetchError{URL: cardURL, Err: fmt.Errorf("%w: body is over %d bytes", ErrCardTooLarge, f.cfg.MaxCardBytes)}
	}
	return res, nil
}

// build turns a fetched card into a profile.
func (f *fetcher) build(res *fetched, id, base string) (*capability.Profile, error) {
	p, err := buildCard(f.cfg, res.raw, id, base, res.legacy)
	if err != nil {
		return nil, fmt.Errorf("card %s: %w", res.cardURL, err)
	}
	return p, nil
}

// buildCard reads a card the way every card of the registry is read,
// fetched or saved.
func buildCard(cfg Config, raw []byte, id, base string, legacy bool) (*capability.Profile, error) {
	return capability.Build(raw, capability.Options{
		ID: id, URL: base, Legacy: legacy,
		MaxBytes: int(cfg.MaxCardBytes), Deprecated: cfg.Deprecated, Client: cfg.Client,
	})
}

// NormalizeURL checks an agent base URL and returns its canonical form:
// http or https, a host, no credentials, query or fragment, lower-case
// scheme and host, no trailing slash.
//
// A URL written without its scheme ("127.0.0.1:9001", "localhost:9001/a")
// is refused with a hint naming the http:// URL it probably means. The
// errors quote the URL with any user name or password replaced by "xxxxx",
// as they reach logs and API answers.
func NormalizeURL(raw string) (string, error) {
	trimmed := strings.TrimSpace(raw)
	shown := redactUserinfo(raw)
	u, err := url.Parse(trimmed)
	if !strings.Contains(trimmed, "://") && (err != nil || (u.Scheme != "http" && u.Scheme != "https")) {
		if h, herr := url.Parse("http://" + trimmed); herr == nil && h.Host != "" && h.User == nil {
			return "", fmt.Errorf("%w %q has no scheme; did you mean %q?", ErrInvalidURL, raw, "http://"+trimmed)
		}
	}
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without url's "parse <the URL again>:"
		}
		return "", fmt.Errorf("%w %q: %w", ErrInvalidURL, shown, err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%w %q: scheme must be http or https", ErrInvalidURL, shown)
	case u.Host == "":
		return "", fmt.Errorf("%w %q: no host", ErrInvalidURL, shown)
	case u.User != nil:
		return "", fmt.Errorf("%w %q: credentials in the URL are not accepted", ErrInvalidURL, shown)
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("%w %q: query and fragment are not accepted", ErrInvalidURL, shown)
	}
	u.Host = strings.ToLower(u.Host)
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u.String(), nil
}

// redactUserinfo replaces what raw's authority holds before "@", a user
// name or a password, with "xxxxx".
func redactUserinfo(raw string) string {
	scheme, rest := "", raw
	if i := strings.Index(raw, "://"); i >= 0 {
		scheme, rest = raw[:i+3], raw[i+3:]
	}
	authority := rest
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		authority = rest[:i]
	}
	at := strings.LastIndex(authority, "@")
	if at < 0 {
		return raw
	}
	return scheme + "xxxxx" + rest[at:]
}
