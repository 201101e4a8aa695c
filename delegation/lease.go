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

// renew renews the leases of the live delegations. A delegation whose
// lease was lost is no longer followed here: another process owns it.
func (e *Engine) renew() {
	type held struct {
		d     *Delegation
		lease Lease
	}
	var leases []held
	for _, d := range e.liveNow() {
		d.mu.Lock()
		if d.lease != nil {
			leases = append(leases, held{d, d.lease})
		}
		d.mu.Unlock()
	}
	for _, h := range leases {
		d := h.d
		ctx, cancel := context.WithTimeout(e.ctx, e.cfg.Leases.TTL()/3)
		err := h.lease.Renew(ctx)
		cancel()
		if err == nil || e.ctx.Err() != nil {
			continue
		}
		if errors.Is(err, ErrLeaseLost) {
			e.log.Warn("lost the lease of a delegation; another process follows it now", "delegation", d.rec.ID)
			d.stop()
			d.mu.Lock()
			if d.life.timer != nil {
				d.life.timer.Stop() // its new owner keeps the deadline
			}
			d.mu.Unlock()
			e.forget(d.rec.ID)
			continue
		}
		e.log.Warn("renew the lease of a delegation", "delegation", d.rec.ID, "error", err)
	}
}

// releaseAll gives up the leases of the live delegations, at Close, so
// another process takes them over at once rather than after the TTL.
func (e *Engine) releaseAll() {
	var leases []Lease
	for _, d := range e.liveNow() {
		d.mu.Lock()
		if d.lease != nil {
			leases = append(leases, d.lease)
		}
		d.mu.Unlock()
	}
	for _, l := range leases {
		release(l)
	}
}

// release gives a lease up, if there is one, bounded in time.
func release(l Lease) {
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = l.Release(ctx)
}
