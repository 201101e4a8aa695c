// Package outagelog logs the failures of one kind of state store
// operation so that an outage of the store says itself in a few lines:
// the engine's writes of delegations, the followers' reads of their logs,
// its takes of running delegations' leases, the writes of A2A tasks.
package outagelog

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// Log reports failures of one kind of store operation. One failure is
// worth a line. But when the store is out of reach (a NATS node crashed
// and its streams elect a leader, the cluster restarts) every running
// delegation's next write fails at once, and every follower's next read:
// thousands of lines that say the same. So while operations fail as
// unavailable, Log logs the first, then how many failed each
// summaryEvery, then one line when they go through again. Other failures
// are logged one by one.
type Log struct {
	log *slog.Logger
	now func() time.Time
	// level is the level of the failures' lines; the line saying the
	// operations go through again is a warning.
	level slog.Level
	// what names the operations, as "delegations' writes"; meanwhile
	// says what becomes of the failed ones while the outage lasts. The
	// first failure's own message says it for that one.
	what, meanwhile string
	// unavailable says whether an error is the store's being out of
	// reach.
	unavailable func(error) bool
	// failing is set while an outage lasts, so an operation that went
	// through costs one atomic load when none does.
	failing atomic.Bool

	mu      sync.Mutex
	started time.Time // the outage's first failure
	last    time.Time // its latest
	ok      time.Time // its latest success
	said    time.Time // its last line
	since   int       // failures since said
	total   int       // failures since started
	// settling looks again, once settleAfter has passed since the
	// latest failure, whether an operation that went through meanwhile
	// ended the outage; nil when no look is due.
	settling *time.Timer
	closed   bool
}

// New returns the outage log of the operations what, whose failures are
// logged at level and, while the store is out of reach (an error
// unavailable says is so), become what meanwhile says.
func New(log *slog.Logger, now func() time.Time, level slog.Level, what, meanwhile string, unavailable func(error) bool) *Log {
	return &Log{log: log, now: now, level: level, what: what, meanwhile: meanwhile, unavailable: unavailable}
}

// summaryEvery is how often Log says how many operations failed while
// the store stays unavailable.
const summaryEvery = 10 * time.Second

// settleAfter is how long after the latest failure an operation that
// goes through ends an outage. Within it, operations on the store's other
// streams go through while those on the stream electing a leader fail:
// one outage, not one per failure.
const settleAfter = time.Second

// Failed reports an operation that failed with err: msg says what it
// was, args (key-value pairs) on what.
func (o *Log) Failed(msg string, err error, args ...any) {
	if !o.unavailable(err) {
		o.log.Log(context.Background(), o.level, msg, append(args, "error", err)...)
		return
	}
	now := o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.last = now
	if !o.failing.Load() {
		o.failing.Store(true)
		o.started, o.said, o.ok, o.since, o.total = now, now, time.Time{}, 0, 1
		o.log.Log(context.Background(), o.level, msg+"; while the state store is unavailable, the other failures are counted and logged every "+summaryEvery.String(),
			append(args, "error", err)...)
		return
	}
	o.since++
	o.total++
	if now.Sub(o.said) < summaryEvery {
		return
	}
	o.log.Log(context.Background(), o.level, o.what+" still fail: the state store is unavailable; "+o.meanwhile,
		"failed", o.since, "failedSinceStart", o.total, "since", o.started, "error", err)
	o.said, o.since = now, 0
}

// Succeeded reports an operation that went through: it ends an outage
// once none failed for settleAfter after it.
func (o *Log) Succeeded() {
	if !o.failing.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ok = o.now()
	o.settleLocked()
}

// settleLocked ends the outage, saying so, when an operation went
// through after its latest failure, and that failure is settleAfter
// old; when it is younger, it looks again once it is that old, so that
// the last operations of an outage, which may come within settleAfter
// of a failure, still end it. Callers hold mu.
func (o *Log) settleLocked() {
	if !o.failing.Load() || !o.ok.After(o.last) {
		return
	}
	if wait := settleAfter - o.now().Sub(o.last); wait > 0 {
		if o.settling == nil && !o.closed {
			o.settling = time.AfterFunc(wait, o.settle)
		}
		return
	}
	o.failing.Store(false)
	o.log.Warn(o.what+" go through again", "failed", o.total, "lasted", o.last.Sub(o.started).Round(time.Millisecond))
}

// settle is the settling timer's look.
func (o *Log) settle() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.settling = nil
	o.settleLocked()
}

// Close stops the settling timer: an outage then ends unsaid.
func (o *Log) Close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	if o.settling != nil {
		o.settling.Stop()
		o.settling = nil
	}
}
