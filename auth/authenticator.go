package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Options are what an [Authenticator] takes from its host besides the
// configuration.
type Options struct {
	// HTTPClient fetches OIDC discovery documents and key sets. Nil means a
	// client of its own; either way a client without a timeout gets one of
	// 10s.
	HTTPClient *http.Client
	// Now is the clock JWT expiry, not-before and issued-at are checked
	// against. Nil means time.Now.
	Now func() time.Time
	// Log receives warnings (plain-text tokens, unreachable issuer) and
	// tokens file reloads. Nil means no logging. Tokens are never logged.
	Log *slog.Logger
}

// Authenticator authenticates HTTP requests with the configured methods.
// It is safe for concurrent use. Create it with [New], call
// [Authenticator.Start] before serving JWT callers, and [Authenticator.Close]
// when done.
type Authenticator struct {
	cfg       Config
	log       *slog.Logger
	now       func() time.Time
	apiKey    string // canonical APIKeyHeader, or ""
	compare   func(x, y []byte) int
	transport *http.Transport // ours, closed by Close; nil with Options.HTTPClient

	inline    []tokenEntry
	tokens    atomic.Pointer[tokenSet]
	fileMu    sync.Mutex // serialises tokens file reloads
	file      fileState
	jwt       *jwtVerifier
	mtls      *mtlsVerifier
	tokenMeth bool // static tokens configured (inline or file)
	enabled   bool // any method configured

	mu      sync.Mutex
	started bool
	closed  bool
	cancel  context.CancelFunc
	wg      sync.WaitGroup // the goroutines Start started
}

// New validates cfg, reads the tokens file and client CA it names, and
// returns an Authenticator that has started nothing yet. A configuration
// error names the field at fault.
func New(cfg Config, opts Options) (*Authenticator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("auth config: %w", err)
	}
	a := &Authenticator{
		cfg:       cfg,
		log:       opts.Log,
		now:       opts.Now,
		compare:   subtle.ConstantTimeCompare,
		tokenMeth: len(cfg.Tokens) > 0 || cfg.TokensFile != "",
		enabled:   cfg.Enabled(),
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.now == nil {
		a.now = time.Now
	}
	if cfg.APIKeyHeader != "" {
		a.apiKey = http.CanonicalHeaderKey(cfg.APIKeyHeader)
	}
	inline, err := tokenEntries("tokens", cfg.Tokens)
	if err != nil {
		return nil, fmt.Errorf("auth config: %w", err)
	}
	a.inline = inline
	a.warnPlain(inline)
	a.tokens.Store(&tokenSet{entries: inline})
	if cfg.TokensFile != "" {
		if err := a.reloadTokens(true); err != nil {
			return nil, fmt.Errorf("auth config: tokensFile: %w", err)
		}
	}
	if cfg.JWT != nil {
		jc := cfg.JWT.withDefaults()
		client := opts.HTTPClient
		if client == nil {
			a.transport = http.DefaultTransport.(*http.Transport).Clone()
			client = &http.Client{Transport: a.transport}
		}
		if client.Timeout == 0 {
			c := *client
			c.Timeout = fetchTimeout
			client = &c
		}
		keys := &keySource{cfg: jc, client: client, log: a.log}
		if a.jwt, err = newJWTVerifier(jc, keys, a.now); err != nil {
			return nil, fmt.Errorf("auth config: %w", err)
		}
	}
	if cfg.MTLS != nil {
		if a.mtls, err = newMTLSVerifier(*cfg.MTLS); err != nil {
			return nil, fmt.Errorf("auth config: %w", err)
		}
	}
	return a, nil
}

// Enabled reports whether any kind of credential is configured. When it is
// false, Authenticate returns (nil, nil) for every request.
func (a *Authenticator) Enabled() bool { return a.enabled }

// Start starts the background work: watching the tokens file, and finding,
// fetching and refreshing the JWT issuer's keys. It tries the issuer once
// before returning (bounded by a 10s timeout per request); when the issuer
// cannot be reached it logs so and keeps trying in the background, and
// JWTs are refused as unavailable until it succeeds. Everything started
// stops when ctx ends or on Close. Start may be called once.
func (a *Authenticator) Start(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.closed:
		return errors.New("auth: start after close")
	case a.started:
		return errors.New("auth: already started")
	}
	a.started = true
	ctx, cancel := context.WithCancel(ctx)
	a.cancel = cancel
	if a.cfg.TokensFile != "" {
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.watchTokens(ctx)
		}()
	}
	if a.jwt != nil {
		if err := a.jwt.keys.start(ctx, &a.wg); err != nil {
			cancel()
			return err
		}
	}
	return nil
}

// Close stops what Start started and waits for it. It is safe to call more
// than once, and without Start.
func (a *Authenticator) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	cancel := a.cancel
	a.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	a.wg.Wait()
	var err error
	if a.jwt != nil {
		ctx, c := context.WithTimeout(context.Background(), 5*time.Second)
		if serr := a.jwt.keys.stop(ctx); serr != nil {
			err = fmt.Errorf("auth: stop key cache: %w", serr)
		}
		c()
	}
	if a.transport != nil {
		a.transport.CloseIdleConnections()
	}
	return err
}

