package httpgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/policies"
)

// AuthConfig is the config file's auth section: how callers authenticate
// (tokens, JWTs, client certificates; see the auth package), which routes
// they may reach without credentials, and which of them are orchd peers
// whose chain context is believed. docs/security.md explains each field.
type AuthConfig struct {
	auth.Config `yaml:",inline"`
	// Peers lists the other orchds whose delegation chain context (path,
	// depth, requires, deadline, the root caller) this orchd believes,
	// each named with how it authenticates: "token:<principal>" for a
	// static token, "mtls:<principal>" for a client certificate,
	// "jwt:<issuer>#<sub>" for a JWT of auth.jwt's issuer. From any
	// other caller the chain context is ignored and the work starts a
	// new chain with the caller as its root.
	Peers []string `yaml:"peers"`
	// Anonymous lists the route groups served to callers that present no
	// credentials: health (/healthz, /readyz), card (the agent card),
	// openapi, metrics, api (/v1/... and the console's /ui/), a2a (the
	// A2A endpoints) and mcp (the MCP endpoint, /mcp). Default health,
	// card and openapi. With no authentication configured every route is
	// open.
	Anonymous []string `yaml:"anonymous"`
}

// Route groups, as AuthConfig.Anonymous names them: each route is in one.
const (
	GroupHealth  = "health"
	GroupCard    = "card"
	GroupOpenAPI = "openapi"
	GroupMetrics = "metrics"
	GroupAPI     = "api"
	GroupA2A     = "a2a"
	GroupMCP     = "mcp"
)

var routeGroups = []string{GroupHealth, GroupCard, GroupOpenAPI, GroupMetrics, GroupAPI, GroupA2A, GroupMCP}

// Validate checks the section's own fields; auth.New checks the rest.
func (c AuthConfig) Validate() error {
	for _, g := range c.Anonymous {
		if !slices.Contains(routeGroups, g) {
			return fmt.Errorf("config: auth.anonymous: unknown route group %q (want one of %s)", g, strings.Join(routeGroups, ", "))
		}
	}
	for i, p := range c.Peers {
		if _, err := parsePeer(p, c.JWT); err != nil {
			return fmt.Errorf("config: auth.peers[%d] %q: %w", i, p, err)
		}
	}
	return nil
}

// Gate authenticates every request before the routes see it. A caller's
// credentials are checked whenever it presents some, on every route; a
// route outside the anonymous groups also needs them. The principal, or
// the refusal, travels in the request's context: routes served through
// Wrap (the HTTP API, the card, health, metrics) answer 401 at once, while
// those served through Admit (the A2A endpoints) refuse in their own
// protocol, so A2A clients get A2A's own error (-31401) over their
// binding; BodyLimits reads little or nothing of a refused caller's body
// before that (StandIn), and gRPC refuses such a caller before reading
// its message (GRPCCaller).
type Gate struct {
	// authn is nil when no authentication is configured: every caller is
	// then the development principal (policies.MethodNone).
	authn     *auth.Authenticator
	cfg       AuthConfig
	anonymous map[string]bool
	// peers maps each trusted peer's identity, without a tenant, to its
	// name in auth.peers.
	peers map[auth.Identity]string
	log   *slog.Logger
}

// NewGate builds the gate of a validated auth section
// (AuthConfig.Validate) and the authenticator it configures, nil when it
// configures no authentication.
func NewGate(cfg AuthConfig, authn *auth.Authenticator, log *slog.Logger) *Gate {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &Gate{authn: authn, cfg: cfg, anonymous: map[string]bool{}, peers: map[auth.Identity]string{}, log: log}
	anon := cfg.Anonymous
	if anon == nil {
		anon = []string{GroupHealth, GroupCard, GroupOpenAPI}
	}
	for _, a := range anon {
		g.anonymous[a] = true
	}
	for _, p := range cfg.Peers {
		if id, err := parsePeer(p, cfg.JWT); err == nil {
			g.peers[id] = p
		}
	}
	return g
}

// alternatives names the other ways the config lets callers present
// credentials, for the refusal of a call that presented none.
func (g *Gate) alternatives() string {
	var alt []string
	if h := g.cfg.APIKeyHeader; h != "" {
		alt = append(alt, "an API key in "+h)
	}
	if g.cfg.MTLS != nil {
		alt = append(alt, "a client certificate")
	}
	if len(alt) == 0 {
		return ""
	}
	return ", or " + strings.Join(alt, ", or ")
}

// Enabled reports whether callers authenticate at all.
func (g *Gate) Enabled() bool { return g.authn != nil }

// Config is the auth section the gate was built from.
func (g *Gate) Config() AuthConfig { return g.cfg }

// refusalKey carries why the gate refused a request's caller, for the A2A
// endpoints to answer in A2A's terms: bad credentials, or none on a route
// that needs them. It holds nothing secret. The principal of an accepted
// caller travels as auth.PrincipalFrom reads it.
type refusalKey struct{}

