package httpgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

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
	// openapi, metrics, api (/v1/... and the console's /ui/) and a2a (the
	// A2A endpoints). Default health, card and openapi. With no
	// authentication configured every route is open.
	Anonymous []string `yaml:"anonymous"`
}

// Route groups, as AuthConfig.Anonymous names them.
const (
	groupHealth  = "health"
	groupCard    = "card"
	groupOpenAPI = "openapi"
	groupMetrics = "metrics"
	groupAPI     = "api"
	groupA2A     = "a2a"
)

var routeGroups = []string{groupHealth, groupCard, groupOpenAPI, groupMetrics, groupAPI, groupA2A}

// validate checks the section's own fields; auth.New checks the rest.
func (c AuthConfig) validate() error {
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

// gate authenticates every request before the routes see it. A caller's
// credentials are checked whenever it presents some, on every route; a
// route outside the anonymous groups also needs them. The principal, or
// the refusal, travels in the request's context: the HTTP API answers 401
// at once, while the A2A endpoints refuse in callerInterceptor, so A2A
// clients get A2A's own error (-31401) over their binding; bodyLimits
// reads little or nothing of a refused caller's body before that
// (standIn), and gRPC refuses such a caller before reading its message
// (grpcServer.tap).
type gate struct {
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

// newGate builds the gate of a validated auth section
// (AuthConfig.validate).
func newGate(cfg AuthConfig, authn *auth.Authenticator, log *slog.Logger) *gate {
	g := &gate{authn: authn, cfg: cfg, anonymous: map[string]bool{}, peers: map[auth.Identity]string{}, log: log}
	anon := cfg.Anonymous
	if anon == nil {
		anon = []string{groupHealth, groupCard, groupOpenAPI}
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
func (g *gate) alternatives() string {
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

// enabled reports whether callers authenticate at all.
func (g *gate) enabled() bool { return g.authn != nil }

// refusalKey carries why the gate refused a request's caller, for the A2A
// endpoints to answer in A2A's terms: bad credentials, or none on a route
// that needs them. It holds nothing secret. The principal of an accepted
// caller travels as auth.PrincipalFrom reads it.
type refusalKey struct{}

// callerRefused reports whether the gate refused the caller of the request
// with ctx and left the answer to an A2A endpoint (callerInterceptor).
func callerRefused(ctx context.Context) bool {
	refused, _ := ctx.Value(refusalKey{}).(string)
	return refused != ""
}

// wrap authenticates requests to a route of group before h serves them.
func (g *gate) wrap(group string, h http.Handler) http.Handler {
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
		if refused != "" && group != groupA2A {
			w.Header().Set("WWW-Authenticate", challenge)
			code := "unauthenticated"
			if status == http.StatusServiceUnavailable {
				code = "unavailable"
			}
			writeAPIError(w, &apiError{status: status, code: code, msg: refused})
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

// callerOf returns the caller of a request as policies see it. With no
// authentication configured it is the development caller, method "none",
// whom the default authorization policy lets do everything.
func (g *gate) callerOf(ctx context.Context) policies.Caller {
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

// taskUser is the user a caller's A2A tasks belong to in orchd's task
// store, which keeps each user's tasks apart: the caller's identity key
// (auth.Identity.Key, of its method, issuer, principal and tenant), so
// that no other caller has the same name, or "" for a caller without a
// principal. It is the one place that names task users.
func taskUser(c policies.Caller) string {
	if c.Principal == "" {
		return ""
	}
	return auth.Identity{Method: c.Method, Issuer: c.Issuer, ID: c.Principal, Tenant: c.Tenant}.Key()
}

// legacyTaskUser is whom a task belongs to that an earlier orchd stored
// for user, when task users were a caller's tenant and principal joined
// with "/" (store.TasksConfig.LegacyUser): such a name could be another
// caller's today, so it becomes "legacy:" and the name, which no
// caller's identity key can be (a key's method is never "legacy"). Those
// tasks are no caller's; orchd still mirrors their delegations into them
// (upstreamUser). The anonymous "" and the development user are as they
// were: each was one caller then and is now.
func legacyTaskUser(user string) string {
	if user == "" || user == developmentTaskUser {
		return user
	}
	return "legacy:" + user
}

// callerInterceptor makes the gate's caller a2a-go's CallContext user, so
// the task store keeps each caller's tasks apart and ListTasks answers,
// and refuses an unauthenticated call with A2A's unauthenticated error.
type callerInterceptor struct {
	a2asrv.PassthroughCallInterceptor
	gate *gate
}

func (i callerInterceptor) Before(ctx context.Context, cc *a2asrv.CallContext, _ *a2asrv.Request) (context.Context, any, error) {
	if !i.gate.enabled() {
		return ctx, nil, nil
	}
	if refused, _ := ctx.Value(refusalKey{}).(string); refused != "" {
		return ctx, nil, a2a.NewError(a2a.ErrUnauthenticated, refused)
	}
	pc := i.gate.callerOf(ctx)
	if pc.Principal == "" {
		return ctx, nil, nil // an anonymous caller the config lets in
	}
	cc.User = a2asrv.NewAuthenticatedUser(taskUser(pc), map[string]any{"principal": pc.Principal, "tenant": pc.Tenant, "roles": pc.Roles,
		"method": pc.Method, "issuer": pc.Issuer})
	return ctx, nil, nil
}
