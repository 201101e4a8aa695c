package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/delegation"
)

// LeasesConfig tunes the delegation leases.
type LeasesConfig struct {
	// TTL is how long a lease lasts unless renewed: whole seconds, at
	// least 1s. 0 means DefaultLeaseTTL. Holders renew well within it
	// (a third of it, say), since the clock that counts is the server's.
	TTL time.Duration
}

// DefaultLeaseTTL is the lease TTL unless LeasesConfig says otherwise.
const DefaultLeaseTTL = 10 * time.Second

// maxOwnerLen bounds a lease owner's name.
const maxOwnerLen = 256

// Leases keeps delegation leases in the KV bucket <namespace>-leases,
// whose TTL is the lease TTL: a lease is the key of its delegation,
// holding its owner's name. Take creates the key, which fails while it
// exists; Renew rewrites it expecting the revision it last wrote, which
// restarts its age; a key not renewed within the TTL ages out, and
// Release deletes it at once. It implements delegation.Leases, and every
// error from a store that cannot be reached wraps
// delegation.ErrUnavailable.
type Leases struct {
	s   *Store
	kv  jetstream.KeyValue
	ttl time.Duration
}

// Leases sets up the leases bucket, creating it or setting its TTL to
// cfg's, and returns the leases on it. All processes sharing a namespace
// must use one TTL: the last to start sets it.
func (s *Store) Leases(ctx context.Context, cfg LeasesConfig) (*Leases, error) {
	if cfg.TTL == 0 {
		cfg.TTL = DefaultLeaseTTL
	}
	if cfg.TTL < time.Second || cfg.TTL%time.Second != 0 {
		return nil, fmt.Errorf("leases: ttl %s is not a whole number of seconds of at least 1s", cfg.TTL)
	}
	kv, err := s.ensureKV(ctx, jetstream.KeyValueConfig{
		Bucket: s.cfg.Namespace + "-leases", Description: "orchd delegation leases", History: 1,
		TTL: cfg.TTL, Storage: jetstream.FileStorage, Replicas: s.cfg.Replicas,
	})
	if err != nil {
		return nil, err
	}
	return &Leases{s: s, kv: kv, ttl: cfg.TTL}, nil
}

// TTL implements delegation.Leases.
func (l *Leases) TTL() time.Duration { return l.ttl }

// Take implements delegation.Leases. An owner taking a lease it holds
// already gets it anew, with a new token.
func (l *Leases) Take(ctx context.Context, id, owner string) (delegation.Lease, error) {
	key, err := delegationKey(id)
	if err != nil {
		return nil, fmt.Errorf("take lease: %w: %w", delegation.ErrBadRequest, err)
	}
	if owner == "" || len(owner) > maxOwnerLen {
		return nil, fmt.Errorf("take lease on %s: %w: owner must be 1 to %d bytes", id, delegation.ErrBadRequest, maxOwnerLen)
	}
	octx, cancel := l.s.opContext(ctx)
	defer cancel()
	var le delegation.Lease
	err = attempt(octx, func() (err error) {
		le, err = l.take(octx, id, key, owner)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("take lease on %s: %w", id, l.s.unavailable(ctx, err))
	}
	return le, nil
}

// leaseSkew is how much longer than the TTL a lease not renewed is still
// its holder's: room for clocks that differ between orchd and the NATS
// server.
const leaseSkew = time.Second

func (l *Leases) take(ctx context.Context, id, key, owner string) (delegation.Lease, error) {
	// A lease that ages out between the failed create and the read is
	// free again: one more try takes it.
	for range 2 {
		rev, err := l.kv.Create(ctx, key, []byte(owner))
		if err == nil {
			return &lease{l: l, id: id, key: key, owner: owner, token: rev, rev: rev}, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, err
		}
		e, err := l.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		holder := string(e.Value())
		if holder != owner && time.Since(e.Created()) <= l.ttl+leaseSkew {
			return nil, fmt.Errorf("%w: %s holds it", delegation.ErrLeaseHeld, holder)
		}
		// Ours, or not renewed for longer than the TTL: its holder is gone,
		// whether or not the bucket has removed the key yet (JetStream
		// removes aged keys when it gets to it, later under load). The
		// update takes it only if nobody renewed or took it meanwhile.
		rev, err = l.kv.Update(ctx, key, []byte(owner), e.Revision())
		if isWrongLastSequence(err) {
			return nil, fmt.Errorf("%w: taken meanwhile", delegation.ErrLeaseHeld)
		}
		if err != nil {
			return nil, err
		}
		return &lease{l: l, id: id, key: key, owner: owner, token: rev, rev: rev}, nil
	}
	return nil, fmt.Errorf("%w: it kept changing hands", delegation.ErrLeaseHeld)
}

// Holder implements delegation.Leases.
func (l *Leases) Holder(ctx context.Context, id string) (string, error) {
	key, err := delegationKey(id)
	if err != nil {
		return "", nil // nobody can hold a lease on this id
	}
	octx, cancel := l.s.opContext(ctx)
	defer cancel()
	var e jetstream.KeyValueEntry
	err = attempt(octx, func() (err error) {
		e, err = l.kv.Get(octx, key)
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("lease holder of %s: %w", id, l.s.unavailable(ctx, err))
	}
	return string(e.Value()), nil
}

// lease is one held lease: the revision it was taken at (its token) and
// the one it last wrote, which the next write must find.
type lease struct {
	l              *Leases
	id, key, owner string
	token          uint64
	mu             sync.Mutex
	rev            uint64
	lost, released bool
}

// Renew implements delegation.Lease. A renewal that finds another
// revision (the lease aged out, was released, or another owner took it)
// loses the lease for good; one that cannot reach the store says so
// (delegation.ErrUnavailable) and may be retried while the TTL lasts.
func (le *lease) Renew(ctx context.Context) error {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.lost || le.released {
		return fmt.Errorf("renew lease on %s: %w", le.id, delegation.ErrLeaseLost)
	}
	octx, cancel := le.l.s.opContext(ctx)
	defer cancel()
	var rev uint64
	err := attempt(octx, func() (err error) {
		rev, err = le.l.kv.Update(octx, le.key, []byte(le.owner), le.rev)
		return err
	})
	if isWrongLastSequence(err) || errors.Is(err, jetstream.ErrKeyNotFound) {
		le.lost = true
		return fmt.Errorf("renew lease on %s: %w", le.id, delegation.ErrLeaseLost)
	}
	if err != nil {
		return fmt.Errorf("renew lease on %s: %w", le.id, le.l.s.unavailable(ctx, err))
	}
	le.rev = rev
	return nil
}

// Release implements delegation.Lease: it deletes the lease if it is
// still this one, so another owner can take it at once. Releasing a lease
// already lost, or released, does nothing.
func (le *lease) Release(ctx context.Context) error {
	le.mu.Lock()
	defer le.mu.Unlock()
	if le.lost || le.released {
		return nil
	}
	octx, cancel := le.l.s.opContext(ctx)
	defer cancel()
	err := attempt(octx, func() error { return le.l.kv.Delete(octx, le.key, jetstream.LastRevision(le.rev)) })
	if err != nil && !isWrongLastSequence(err) && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("release lease on %s: %w", le.id, le.l.s.unavailable(ctx, err))
	}
	le.released = true
	return nil
}

// Token implements delegation.Lease: the revision the lease was taken at.
// Every take writes the key anew at a higher revision, so tokens grow with
// every change of holder; renewals keep it.
func (le *lease) Token() uint64 { return le.token }

var (
	_ delegation.Leases = (*Leases)(nil)
	_ delegation.Lease  = (*lease)(nil)
)