// Authenticate returns the principal of the credentials r presents: a
// bearer token (static or JWT) in the Authorization header, a static token
// in the API key header, or else a verified client certificate. It returns
// (nil, nil) when r presents no credentials at all, or when nothing is
// configured; whether anonymous callers may proceed is the caller's
// decision. Presented credentials that are refused give an [*Error]
// matching [ErrInvalidCredentials] (answer 401) or [ErrUnavailable]
// (answer 503); its Reason is safe to show the caller.
func (a *Authenticator) Authenticate(r *http.Request) (*Principal, error) {
	if !a.Enabled() {
		return nil, nil
	}
	tok, apiKey, err := a.presented(r.Header)
	if err != nil {
		return nil, err
	}
	if tok != "" {
		return a.authenticateToken(tok, apiKey)
	}
	return a.AuthenticateTLS(r.TLS)
}

// AuthenticateTLS returns the principal of the connection's verified client
// certificate, (nil, nil) when no certificate was presented or mTLS is not
// configured, and an [*Error] when the certificate cannot name a principal
// or was not verified against the configured client CA. Authenticate uses
// it when no token is presented; it is also the identity of the peer when a
// token names someone else.
func (a *Authenticator) AuthenticateTLS(cs *tls.ConnectionState) (*Principal, error) {
	if a.mtls == nil {
		return nil, nil
	}
	return a.mtls.principal(cs)
}

// ServerTLS returns a copy of base (or, when base is nil, a new config with
// TLS 1.2 at least) for the HTTPS server: with mTLS configured it requests
// client certificates and verifies those given against the client CA
// (tls.VerifyClientCertIfGiven, so that callers with tokens and no
// certificate still connect). Without mTLS it is base's copy unchanged.
func (a *Authenticator) ServerTLS(base *tls.Config) *tls.Config {
	if a.mtls == nil {
		if base == nil {
			return &tls.Config{MinVersion: tls.VersionTLS12}
		}
		return base.Clone()
	}
	return a.mtls.serverTLS(base)
}

// presented returns the token in the request's headers, "" when there is
// none, and whether it came from the API key header.
func (a *Authenticator) presented(h http.Header) (string, bool, error) {
	var tok string
	switch vals := h.Values("Authorization"); len(vals) {
	case 0:
	case 1:
		scheme, rest, _ := strings.Cut(vals[0], " ")
		if !strings.EqualFold(scheme, "Bearer") {
			if isSchemeName(scheme) {
				return "", false, malformed("", "authorization scheme %s is not accepted; use Bearer", quote(scheme))
			}
			return "", false, malformed("", `authorization header is not "Bearer <token>"`)
		}
		tok = strings.TrimLeft(rest, " ")
		if tok == "" {
			return "", false, malformed("", "empty bearer token")
		}
		if !a.tokenMeth && a.jwt == nil {
			return "", false, refuse("", "bearer tokens are not accepted here")
		}
	default:
		return "", false, malformed("", "more than one Authorization header")
	}
	fromKey := false
	if a.apiKey != "" {
		switch vals := h.Values(a.apiKey); len(vals) {
		case 0:
		case 1:
			if tok != "" {
				return "", false, malformed("", "credentials in both Authorization and %s; send one", a.apiKey)
			}
			if tok = vals[0]; tok == "" {
				return "", false, malformed(MethodToken, "empty %s", a.apiKey)
			}
			fromKey = true
		default:
			return "", false, malformed(MethodToken, "more than one %s header", a.apiKey)
		}
	}
	if tok != "" {
		if why := checkTokenSyntax(tok); why != "" {
			return "", false, malformed("", "token %s", why)
		}
	}
	return tok, fromKey, nil
}

// isSchemeName reports whether s is a known HTTP authentication scheme, and
// so may be quoted back: anything else before the first space may be a
// token, and is not quoted.
func isSchemeName(s string) bool {
	switch strings.ToLower(s) {
	case "basic", "digest", "negotiate", "ntlm", "dpop", "token", "hoba", "mutual", "apikey",
		"aws4-hmac-sha256", "scram-sha-1", "scram-sha-256", "vapid", "privatetoken", "concealed":
		return true
	}
	return false
}

// authenticateToken checks tok against the static tokens, then as a JWT.
func (a *Authenticator) authenticateToken(tok string, fromAPIKey bool) (*Principal, error) {
	sum := sha256.Sum256([]byte(tok))
	if set := a.tokens.Load(); set != nil && len(set.entries) > 0 {
		if e := set.match(&sum, a.compare); e != nil {
			return &Principal{
				ID:     e.principal,
				Tenant: e.tenant,
				Roles:  append([]string(nil), e.roles...),
				Method: MethodToken,
				secret: &bearer{token: tok},
			}, nil
		}
	}
	if a.jwt != nil && !fromAPIKey {
		if looksLikeJWT(tok) {
			return a.jwt.verify(tok, &sum)
		}
		if !a.tokenMeth {
			return nil, malformed(MethodJWT, "malformed JWT: not a compact JWS of three base64url parts")
		}
	}
	return nil, refuse(MethodToken, "unknown token")
}

// warnPlain logs each token configured in plain text (never the token).
func (a *Authenticator) warnPlain(entries []tokenEntry) {
	for _, e := range entries {
		if e.plain {
			a.log.Warn("auth: a token is configured in plain text; configure its sha256 instead", "where", e.where, "principal", e.principal)
		}
	}
}
