package httpgate

import (
	"errors"
	"fmt"
	"strings"

	"github.com/orchd/orchd/auth"
)

// Peer returns the name in auth.peers of the trusted orchd peer p is, if
// it is one: the same method, issuer and principal, whatever its tenant.
func (g *Gate) Peer(p *auth.Principal) (string, bool) {
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
