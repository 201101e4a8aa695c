package registry

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrBreakerOpen means an agent's circuit breaker refused a call: recent
// calls to its A2A endpoint failed and it has not recovered yet.
var ErrBreakerOpen = errors.New("agent's circuit breaker is open")

// maxBreakerError bounds the error text an agent's breaker keeps.
const maxBreakerError = 512

// BreakerState says whether calls to an agent go through.
type BreakerState string

// The states of an agent's circuit breaker.
const (
	// BreakerClosed lets every call through: the agent answers.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen refuses new work until Breaker.RetryAt; after that one
	// call may try the agent again, and the refresher revalidates its card.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen means one call is trying the agent again; new work is
	// refused until it ends.
	BreakerHalfOpen BreakerState = "half-open"
)

// Breaker is the circuit breaker over an agent's A2A endpoint. The
// delegation engine reports every call's outcome; Config.BreakerAfter
// failures in a row that were the agent's fault (it could not be reached,
// it answered 5xx or an internal error, it timed out) open it. An open
// breaker refuses new work for a backoff that starts at
// Config.BreakerMinBackoff and doubles each time it opens again without a
// call succeeding in between, up to Config.BreakerMaxBackoff. Once the
// backoff is over one call may try again (half-open): its success closes
// the breaker and its failure opens it for the next backoff. A successful
// call or card refresh closes it at any time.
type Breaker struct {
	// State is closed, open or half-open.
	State BreakerState `json:"state"`
	// Failures counts the calls that failed in a row through the agent's
	// fault.
	Failures int `json:"failures,omitempty"`
	// LastError is why the last of them failed.
	LastError string `json:"lastError,omitempty"`
	// Opens counts how often the breaker opened since a call last
	// succeeded; each one doubles the backoff.
	Opens int `json:"opens,omitempty"`
	// RetryAt is, while the breaker is open, when one call may try again.
	RetryAt time.Time `json:"retryAt,omitzero"`

	// probeUntil is, while half-open, when the trying call is given up on
	// and another may try.
	probeUntil time.Time
}

// closed reports whether the breaker lets every call through. The zero
// Breaker is closed.
func (b *Breaker) closed() bool { return b.State == BreakerClosed || b.State == "" }

// refusal says why the breaker refuses new work at now, or "" when a
// call may go: the breaker is closed, or its backoff is over.
func (b *Breaker) refusal(now time.Time) string {
	switch b.State {
	case BreakerOpen:
		if now.Before(b.RetryAt) {
			return b.failed() + "; retry after " + roundUp(b.RetryAt.Sub(now)).String()
		}
	case BreakerHalfOpen:
		if now.Before(b.probeUntil) {
			return b.failed() + "; one call is trying it again"
		}
	}
	return ""
}

// failed says how many calls failed and why the last one did.
func (b *Breaker) failed() string {
	calls := " calls"
	if b.Failures == 1 {
		calls = " call"
	}
	return strconv.Itoa(b.Failures) + calls + " failed in a row, last: " + b.LastError
}

// describe says, for the agent's health, why the breaker is not closed.
func (b *Breaker) describe() string {
	if b.State == BreakerHalfOpen {
		return "breaker half-open: " + b.failed() + "; one call is trying it again"
	}
	return "breaker open: " + b.failed() + "; retry at " + b.RetryAt.UTC().Format(time.RFC3339)
}

// roundUp rounds a wait up to a whole second, or a millisecond below one.
func roundUp(d time.Duration) time.Duration {
	unit := time.Second
	if d < time.Second {
		unit = time.Millisecond
	}
	return (d + unit - 1).Truncate(unit)
}

// breakerEvent is what happened that moves an agent's breaker.
type breakerEvent int

const (
	callSucceeded breakerEvent = iota
	callFailed
	// callAbandoned is a call whose outcome says nothing of the agent:
	// the caller's fault, or canceled.
	callAbandoned
	refreshSucceeded
	refreshFailed
)

