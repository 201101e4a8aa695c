package testwait_test

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/orchd/orchd/internal/testwait"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a testing.TB whose Fatalf records the message and ends the
// goroutine, as the real one does.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run runs wait with a recorder on its own goroutine, which Fatalf ends,
// and returns the failure message, "" when it passed.
func run(t *testing.T, wait func(testing.TB)) string {
	t.Helper()
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait(r)
	}()
	<-done
	return r.failed
}

func TestUntil(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	failed := run(t, func(tb testing.TB) {
		testwait.Until(tb, 10*time.Second, "third call", func() bool { return calls.Add(1) == 3 })
	})
	if failed != "" || calls.Load() != 3 {
		t.Errorf("Until returned after %d calls, failure %q; want 3 calls and no failure", calls.Load(), failed)
	}

	began := time.Now()
	failed = run(t, func(tb testing.TB) {
		testwait.Until(tb, 50*time.Millisecond, "never", func() bool { return false })
	})
	if want := "never: not within 50ms"; failed != want {
		t.Errorf("failure = %q, want %q", failed, want)
	}
	if took := time.Since(began); took < 50*time.Millisecond {
		t.Errorf("gave up after %v, before the limit", took)
	}
}

func TestSucceeds(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	failed := run(t, func(tb testing.TB) {
		testwait.Succeeds(tb, 10*time.Second, "third call", func() error {
			if n := calls.Add(1); n < 3 {
				return fmt.Errorf("call %d", n)
			}
			return nil
		})
	})
	if failed != "" || calls.Load() != 3 {
		t.Errorf("Succeeds returned after %d calls, failure %q; want 3 calls and no failure", calls.Load(), failed)
	}

	calls.Store(0)
	failed = run(t, func(tb testing.TB) {
		testwait.Succeeds(tb, 50*time.Millisecond, "never", func() error {
			return fmt.Errorf("state %d", calls.Add(1))
		})
	})
	// The failure names the last error seen, not the first.
	if want := fmt.Sprintf("never: not within 50ms: state %d", calls.Load()); failed != want || calls.Load() < 2 {
		t.Errorf("failure = %q after %d calls, want %q after 2 or more", failed, calls.Load(), want)
	}
}
