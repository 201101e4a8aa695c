package auth

import (
	"context"
	"log/slog"
	"slices"
)

// Methods name how a [Principal] was authenticated: its Method field.
const (
	// MethodToken is a static bearer token or API key from the configuration
	// or the tokens file.
	MethodToken = "token"
	// MethodJWT is a JWT verified against the configured issuer's keys.
	MethodJWT = "jwt"
	// MethodMTLS is a client certificate verified against the client CA.
	MethodMTLS = "mtls"
)

// Principal is an authenticated caller: who it is, which tenant it acts for
// and which roles it holds. It becomes the caller of delegation policies and
// the user that A2A task stores isolate by. A Principal returned by
// [Authenticator.Authenticate] is the caller's own copy, except Claims, which
// may be shared between requests and must be treated as read-only.
//
// The raw bearer token the caller presented is kept only behind [Principal.Token]:
// it is never part of the JSON, text or log forms of a Principal.
type Principal struct {
	// ID identifies the caller: the configured principal of a static token,
	// the principal claim (default "sub") of a JWT, or the SPIFFE ID (else
	// subject common name) of a client certificate.
	ID string `json:"id" yaml:"id"`
	// Tenant is the tenant the caller acts for; empty when none is known.
	Tenant string `json:"tenant,omitempty" yaml:"tenant,omitempty"`
	// Roles are the caller's roles, such as "admin".
	Roles []string `json:"roles,omitempty" yaml:"roles,omitempty"`
	// Claims are what the credential says about the caller: a JWT's verified
	// claims as JSON values, a certificate's subject, issuer and serial.
	// Nil for static tokens.
	Claims map[string]any `json:"claims,omitempty" yaml:"claims,omitempty"`
	// Method is how the caller was authenticated: [MethodToken],
	// [MethodJWT] or [MethodMTLS].
	Method string `json:"method" yaml:"method"`

	// secret holds the presented bearer token. It is a pointer so that
	// fmt's %+v and %#v of a Principal print an address, not the token.
	secret *bearer
}

// bearer wraps the raw token so that no formatting path prints it.
type bearer struct{ token string }

// String hides the token from fmt.
func (*bearer) String() string { return "[redacted]" }

// GoString hides the token from fmt's %#v.
func (*bearer) GoString() string { return "[redacted]" }

// Token returns the raw bearer token the caller presented (a static token or
// a JWT), or "" for certificate principals. It exists so that the caller's
// own token can be forwarded to agents configured to receive it; never log
// it or store it.
func (p *Principal) Token() string {
	if p == nil || p.secret == nil {
		return ""
	}
	return p.secret.token
}

// HasRole reports whether the principal holds role. A nil principal holds
// none.
func (p *Principal) HasRole(role string) bool {
	return p != nil && slices.Contains(p.Roles, role)
}

// String names the principal for messages and logs as method:id, with
// "@tenant" when there is one. It never includes the token.
func (p *Principal) String() string {
	if p == nil {
		return "anonymous"
	}
	s := p.Method + ":" + p.ID
	if p.Tenant != "" {
		s += "@" + p.Tenant
	}
	return s
}

// LogValue is what log/slog records for a principal: id, tenant, roles and
// method, never the token or the claims.
func (p *Principal) LogValue() slog.Value {
	if p == nil {
		return slog.StringValue("anonymous")
	}
	attrs := []slog.Attr{slog.String("id", p.ID), slog.String("method", p.Method)}
	if p.Tenant != "" {
		attrs = append(attrs, slog.String("tenant", p.Tenant))
	}
	if len(p.Roles) > 0 {
		attrs = append(attrs, slog.Any("roles", p.Roles))
	}
	return slog.GroupValue(attrs...)
}

// clone returns a copy the caller may change, sharing only Claims.
func (p *Principal) clone() *Principal {
	c := *p
	c.Roles = slices.Clone(p.Roles)
	return &c
}

// principalKey is the context key of WithPrincipal.
type principalKey struct{}

// WithPrincipal returns a copy of ctx carrying p, for handlers and policies
// further down the request.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal WithPrincipal put in ctx. It reports
// false when there is none (an anonymous request, or one never
// authenticated).
func PrincipalFrom(ctx context.Context) (*Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(*Principal)
	return p, ok && p != nil
}

var _ slog.LogValuer = (*Principal)(nil)