// step moves the breaker for ev at now and reports whether it changed.
// cause is the error of a failed call or refresh.
func (b *Breaker) step(ev breakerEvent, cause error, now time.Time, cfg *Config) bool {
	due := b.State == BreakerHalfOpen || b.State == BreakerOpen && !now.Before(b.RetryAt)
	switch ev {
	case callSucceeded:
		if b.closed() && b.Failures == 0 && b.Opens == 0 {
			return false
		}
		*b = Breaker{State: BreakerClosed}
	case callFailed:
		switch {
		case b.closed():
			b.Failures++
			b.LastError = errorText(cause)
			if b.Failures >= cfg.BreakerAfter {
				b.open(now, cfg)
			}
		case due: // the agent still fails after its backoff
			b.Failures++
			b.LastError = errorText(cause)
			b.open(now, cfg)
		default: // open, within its backoff: calls begun before it opened
			return false
		}
	case callAbandoned:
		if b.State != BreakerHalfOpen {
			return false
		}
		// The trying call ended without a verdict: the next one tries.
		b.State, b.probeUntil = BreakerOpen, time.Time{}
	case refreshSucceeded:
		if b.closed() {
			return false
		}
		// Opens stays: if calls fail again without one succeeding, the
		// breaker reopens for longer.
		*b = Breaker{State: BreakerClosed, Opens: b.Opens}
	case refreshFailed:
		if !due {
			return false
		}
		b.LastError = "card refresh: " + errorText(cause)
		b.open(now, cfg)
	}
	return true
}

// open opens the breaker at now for the next backoff.
func (b *Breaker) open(now time.Time, cfg *Config) {
	b.Opens++
	b.State, b.probeUntil = BreakerOpen, time.Time{}
	b.RetryAt = now.Add(doubling(cfg.BreakerMinBackoff, cfg.BreakerMaxBackoff, b.Opens))
}

// errorText is err's message, bounded.
func errorText(err error) string {
	if err == nil {
		return "unknown error"
	}
	s := err.Error()
	if len(s) > maxBreakerError {
		s = strings.ToValidUTF8(s[:maxBreakerError], "") + "…"
	}
	return s
}

// doubling returns lo doubled n-1 times (n >= 1), capped at hi.
func doubling(lo, hi time.Duration, n int) time.Duration {
	d := lo
	for i := 1; i < n && d < hi; i++ {
		d *= 2
	}
	return min(d, hi)
}

// setHealth derives Healthy and UnhealthyReason from the card's refreshes
// and the breaker.
func (a *Agent) setHealth(cfg *Config) {
	var why []string
	if a.Failures >= cfg.UnhealthyAfter {
		why = append(why, fmt.Sprintf("%d card refreshes failed in a row, last: %s", a.Failures, a.LastError))
	}
	if !a.Breaker.closed() {
		why = append(why, a.Breaker.describe())
	}
	a.Healthy = len(why) == 0
	a.UnhealthyReason = strings.Join(why, "; ")
}

// scheduleProbe brings the agent's next card revalidation forward to when
// its open breaker's backoff ends, so a card refresh can find it
// recovered without waiting for a call.
func (a *Agent) scheduleProbe() {
	if a.Breaker.State == BreakerOpen && a.Breaker.RetryAt.Before(a.nextCheck) {
		a.nextCheck = a.Breaker.RetryAt
	}
}

// CallRefusal says why new work may not be sent to a now, or "" when it
// may: a's breaker is open and its backoff is not over, or one call is
// trying it again. It reads only a and the clock.
func (r *Registry) CallRefusal(a *Agent) string {
	if r.cfg.BreakerAfter < 0 || a.Breaker.closed() {
		return ""
	}
	return a.Breaker.refusal(r.cfg.Now())
}

