// Package keylock holds locks by key: one holder of a key at a time, the
// others waiting for it, with no lock kept for a key nobody holds. orchd
// uses it to do one thing per key at once within a process: take one
// delegation over from the store, start the delegation one idempotency
// key names, pass on one answer to a delegation's question.
package keylock

import (
	"context"
	"sync"
)

// Locks holds the locks of the keys held now. The zero Locks is ready to
// use; a Locks must not be copied once used.
type Locks struct {
	mu sync.Mutex
	// held maps each key held to a channel closed when it is released.
	held map[string]chan struct{}
}

// Lock waits until no one holds key, or ctx ends (its error), then holds
// key until unlock is called.
func (l *Locks) Lock(ctx context.Context, key string) (unlock func(), err error) {
	for {
		l.mu.Lock()
		busy, ok := l.held[key]
		if !ok {
			if l.held == nil {
				l.held = map[string]chan struct{}{}
			}
			done := make(chan struct{})
			l.held[key] = done
			l.mu.Unlock()
			return func() {
				l.mu.Lock()
				delete(l.held, key)
				l.mu.Unlock()
				close(done)
			}, nil
		}
		l.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
