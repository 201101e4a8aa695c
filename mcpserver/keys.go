package mcpserver

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/keylock"
	"github.com/orchd/orchd/policies"
)

// Idempotency keys.
//
// A 2026-07-28 client whose response stream breaks must send the request
// again, as a new request; an older client retries a call that timed out.
// orchd_delegate with an idempotencyKey then returns the delegation the
// first call started. The key is not kept anywhere: the delegation's id
// is derived from it, the caller and this orchd's identity (keyedID), so
// the record in the store is the memory of the key, on every replica and
// after any restart. Two calls with one key at once on one process start
// one delegation (keyed.busy); on two replicas at the same instant both
// could send the work, and the later record replaces the earlier.

// keyed starts delegations named by idempotency keys.
type keyed struct {
	// self is this orchd's identity in chains: keys of one caller name
	// different delegations on different orchds.
	self string
	// busy holds the ids being started, and the delegations being
	// answered (mrtr.go).
	busy keylock.Locks
}

// keyedID is the delegation id of key for caller: a UUID-shaped SHA-256
// of this orchd's identity, the caller's identity and the key.
func (k *keyed) keyedID(caller policies.Caller, key string) string {
	owner := auth.Identity{Method: caller.Method, Issuer: caller.Issuer, ID: caller.Principal, Tenant: caller.Tenant}.Key()
	h := sha256.Sum256([]byte("orchd mcp idempotency key\x00" + k.self + "\x00" + owner + "\x00" + key))
	h[6] = h[6]&0x0f | 0x80 // version 8: a name of our own making
	h[8] = h[8]&0x3f | 0x80 // RFC 9562 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// delegate returns the delegation key names for dr's caller, starting it
// with dr when there is none.
func (k *keyed) delegate(ctx context.Context, s *Server, dr delegation.Request, key string) (delegation.Record, error) {
	if len(key) > maxKeyBytes {
		return delegation.Record{}, fmt.Errorf("%w: idempotencyKey is longer than %d bytes", delegation.ErrBadRequest, maxKeyBytes)
	}
	id := k.keyedID(dr.Caller, key)
	release, err := k.busy.Lock(ctx, id)
	if err != nil {
		return delegation.Record{}, err
	}
	defer release()
	rec, err := s.authz.Read(ctx, s.engine, id)
	switch {
	case err == nil:
		return rec, nil
	case !errors.Is(err, delegation.ErrNotFound):
		return delegation.Record{}, err
	}
	d, err := s.engine.Delegate(ctx, dr, delegation.WithID(id))
	if err != nil {
		return delegation.Record{}, err
	}
	return d.Record(), nil
}

// maxKeyBytes bounds an idempotency key.
const maxKeyBytes = 256

// signalID is the message id of a steer or interrupt sent with key to
// delegation id: a retry with the key is the same signal, delivered once.
func signalID(id, key string) string {
	h := sha256.Sum256([]byte("orchd mcp signal\x00" + id + "\x00" + key))
	return fmt.Sprintf("mcp-%x", h[:16])
}
