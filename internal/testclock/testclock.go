// Package testclock is a settable time source for tests: its Now goes in
// the Now fields of orchd's configs, so a test moves time on without
// sleeping.
package testclock

import (
	"sync"
	"time"
)

// Clock is a time that moves only when told to. It is safe for concurrent
// use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// New returns a clock standing at start.
func New(start time.Time) *Clock { return &Clock{t: start} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
