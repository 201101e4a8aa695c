package credentials

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/orchd/orchd/capability"
)

// DefaultTokenTimeout bounds each request to a token endpoint unless
// ClientsConfig.TokenTimeout says otherwise.
const DefaultTokenTimeout = 10 * time.Second

// maxAgents bounds how many agents' credential state Clients keeps; the
// least recently used is rebuilt when needed again.
const maxAgents = 1024

// ClientsConfig says how [Clients] builds agents' transports.
type ClientsConfig struct {
	// Base is the transport under every agent's: orchd's guarded transport
	// (registry.NewTransport), so its SSRF rules hold. It is cloned, once
	// per agent Config, for an agent with a TLS client certificate or CA,
	// which needs it to be an *http.Transport. nil means
	// http.DefaultTransport.
	Base http.RoundTripper
	// Wrap, when set, wraps each agent's transport and the transport of
	// its token requests, outermost: telemetry.Telemetry.Transport, so
	// calls are traced as before. The credentials are attached inside it,
	// and spans never see them.
	Wrap func(http.RoundTripper) http.RoundTripper
	// TokenTimeout bounds each token request. Default DefaultTokenTimeout.
	TokenTimeout time.Duration
	// Log receives the credential events worth noting, never a secret.
	// nil discards them.
	Log *slog.Logger
	// Now returns the current time, for token expiry and file checks; nil
	// means time.Now.
	Now func() time.Time
}

// Clients builds the transports that carry agents' credentials. It keeps,
// per agent and Config, the secrets' sources, the cached OAuth 2.0 tokens
// and the cloned TLS transport, so a new transport for a changed card
// (see Transport) reuses them. Safe for concurrent use.
type Clients struct {
	cfg    ClientsConfig
	mu     sync.Mutex
	states *lru.Cache[string, *agentState]
}

// NewClients returns a Clients building on cfg.
func NewClients(cfg ClientsConfig) *Clients {
	if cfg.Base == nil {
		cfg.Base = http.DefaultTransport
	}
	if cfg.Wrap == nil {
		cfg.Wrap = func(rt http.RoundTripper) http.RoundTripper { return rt }
	}
	if cfg.TokenTimeout <= 0 {
		cfg.TokenTimeout = DefaultTokenTimeout
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	states, _ := lru.New[string, *agentState](maxAgents) // only a non-positive size fails
	return &Clients{cfg: cfg, states: states}
}

// CloseIdleConnections closes the idle connections of every transport
// Clients cloned for a TLS client certificate or CA; the base transport's
// are its owner's to close.
func (c *Clients) CloseIdleConnections() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.states.Values() {
		if s.base != c.cfg.Base {
			if ci, ok := s.base.(interface{ CloseIdleConnections() }); ok {
				ci.CloseIdleConnections()
			}
		}
	}
}

// agentState is what one agent's transports share for one Config.
type agentState struct {
	agent  string
	cfg    *Config
	base   http.RoundTripper // Base, or its clone with the TLS settings
	bearer *source
	apiKey *source
	basic  *source
	secret *source // the OAuth 2.0 client secret
	client *http.Client

	mu     sync.Mutex
	tokens map[string]*tokenSource // by scopes
}

// Transport returns the RoundTripper for calls to agent, whose card
// declares sec and lists its interfaces at urls: it attaches what
// [Satisfy] chose from cfg to every request for one of those URLs'
// origins (scheme, host and port), and nothing to requests elsewhere, so a
// redirect does not carry orchd's credentials away. It fails when cfg does
// not satisfy sec, or a TLS file cannot be read.
func (c *Clients) Transport(agent string, cfg *Config, sec *capability.Security, urls []string) (http.RoundTripper, error) {
	uses, st := plan(agent, sec, cfg)
	if !st.Satisfied {
		return nil, &unavailableError{agent: agent, err: errors.New(st.Reason)}
	}
	state, err := c.state(agent, cfg)
	if err != nil {
		return nil, &unavailableError{agent: agent, err: err}
	}
	t := &transport{state: state, clients: c, uses: uses, using: st.Using, origins: map[string]bool{}}
	plain := false
	for _, raw := range urls {
		if o, ok := origin(raw); ok {
			t.origins[o] = true
			plain = plain || strings.HasPrefix(o, "http://") && !isLoopback(hostOf(o))
		}
	}
	if plain && slices.ContainsFunc(uses, func(u use) bool { return u.kind != KindTLS }) {
		c.cfg.Log.Warn("credentials for agent go over plain http", "agent", agent, "using", st.Using)
	}
	if cfg != nil && cfg.APIKey != nil && !slices.ContainsFunc(uses, func(u use) bool { return u.kind == KindAPIKey }) {
		c.cfg.Log.Warn("API key for agent not sent: its card declares no apiKey scheme and credentials.apiKey names no place (in, name)", "agent", agent)
	}
	return c.cfg.Wrap(t), nil
}

