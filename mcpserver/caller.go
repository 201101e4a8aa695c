package mcpserver

import (
	"context"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	orchdauth "github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/credentials"
)

// Carrying the caller through the SDK.
//
// The gate (httpgate.Gate) authenticates the HTTP request and puts orchd's
// principal in its context. The SDK runs an older client's session on a
// connection that outlives the request, so a request's context does not
// reach the tools: they run in the values of the request that opened the
// session, whose credentials may not be this request's (the same caller
// with other roles, a refreshed JWT). What does reach them, per request,
// is the SDK's token info (RequestExtra.TokenInfo), which only its bearer
// middleware sets. So carryCaller hands the principal to that middleware
// as the "token" it verifies, and callerMiddleware takes it back into the
// context of the MCP request, where httpgate.Authorizer reads it. The
// token info's UserID also binds an older client's session to the
// principal that opened it: the SDK refuses the session to anyone else
// (session.go).

// principalExtra is the TokenInfo.Extra key holding orchd's principal.
const principalExtra = "orchd.principal"

// carryCaller passes the principal the gate found in r's context on to the
// SDK as token info. A request that carried no bearer token (a client
// certificate, an anonymous route, no authentication configured) is given
// a placeholder for the SDK's middleware to read; its principal, or none,
// still comes from the gate.
func carryCaller(next http.Handler) http.Handler {
	verified := auth.RequireBearerToken(func(ctx context.Context, _ string, _ *http.Request) (*auth.TokenInfo, error) {
		ti := &auth.TokenInfo{}
		if p, ok := orchdauth.PrincipalFrom(ctx); ok {
			ti.UserID = p.Identity().Key()
			ti.Extra = map[string]any{principalExtra: p}
		}
		return ti, nil
	}, &auth.RequireBearerTokenOptions{AllowMissingExpiration: true})(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := bearer(r); !ok {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer -")
		}
		verified.ServeHTTP(w, r)
	})
}

// bearer returns the bearer token r carries.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && (h[:7] == "Bearer " || h[:7] == "bearer ") {
		return h[7:], true
	}
	return "", false
}

// callerMiddleware puts the principal carryCaller passed on back into the
// context of every MCP request, as the gate had it.
func callerMiddleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if ex := req.GetExtra(); ex != nil && ex.TokenInfo != nil {
			if p, ok := ex.TokenInfo.Extra[principalExtra].(*orchdauth.Principal); ok {
				ctx = orchdauth.WithPrincipal(ctx, p)
				if tok := p.Token(); tok != "" {
					ctx = credentials.WithCallerToken(ctx, tok)
				}
			}
		}
		return next(ctx, method, req)
	}
}
