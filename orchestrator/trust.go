package orchestrator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/policies"
)

// MethodPeer is the caller method of work a trusted peer passed on for
// the caller at the root of its chain: policies see that caller, its
// principal and tenant, with the peer in caller.claims.peer.
const MethodPeer = "peer"

// believe decides whether the delegation chain context an A2A caller sent
// with its message is believed, and sets req from it.
//
// With no authentication configured every chain context is believed, as
// on a development daemon, but for whom the work is for: such a daemon
// knows no caller, so it drops the chain's OnBehalfOf and passes none on,
// and an orchd trusting it as a peer does the work as that daemon, never
// as a tenant a caller named. Otherwise only a caller authenticated as one of
// auth.peers is, by the method and issuer the entry names: the path entry
// it added is recorded as verified under its name there, and the work is
// done for the chain's root caller (Chain.OnBehalfOf) as that peer vouches
// for it, so tenants stay apart along the chain. From anyone else the
// chain context is ignored: the work starts a new chain here with the
// caller as its root, and the record, the task's metadata and the log
// say so.
func (g *gate) believe(ctx context.Context, req *delegation.Request, chain delegation.Chain) {
	if g.authn == nil {
		chain.OnBehalfOf = nil
		req.Chain = &chain
		return
	}
	p, _ := auth.PrincipalFrom(ctx)
	if peer, ok := g.peer(p); ok {
		req.Chain, req.Peer = &chain, peer
		if chain.OnBehalfOf != nil {
			req.Caller = policies.Caller{Principal: chain.OnBehalfOf.ID, Tenant: chain.OnBehalfOf.Tenant,
				Authenticated: true, Method: MethodPeer, Issuer: peer, Claims: map[string]any{"peer": peer}}
		}
		return
	}
	who := "an anonymous caller"
	if p != nil {
		who = fmt.Sprintf("%q", p.ID)
	}
	req.ChainIgnored = fmt.Sprintf("the delegation chain context sent by %s was ignored, as it is not a trusted orchd peer (auth.peers): the work started a new chain here", who)
	g.log.WarnContext(ctx, "delegation chain context ignored: the caller is not a trusted peer", "caller", who, "claimedPath", chain.PathString())
}

// peer returns the name in auth.peers of the trusted peer p is, if it is
// one: the same method, issuer and principal, whatever its tenant.
func (g *gate) peer(p *auth.Principal) (string, bool) {
	if p == nil {
		return "", false
	}
	id := p.Identity()
	id.Tenant = ""
	name, ok := g.peers[id]
	return name, ok
}

// errPeerForm is why an auth.peers entry does not name a peer.
var errPeerForm = errors.New(`name the peer with how it authenticates: "token:<principal>" (a static token), "mtls:<principal>" (a client certificate) or "jwt:<issuer>#<sub>" (a JWT)`)

// parsePeer reads an auth.peers entry: "token:<principal>",
// "mtls:<principal>", or "jwt:<issuer>#<sub>" with the issuer of jwt (the
// auth.jwt section, nil when none). The principal or sub is the rest of
// the entry, as it is. A bare principal, as auth.peers held before, is
// refused: it could be a token's, a certificate's or a JWT's.
func parsePeer(s string, jwt *auth.JWTConfig) (auth.Identity, error) {
	method, id, ok := strings.Cut(s, ":")
	if !ok {
		return auth.Identity{}, fmt.Errorf("%w, such as token:%s", errPeerForm, s)
	}
	switch method {
	case auth.MethodToken, auth.MethodMTLS:
		if strings.TrimSpace(id) == "" {
			return auth.Identity{}, fmt.Errorf("no principal after %q", method+":")
		}
		return auth.Identity{Method: method, ID: id}, nil
	case auth.MethodJWT:
		if jwt == nil {
			return auth.Identity{}, errors.New("names a JWT peer, but auth.jwt is not configured")
		}
		sub, ok := strings.CutPrefix(id, jwt.Issuer+"#")
		if !ok || strings.TrimSpace(sub) == "" {
			return auth.Identity{}, fmt.Errorf("want jwt:%s#<sub>, with auth.jwt.issuer", jwt.Issuer)
		}
		return auth.Identity{Method: method, Issuer: jwt.Issuer, ID: sub}, nil
	}
	return auth.Identity{}, fmt.Errorf("%w, such as token:%s", errPeerForm, s)
}