// state returns agent's shared state for cfg, building it when cfg is new.
func (c *Clients) state(agent string, cfg *Config) (*agentState, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, ok := c.states.Get(agent); ok && s.cfg == cfg {
		return s, nil
	}
	if cfg == nil {
		cfg = &Config{}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &agentState{agent: agent, cfg: cfg, base: c.cfg.Base, tokens: map[string]*tokenSource{}}
	if cfg.TLS != nil {
		clone, err := tlsTransport(c.cfg.Base, cfg.TLS, c.cfg.Now)
		if err != nil {
			return nil, err
		}
		s.base = clone
	}
	now := c.cfg.Now
	if b := cfg.Bearer; b != nil {
		s.bearer = newSource("bearer token", b.TokenFile, b.TokenEnv, now)
	}
	if k := cfg.APIKey; k != nil {
		s.apiKey = newSource("API key", k.ValueFile, k.ValueEnv, now)
	}
	if b := cfg.Basic; b != nil {
		s.basic = newSource("basic password", b.PasswordFile, b.PasswordEnv, now)
	}
	if o := cfg.OAuth2; o != nil {
		s.secret = newSource("oauth2 client secret", o.ClientSecretFile, o.ClientSecretEnv, now)
		s.client = &http.Client{
			Transport: c.cfg.Wrap(s.base),
			Timeout:   c.cfg.TokenTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return errors.New("the token endpoint redirects; orchd does not follow it with a client secret")
			},
		}
	}
	c.states.Add(agent, s)
	c.cfg.Log.Info("credentials ready for agent", "agent", agent, "configured", cfg.Redacted())
	return s, nil
}

// tokenSource returns the token source for scopes.
func (s *agentState) tokenSource(c *Clients, scopes []string) *tokenSource {
	key := strings.Join(scopes, " ")
	s.mu.Lock()
	defer s.mu.Unlock()
	if ts, ok := s.tokens[key]; ok {
		return ts
	}
	o := s.cfg.OAuth2
	ts := &tokenSource{agent: s.agent, clientID: o.ClientID, tokenURL: o.TokenURL, scopes: slices.Clone(scopes),
		secret: s.secret, client: s.client, timeout: c.cfg.TokenTimeout, now: c.cfg.Now, log: c.cfg.Log}
	s.tokens[key] = ts
	return ts
}

// transport attaches one agent's credentials to its requests.
type transport struct {
	state   *agentState
	clients *Clients
	uses    []use
	using   string
	origins map[string]bool
}

// refresher can offer a new value after the agent refused the one sent.
type refresher func() bool

// RoundTrip sends r with the agent's credentials when r is for one of the
// agent's origins. A 401 after a credential that can be renewed (an OAuth
// 2.0 token, a secret file that changed) is retried once with the new
// one, when the request body can be sent again. A 401 or 403 then becomes
// a *RefusedError.
func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	if o, ok := urlOrigin(r.URL); !ok || !t.origins[o] {
		return t.state.base.RoundTrip(r)
	}
	out := r.Clone(r.Context())
	sent, renew, err := t.attach(out)
	if err != nil {
		if r.Body != nil {
			_ = r.Body.Close()
		}
		return nil, &unavailableError{agent: t.state.agent, err: err}
	}
	resp, err := t.state.base.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized && len(renew) > 0 && replayable(r) {
		again := false
		for _, f := range renew {
			again = f() || again
		}
		if again {
			discard(resp)
			out = r.Clone(r.Context())
			if r.GetBody != nil {
				if out.Body, err = r.GetBody(); err != nil {
					return nil, fmt.Errorf("send request to agent %s again: %w", t.state.agent, err)
				}
			}
			if sent, _, err = t.attach(out); err != nil {
				return nil, &unavailableError{agent: t.state.agent, err: err}
			}
			if resp, err = t.state.base.RoundTrip(out); err != nil {
				return nil, err
			}
		}
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		challenge := sanitizeChallenge(resp.Header.Get("WWW-Authenticate"), sent)
		discard(resp)
		return nil, &RefusedError{Agent: t.state.agent, Status: resp.StatusCode, Sent: t.using, Challenge: challenge}
	}
	return resp, nil
}

