package delegation

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// writeLog reports the store's failed writes of delegations. A write
// that fails is tried again with the delegation's next, and one failure
// is worth a line. But when the store is out of reach (a NATS node
// crashed and its streams elect a leader, the cluster restarts) every
// running delegation's next write fails at once: thousands of lines that
// say the same. So while writes fail as unavailable, writeLog logs the
// first, then how many failed each outageSummary, then one line when
// writes go through again. Other failures are logged one by one.
type writeLog struct {
	log *slog.Logger
	now func() time.Time
	// failing is set while an outage lasts, so a write that went through
	// costs one atomic load when none does.
	failing atomic.Bool

	mu      sync.Mutex
	started time.Time // the outage's first failure
	last    time.Time // its latest
	said    time.Time // its last line
	since   int       // failures since said
	total   int       // failures since started
}

// outageSummary is how often writeLog says how many writes failed while
// the store stays unavailable.
const outageSummary = 10 * time.Second

// outageSettle is how long after the latest failure a write that goes
// through ends an outage. Within it, writes to the store's other streams
// go through while those to the stream electing a leader fail: one
// outage, not one per failure.
const outageSettle = time.Second

// failed reports a write of delegation id, from event seq on, that
// failed with err; msg says what was written and what happens next.
func (w *writeLog) failed(msg, id string, seq int64, err error) {
	if !errors.Is(err, ErrUnavailable) {
		w.log.Error(msg, "delegation", id, "seq", seq, "error", err)
		return
	}
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.last = now
	if !w.failing.Load() {
		w.failing.Store(true)
		w.started, w.said, w.since, w.total = now, now, 0, 1
		w.log.Error(msg+"; while the store is unavailable, the others' failures are counted and logged every "+outageSummary.String(),
			"delegation", id, "seq", seq, "error", err)
		return
	}
	w.since++
	w.total++
	if now.Sub(w.said) < outageSummary {
		return
	}
	w.log.Error("delegations' writes still fail: the state store is unavailable; each is tried again with its delegation's next",
		"failed", w.since, "failedSinceStart", w.total, "since", w.started, "error", err)
	w.said, w.since = now, 0
}

// succeeded reports a write that went through: it ends an outage when
// none failed for outageSettle.
func (w *writeLog) succeeded() {
	if !w.failing.Load() {
		return
	}
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.failing.Load() || now.Sub(w.last) < outageSettle {
		return
	}
	w.failing.Store(false)
	w.log.Warn("delegations' writes go through again", "failed", w.total, "lasted", w.last.Sub(w.started).Round(time.Millisecond))
}
