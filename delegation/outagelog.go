package delegation

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// outageLog reports failures of one kind of store operation: the
// engine's writes of delegations, the followers' reads of their logs. One
// failure is worth a line. But when the store is out of reach (a NATS
// node crashed and its streams elect a leader, the cluster restarts)
// every running delegation's next write fails at once, and every
// follower's next read: thousands of lines that say the same. So while
// operations fail as unavailable, outageLog logs the first, then how many
// failed each outageSummary, then one line when they go through again.
// Other failures are logged one by one.
type outageLog struct {
	log *slog.Logger
	now func() time.Time
	// level is the level of the failures' lines; the line saying the
	// operations go through again is a warning.
	level slog.Level
	// what names the operations, as "delegations' writes"; meanwhile
	// says what becomes of the failed ones while the outage lasts. The
	// first failure's own message says it for that one.
	what, meanwhile string
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
	// settling looks again, once outageSettle has passed since the
	// latest failure, whether an operation that went through meanwhile
	// ended the outage; nil when no look is due.
	settling *time.Timer
	closed   bool
}

// newOutageLog returns the outage log of the operations what, whose
// failures are logged at level and, while the store is out of reach,
// become what meanwhile says.
func newOutageLog(log *slog.Logger, now func() time.Time, level slog.Level, what, meanwhile string) *outageLog {
	return &outageLog{log: log, now: now, level: level, what: what, meanwhile: meanwhile}
}

// outageSummary is how often outageLog says how many operations failed
// while the store stays unavailable.
const outageSummary = 10 * time.Second

// outageSettle is how long after the latest failure an operation that
// goes through ends an outage. Within it, operations on the store's other
// streams go through while those on the stream electing a leader fail:
// one outage, not one per failure.
const outageSettle = time.Second

// failed reports an operation that failed with err: msg says what it
// was, args (key-value pairs) which delegation.
func (o *outageLog) failed(msg string, err error, args ...any) {
	if !errors.Is(err, ErrUnavailable) {
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
		o.log.Log(context.Background(), o.level, msg+"; while the state store is unavailable, the other failures are counted and logged every "+outageSummary.String(),
			append(args, "error", err)...)
		return
	}
	o.since++
	o.total++
	if now.Sub(o.said) < outageSummary {
		return
	}
	o.log.Log(context.Background(), o.level, o.what+" still fail: the state store is unavailable; "+o.meanwhile,
		"failed", o.since, "failedSinceStart", o.total, "since", o.started, "error", err)
	o.said, o.since = now, 0
}

// succeeded reports an operation that went through: it ends an outage
// once none failed for outageSettle after it.
func (o *outageLog) succeeded() {
	if !o.failing.Load() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ok = o.now()
	o.settleLocked()
}

// settleLocked ends the outage, saying so, when an operation went
// through after its latest failure, and that failure is outageSettle
// old; when it is younger, it looks again once it is that old, so that
// the last operations of an outage, which may come within outageSettle
// of a failure, still end it. Callers hold mu.
func (o *outageLog) settleLocked() {
	if !o.failing.Load() || !o.ok.After(o.last) {
		return
	}
	if wait := outageSettle - o.now().Sub(o.last); wait > 0 {
		if o.settling == nil && !o.closed {
			o.settling = time.AfterFunc(wait, o.settle)
		}
		return
	}
	o.failing.Store(false)
	o.log.Warn(o.what+" go through again", "failed", o.total, "lasted", o.last.Sub(o.started).Round(time.Millisecond))
}

// settle is the settling timer's look.
func (o *outageLog) settle() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.settling = nil
	o.settleLocked()
}

// close stops the settling timer: an outage then ends unsaid.
func (o *outageLog) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.closed = true
	if o.settling != nil {
		o.settling.Stop()
		o.settling = nil
	}
}