// attach sets the credentials on out, a clone of the caller's request,
// and returns the secrets sent and how to renew those that can be.
func (t *transport) attach(out *http.Request) ([]secret, []refresher, error) {
	var sent []secret
	var renew []refresher
	s := t.state
	for _, u := range t.uses {
		if u.caller || u.kind == KindForwardCaller {
			if tok, ok := callerToken(out.Context()); ok {
				out.Header.Set("Authorization", "Bearer "+string(tok))
				sent = append(sent, tok)
				continue
			}
		}
		switch u.kind {
		case KindBearer:
			v, err := s.bearer.get()
			if err != nil {
				return nil, nil, err
			}
			out.Header.Set("Authorization", "Bearer "+string(v))
			sent, renew = append(sent, v), append(renew, s.bearer.reload)
		case KindOAuth2:
			ts := s.tokenSource(t.clients, u.scopes)
			v, err := ts.token(out.Context())
			if err != nil {
				return nil, nil, err
			}
			out.Header.Set("Authorization", "Bearer "+string(v))
			sent, renew = append(sent, v), append(renew, func() bool { return ts.invalidate(v) })
		case KindBasic:
			v, err := s.basic.get()
			if err != nil {
				return nil, nil, err
			}
			out.SetBasicAuth(s.cfg.Basic.Username, string(v))
			sent, renew = append(sent, v), append(renew, s.basic.reload)
		case KindAPIKey:
			v, err := s.apiKey.get()
			if err != nil {
				return nil, nil, err
			}
			switch u.in {
			case capability.InHeader:
				out.Header.Set(u.name, string(v))
			case capability.InQuery:
				q := out.URL.Query()
				q.Set(u.name, string(v))
				out.URL.RawQuery = q.Encode()
			case capability.InCookie:
				if !cookieSafe(v) {
					return nil, nil, errors.New("API key has characters a cookie cannot carry")
				}
				out.AddCookie(&http.Cookie{Name: u.name, Value: string(v)})
			}
			sent, renew = append(sent, v), append(renew, s.apiKey.reload)
		}
	}
	return sent, renew, nil
}

// CloseIdleConnections closes the idle connections of the agent's
// transport (its TLS clone, or the shared base).
func (t *transport) CloseIdleConnections() {
	if c, ok := t.state.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// replayable reports whether r's body can be sent twice.
func replayable(r *http.Request) bool {
	return r.Body == nil || r.Body == http.NoBody || r.GetBody != nil
}

// discard reads a little of a response it does not pass on, so the
// connection can be reused, and closes it.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
}

// origin returns raw's scheme://host[:port], lower case, without the
// scheme's default port; false for what is not an http(s) URL.
func origin(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", false
	}
	return urlOrigin(u)
}

// urlOrigin is origin for a parsed URL.
func urlOrigin(u *url.URL) (string, bool) {
	if u == nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" || u.Scheme == "http" && port == "80" || u.Scheme == "https" && port == "443" {
		port = ""
	}
	o := u.Scheme + "://" + host
	if strings.Contains(host, ":") {
		o = u.Scheme + "://[" + host + "]"
	}
	if port != "" {
		o += ":" + port
	}
	return o, true
}

// hostOf returns the host of an origin.
func hostOf(o string) string {
	u, err := url.Parse(o)
	if err != nil {
		return ""
	}
	return u.Hostname()
}
