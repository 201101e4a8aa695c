package keylock

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLocks_OneHolderPerKey: many goroutines locking one key hold it one
// at a time, while another key is free; a wait ends with its context;
// and nothing stays held once all have unlocked.
func TestLocks_OneHolderPerKey(t *testing.T) {
	var l Locks
	var holders, most atomic.Int32
	var wg sync.WaitGroup
	for range 50 {
		wg.Go(func() {
			unlock, err := l.Lock(context.Background(), "a")
			if err != nil {
				t.Error(err)
				return
			}
			n := holders.Add(1)
			for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
			}
			time.Sleep(100 * time.Microsecond)
			holders.Add(-1)
			unlock()
		})
	}
	unlockB, err := l.Lock(context.Background(), "b")
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if most.Load() != 1 {
		t.Errorf("%d held key a at once", most.Load())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(ctx, "b"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("locking a held key until the context ends: %v", err)
	}
	unlockB()
	if len(l.held) != 0 {
		t.Errorf("keys still held: %v", l.held)
	}
}