// Refused returns why the gate refused the caller of the request with
// ctx, when it admitted the request to answer the refusal itself
// (Admit); "" when it did not refuse it.
func Refused(ctx context.Context) string {
	refused, _ := ctx.Value(refusalKey{}).(string)
	return refused
}

// Wrap authenticates requests to a route of group before h serves them,
// and answers a refused caller itself: 401 (or 503 while the credentials
// cannot be checked) with a WWW-Authenticate challenge and the plain HTTP
// error body (Error).
func (g *Gate) Wrap(group string, h http.Handler) http.Handler { return g.wrap(group, h, false, nil) }

// WrapChallenging is Wrap for a route whose refusals tell the caller more
// in their challenge: params(r), when not empty, is added to the Bearer
// challenge of the refusal of r as auth-params (RFC 9110 §11.6.1), such
// as RFC 9728's resource_metadata="<url>" that sends OAuth clients to the
// route's protected-resource metadata.
func (g *Gate) WrapChallenging(group string, h http.Handler, params func(*http.Request) string) http.Handler {
	return g.wrap(group, h, false, params)
}

// Admit authenticates requests to a route of group as Wrap does, but
// passes a refused caller on to h, with why in the context (Refused), for
// h to answer in its own protocol.
func (g *Gate) Admit(group string, h http.Handler) http.Handler { return g.wrap(group, h, true, nil) }

// wrap authenticates requests to a route of group before h serves them;
// admit passes refused callers on (Admit), and params, if not nil, adds
// to the challenge of a refusal (WrapChallenging).
func (g *Gate) wrap(group string, h http.Handler, admit bool, params func(*http.Request) string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if g.authn == nil {
			h.ServeHTTP(w, r)
			return
		}
		refused := ""
		status, challenge := http.StatusUnauthorized, `Bearer realm="orchd"`
		p, err := g.authn.Authenticate(r)
		switch {
		case err != nil:
			refused = err.Error()
			var ae *auth.Error
			if errors.As(err, &ae) {
				status, challenge = ae.HTTPStatus(), ae.Challenge()
			}
			g.log.InfoContext(r.Context(), "caller refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "reason", refused)
		case p == nil && !g.anonymous[group]:
			refused = "authentication required: send Authorization: Bearer <token>" + g.alternatives()
		}
		if refused != "" && !admit {
			if params != nil {
				if p := params(r); p != "" {
					challenge += ", " + p
				}
			}
			w.Header().Set("WWW-Authenticate", challenge)
			code := "unauthenticated"
			if status == http.StatusServiceUnavailable {
				code = "unavailable"
			}
			WriteError(w, &Error{Status: status, Code: code, Msg: refused})
			return
		}
		ctx := r.Context()
		if refused != "" {
			ctx = context.WithValue(ctx, refusalKey{}, refused)
		}
		if p != nil {
			ctx = auth.WithPrincipal(ctx, p)
			notePrincipal(ctx, p)
			if tok := p.Token(); tok != "" {
				ctx = credentials.WithCallerToken(ctx, tok)
			}
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// CallerOf returns the caller of a request as policies see it. With no
// authentication configured it is the development caller, method "none",
// whom the default authorization policy lets do everything.
func (g *Gate) CallerOf(ctx context.Context) policies.Caller {
	if g.authn == nil {
		return policies.Caller{Method: policies.MethodNone}
	}
	p, ok := auth.PrincipalFrom(ctx)
	if !ok {
		return policies.Caller{Method: policies.MethodAnonymous}
	}
	return policies.Caller{Principal: p.ID, Tenant: p.Tenant, Roles: p.Roles, Claims: p.Claims,
		Authenticated: true, Method: p.Method, Issuer: p.Identity().Issuer}
}

// GRPCCaller is Admit for a gRPC call to the A2A endpoints: the principal
// of the credentials r (the call's metadata as headers) presents travels
// in the returned context, or refused says why they were refused.
func (g *Gate) GRPCCaller(ctx context.Context, r *http.Request) (_ context.Context, refused string) {
	if g.authn == nil {
		return ctx, ""
	}
	p, err := g.authn.Authenticate(r)
	switch {
	case err != nil:
		g.log.InfoContext(ctx, "caller refused", "method", "gRPC", "path", r.URL.Path, "remote", r.RemoteAddr, "reason", err.Error())
		return ctx, err.Error()
	case p == nil && !g.anonymous[GroupA2A]:
		return ctx, "authentication required: send authorization: Bearer <token> metadata" + g.alternatives()
	case p == nil:
		return ctx, ""
	}
	ctx = auth.WithPrincipal(ctx, p)
	if tok := p.Token(); tok != "" {
		ctx = credentials.WithCallerToken(ctx, tok)
	}
	return ctx, ""
}
