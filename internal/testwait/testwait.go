// Package testwait waits, in tests, for something another goroutine or
// process does on its own time: a record reaching a state, a server
// starting, a line appearing in a log.
//
// It polls: the condition is checked at once, then every [Interval], until
// it holds or the time given runs out, and then the test fails with a
// message saying what was awaited and, for [Succeeds], what was last seen.
// Give generous limits (seconds, not milliseconds): a condition that holds
// returns at once, and the limit only decides how long a broken test takes
// to fail on a busy machine.
//
// Waits call t.Fatalf, so call them from the goroutine running the test
// (or benchmark), never from a goroutine it started. The condition runs on
// the calling goroutine; it needs no locking of its own beyond what it
// reads.
package testwait

import (
	"testing"
	"time"
)

// Interval is how long a wait sleeps between two checks of its condition.
const Interval = 10 * time.Millisecond

// Until checks cond until it returns true, and fails the test with
// "<what>: not within <within>" if it has not within the limit. Call it
// from the test's goroutine only.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(Interval)
	}
}

// Succeeds calls check until it returns nil, and fails the test with
// "<what>: not within <within>: <last error>" if it has not within the
// limit: check's error says what it saw instead, so the failure does. Call
// it from the test's goroutine only.
func Succeeds(t testing.TB, within time.Duration, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, within, err)
		}
		time.Sleep(Interval)
	}
}
