package delegation

import (
	"context"
	"errors"
	"time"
)

// Leases decide which process follows a running delegation: the one
// holding its lease. A lease expires unless its holder renews it, so when
// a process dies another takes its delegations over. The daemon's leases
// live in NATS JetStream (package store); an engine with no Leases owns
// every delegation it knows, as a lone process does.
type Leases interface {
	// Take acquires the lease on the delegation for owner. It fails with
	// an error wrapping ErrLeaseHeld while another owner holds it.
	Take(ctx context.Context, id, owner string) (Lease, error)
	// Holder returns the owner holding the delegation's lease, or "" when
	// none does.
	Holder(ctx context.Context, id string) (string, error)
	// TTL is how long a lease lasts unless renewed.
	TTL() time.Duration
}

// Lease is a held lease on one delegation.
type Lease interface {
	// Renew extends the lease by the TTL. It fails with an error wrapping
	// ErrLeaseLost once the lease expired or another owner took it: the
	// holder must then stop acting for the delegation.
	Renew(ctx context.Context) error
	// Release gives the lease up, for another owner to take at once.
	Release(ctx context.Context) error
	// Token increases with every change of holder: a fencing token.
	Token() uint64
}

// Lease errors.
var (
	// ErrLeaseHeld means another owner holds the lease.
	ErrLeaseHeld = errors.New("lease held by another owner")
	// ErrLeaseLost means the lease expired or another owner took it.
	ErrLeaseLost = errors.New("lease lost")
)