// Admit asks agent id's breaker to let a call that starts new work go
// through. It returns nil while the breaker is closed, and also when its
// backoff is over: that call then becomes the one that tries the agent
// again (half-open) and other calls are refused until its outcome is
// reported. Otherwise the error wraps ErrBreakerOpen and says why. An id
// not registered is let through.
func (r *Registry) Admit(id string) error {
	if r.cfg.BreakerAfter < 0 {
		return nil
	}
	r.mu.RLock()
	a, ok := r.byID[id]
	r.mu.RUnlock()
	if !ok || a.Breaker.closed() {
		return nil
	}
	now := r.cfg.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok = r.byID[id]
	if !ok || a.Breaker.closed() {
		return nil
	}
	if why := a.Breaker.refusal(now); why != "" {
		return fmt.Errorf("%w: %s", ErrBreakerOpen, why)
	}
	next := *a
	next.Breaker.State, next.Breaker.probeUntil = BreakerHalfOpen, now.Add(r.cfg.BreakerMaxBackoff)
	next.setHealth(&r.cfg)
	r.replace(a, &next)
	r.log.Info("agent breaker half-open: one call tries the agent again", "id", id, "failures", next.Breaker.Failures)
	return nil
}

// CallSucceeded records that a call to agent id's A2A endpoint worked,
// which closes its breaker.
func (r *Registry) CallSucceeded(id string) { r.callEnded(id, callSucceeded, nil) }

// CallFailed records that a call to agent id's A2A endpoint failed
// through the agent's fault: it could not be reached, the connection
// broke, it answered 5xx or an internal error, or it did not answer in
// time. Failures the caller caused are not for this; see CallAbandoned.
func (r *Registry) CallFailed(id string, err error) { r.callEnded(id, callFailed, err) }

// CallAbandoned records a call to agent id whose outcome says nothing of
// the agent: the caller's fault (a 4xx, an A2A error such as TaskNotFound
// or InvalidParams) or a canceled call. It counts neither way; if the call
// was the one trying the agent again, the next call tries instead.
func (r *Registry) CallAbandoned(id string) { r.callEnded(id, callAbandoned, nil) }

func (r *Registry) callEnded(id string, ev breakerEvent, err error) {
	if r.cfg.BreakerAfter < 0 {
		return
	}
	r.mu.RLock()
	a, ok := r.byID[id]
	r.mu.RUnlock()
	if !ok || quiet(&a.Breaker, ev) {
		return
	}
	now := r.cfg.Now()
	if ev == callFailed && a.Breaker.State == BreakerOpen && now.Before(a.Breaker.RetryAt) {
		return // a call begun before the breaker opened
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok = r.byID[id]
	if !ok {
		return
	}
	next := *a
	if !next.Breaker.step(ev, err, now, &r.cfg) {
		return
	}
	next.setHealth(&r.cfg)
	next.scheduleProbe()
	r.replace(a, &next)
	r.logBreaker(id, &a.Breaker, &next.Breaker)
}

// quiet reports, without a lock or the clock, that ev leaves b as it is:
// the common case of calls to an agent that answers.
func quiet(b *Breaker, ev breakerEvent) bool {
	switch ev {
	case callSucceeded:
		return b.closed() && b.Failures == 0 && b.Opens == 0
	case callAbandoned:
		return b.State != BreakerHalfOpen
	}
	return false
}

// refreshed moves next's breaker for the outcome of a card refresh; the
// registry holds mu. next's health is left to the caller.
func (r *Registry) refreshed(next *Agent, fetchErr error, now time.Time) {
	if r.cfg.BreakerAfter < 0 {
		return
	}
	ev := refreshSucceeded
	if fetchErr != nil {
		ev = refreshFailed
	}
	old := next.Breaker
	if next.Breaker.step(ev, fetchErr, now, &r.cfg) {
		r.logBreaker(next.ID, &old, &next.Breaker)
	}
	next.scheduleProbe()
}

// logBreaker logs a change of an agent's breaker state.
func (r *Registry) logBreaker(id string, old, next *Breaker) {
	switch {
	case next.State == BreakerOpen && next.Opens != old.Opens:
		r.log.Warn("agent breaker open: new work is refused", "id", id, "failures", next.Failures,
			"opens", next.Opens, "retryAt", next.RetryAt, "error", next.LastError)
	case next.closed() && !old.closed():
		r.log.Info("agent breaker closed: the agent answers again", "id", id)
	}
}
