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
// SDK as token info. The SDK's middleware reads a bearer token, but the
// gate has checked the caller's credentials already, whatever they were
// (a token, a client certificate, none on an anonymous route or with no
// authentication configured): it is given a placeholder in their place,
// so the SDK never holds the caller's token, which travels only in the
// principal, as the gate put it there.
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
		r = r.Clone(r.Context())
		r.Header.Set("Authorization", "Bearer -")
		verified.ServeHTTP(w, r)
	})
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
