package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// identityKey is the key of the orchd's identity in the meta bucket.
const identityKey = "identity"

// metaKV opens the meta bucket, creating it on first use.
func (s *Store) metaKV(ctx context.Context) (jetstream.KeyValue, error) {
	return s.ensureKV(ctx, jetstream.KeyValueConfig{
		Bucket: s.cfg.Namespace + "-meta", Description: "orchd: what every replica of one orchd shares",
		History: 1, Storage: jetstream.FileStorage, Replicas: s.cfg.Replicas,
	})
}

// Identity returns the identity of the logical orchd this store belongs
// to: the one kept in the store, or candidate, kept now, when none is.
// Every replica sharing the store gets the same answer, whichever asks
// first: the first to create the key wins.
func (s *Store) Identity(ctx context.Context, candidate string) (string, error) {
	kv, err := s.metaKV(ctx)
	if err != nil {
		return "", err
	}
	octx, cancel := s.opContext(ctx)
	defer cancel()
	// A bucket just created on a cluster may not have its leader yet: a
	// write it did not take is tried again, as every store write is.
	err = attempt(octx, func() error {
		_, err := kv.Create(octx, identityKey, []byte(candidate))
		return err
	})
	if err == nil {
		return candidate, nil
	} else if !errors.Is(err, jetstream.ErrKeyExists) {
		return "", fmt.Errorf("keep identity: %w", s.unavailable(ctx, err))
	}
	return s.readIdentity(ctx, kv)
}

// KeptIdentity returns the identity kept in the store, or "" when none
// is.
func (s *Store) KeptIdentity(ctx context.Context) (string, error) {
	kv, err := s.metaKV(ctx)
	if err != nil {
		return "", err
	}
	id, err := s.readIdentity(ctx, kv)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", nil
	}
	return id, err
}

// readIdentity reads the identity key.
func (s *Store) readIdentity(ctx context.Context, kv jetstream.KeyValue) (string, error) {
	octx, cancel := s.opContext(ctx)
	defer cancel()
	var e jetstream.KeyValueEntry
	err := attempt(octx, func() (err error) {
		e, err = kv.Get(octx, identityKey)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("read identity: %w", s.unavailable(ctx, err))
	}
	return string(e.Value()), nil
}

// Fresh says whether the embedded server's directory held no stream when
// Open started it: a store just made. An external cluster's store is
// never fresh.
func (s *Store) Fresh() bool { return s.fresh }
