package a2aserver

import (
	"context"
	"fmt"

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
func (x *executor) believe(ctx context.Context, req *delegation.Request, chain delegation.Chain) {
	if !x.gate.Enabled() {
		chain.OnBehalfOf = nil
		req.Chain = &chain
		return
	}
	p, _ := auth.PrincipalFrom(ctx)
	if peer, ok := x.gate.Peer(p); ok {
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
	x.log.WarnContext(ctx, "delegation chain context ignored: the caller is not a trusted peer", "caller", who, "claimedPath", chain.PathString())
}
