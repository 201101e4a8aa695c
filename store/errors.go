package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/delegation"
)

// unavailable wraps err in delegation.ErrUnavailable when it says the
// store could not be reached or could not keep the write: no connection,
// no responders, no answer in time, no quorum, no room. ctx is the
// caller's context: an operation that ended because the caller gave up
// returns the caller's error, not "unavailable". Other errors, and nil,
// come back unchanged.
func unavailable(ctx context.Context, err error) error {
	switch {
	case err == nil, errors.Is(err, delegation.ErrUnavailable):
		return err
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return err
	case isUnavailable(err):
		return fmt.Errorf("%w: %w", delegation.ErrUnavailable, err)
	}
	return err
}

// isUnavailable reports whether err is one of the NATS and JetStream
// errors that mean the store is unreachable, not answering, or full.
func isUnavailable(err error) bool {
	for _, target := range []error{
		nats.ErrNoResponders, nats.ErrTimeout, nats.ErrConnectionClosed,
		nats.ErrConnectionDraining, nats.ErrConnectionReconnecting,
		nats.ErrDisconnected, nats.ErrNoServers, nats.ErrReconnectBufExceeded,
		nats.ErrStaleConnection, nats.ErrInvalidConnection,
		jetstream.ErrNoStreamResponse, jetstream.ErrJetStreamNotEnabled,
		jetstream.ErrJetStreamNotEnabledForAccount, jetstream.ErrNoHeartbeat,
		context.DeadlineExceeded, errWatchClosed, errFenced,
	} {
		if errors.Is(err, target) {
			return true
		}
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	switch apiErr.ErrorCode {
	case errCodeSequenceMismatch:
		// A 503 that reports a lost compare-and-set, not an outage.
		return false
	case errCodeMemoryExceeded, errCodeStorageExceeded, errCodeNoPeers:
		return true
	}
	return apiErr.Code == 503
}

// JetStream error codes the store decides on, beyond those nats.go names.
const (
	// errCodeSequenceMismatch is "expected stream sequence does not
	// match", sent with status 503 although nothing is down.
	errCodeSequenceMismatch jetstream.ErrorCode = 10063
	// errCodeInsufficientResources, errCodeMemoryExceeded and
	// errCodeStorageExceeded mean the server has no room left for the
	// write: the first is what the embedded server answers once its use
	// is over its limit (status 503).
	errCodeInsufficientResources jetstream.ErrorCode = 10023
	errCodeMemoryExceeded        jetstream.ErrorCode = 10028
	errCodeStorageExceeded       jetstream.ErrorCode = 10047
	// errCodeNoPeers is "no suitable peers for placement" (status 400):
	// too few cluster nodes are online for the replicas asked, as while
	// a cluster forms or a node restarts; it passes when they return.
	errCodeNoPeers jetstream.ErrorCode = 10005
)

// isWrongLastSequence reports whether err is a lost compare-and-set on a
// subject's last sequence: the KV revision or the expected last message
// was not the one given. The check is on the code, before any KV
// mapping, since ErrKeyRevisionMismatch also matches ErrKeyExists.
func isWrongLastSequence(err error) bool {
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// notProcessed reports whether err says the request reached nobody who
// acted on it: no responders (a stream between leaders, or interest not
// yet known across a cluster), or the server answering it is temporarily
// unavailable; or a listing's watcher closed before it read everything.
// Any request, a write included, is safe to send again. A
// store with no room left is not tried again: it stays full for longer
// than one operation's timeout, and the caller should hear so at once.
func notProcessed(err error) bool {
	if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, errWatchClosed) {
		return true
	}
	var apiErr *jetstream.APIError
	if !errors.As(err, &apiErr) || apiErr.Code != 503 {
		return false
	}
	switch apiErr.ErrorCode {
	case errCodeSequenceMismatch, errCodeInsufficientResources, errCodeMemoryExceeded, errCodeStorageExceeded:
		return false
	}
	return true
}

// attempt runs op again, backing off, while it fails with an error
// notProcessed says is safe to retry and ctx (the operation's, bounded by
// the store's timeout) lasts; it returns op's last error.
func attempt(ctx context.Context, op func() error) error {
	delay := 20 * time.Millisecond
	for {
		err := op()
		if err == nil || !notProcessed(err) {
			return err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		delay = min(2*delay, 250*time.Millisecond)
	}
}
