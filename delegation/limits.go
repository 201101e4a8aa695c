package delegation

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/orchd/orchd/auth"
)

// How much work one engine runs at once.
//
// Every delegation that has not ended holds a slot: one of MaxRunning in
// all, and one of MaxRunningPerCaller of its owner's. Delegate takes the
// slot before it chooses an agent, so work over a limit is refused before
// anything reaches an agent. The slot is given back when the delegation
// ends (its state turns terminal, emitLocked), when another process takes
// it over (a lost lease, Engine.forget), or when the start fails. A
// delegation carried on from the store (resume.go) takes its slot
// whatever the counts, as it was acknowledged already, and counts like
// any other.

// ErrResourceExhausted means the work was refused because this orchd
// runs as much as it may hold: nothing was sent to any agent, and the
// same request may succeed once some delegations have ended. The error is
// a *LimitError naming the limit.
var ErrResourceExhausted = errors.New("resource exhausted")

// The settings a LimitError names, as the config file spells them.
const (
	// SettingMaxRunning is the node's limit, Config.MaxRunning.
	SettingMaxRunning = "delegation.maxRunning"
	// SettingMaxRunningPerCaller is each caller's, Config.MaxRunningPerCaller.
	SettingMaxRunningPerCaller = "delegation.maxRunningPerCaller"
	// SettingOpenFiles is the process's limit on open files
	// (RLIMIT_NOFILE), met when a connection to the agent could not be
	// opened for want of a file descriptor.
	SettingOpenFiles = "open files"
)

// LimitError refuses work over a limit; it matches ErrResourceExhausted.
// The HTTP API answers it as its error's details.
type LimitError struct {
	// Setting names the limit: SettingMaxRunning, SettingMaxRunningPerCaller
	// or SettingOpenFiles.
	Setting string `json:"setting"`
	// Limit is the limit's value; 0 for open files, whose count orchd
	// does not know at the moment of the refusal.
	Limit int `json:"limit,omitempty"`
	// Caller is whose share was used up, for SettingMaxRunningPerCaller:
	// "tenant acme", or "principal token:alice" for a caller without a
	// tenant.
	Caller string `json:"caller,omitempty"`
}

// Error says which limit refused the work and that trying later may do.
func (e *LimitError) Error() string {
	switch e.Setting {
	case SettingMaxRunningPerCaller:
		return fmt.Sprintf("%s: %s runs %d delegations, the limit per caller (%s); try again once some have ended", ErrResourceExhausted, e.Caller, e.Limit, e.Setting)
	case SettingOpenFiles:
		return fmt.Sprintf("%s: no file descriptor left to connect to the agent (the process's %s limit); try again once some delegations have ended", ErrResourceExhausted, e.Setting)
	}
	return fmt.Sprintf("%s: this orchd runs %d delegations, its limit (%s); try again once some have ended", ErrResourceExhausted, e.Limit, e.Setting)
}

// Unwrap makes the error match ErrResourceExhausted.
func (e *LimitError) Unwrap() error { return ErrResourceExhausted }

// reason is the refusal's reason in the orchd.delegation.refusals metric.
func (e *LimitError) reason() string {
	switch e.Setting {
	case SettingMaxRunningPerCaller:
		return "max_running_per_caller"
	case SettingOpenFiles:
		return "open_files"
	}
	return "max_running"
}

// running counts the engine's delegations that have not ended, in all and
// per caller.
type running struct {
	max, perCaller int // 0: no limit
	mu             sync.Mutex
	n              int
	by             map[string]int
}

// slot is one delegation's place in the counts; release gives it back,
// once however often it is called.
type slot struct {
	r        *running
	caller   string
	released atomic.Bool
}

// take counts a delegation of caller ("" for one without an authenticated
// caller, which only the node's limit holds) as running. Unless force is
// set it first refuses, with a *LimitError, one over a limit.
func (r *running) take(caller string, force bool) (*slot, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !force {
		if r.max > 0 && r.n >= r.max {
			return nil, &LimitError{Setting: SettingMaxRunning, Limit: r.max}
		}
		if r.perCaller > 0 && caller != "" && r.by[caller] >= r.perCaller {
			return nil, &LimitError{Setting: SettingMaxRunningPerCaller, Limit: r.perCaller, Caller: caller}
		}
	}
	r.n++
	if caller != "" {
		if r.by == nil {
			r.by = map[string]int{}
		}
		r.by[caller]++
	}
	return &slot{r: r, caller: caller}, nil
}

// release gives the slot back; a nil slot has none to give.
func (s *slot) release() {
	if s == nil || !s.released.CompareAndSwap(false, true) {
		return
	}
	r := s.r
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n--
	if s.caller == "" {
		return
	}
	if r.by[s.caller]--; r.by[s.caller] <= 0 {
		delete(r.by, s.caller)
	}
}

// limitKey names whose share of MaxRunningPerCaller a delegation owned by
// p takes: its tenant's, else its principal's (with how it was
// authenticated), as the push queue shares work out; "" when no one was
// authenticated.
func (p *Principal) limitKey() string {
	switch {
	case p == nil || p.ID == "":
		return ""
	case p.Tenant != "":
		return "tenant " + p.Tenant
	}
	return "principal " + auth.Identity{Method: p.Method, Issuer: p.Issuer, ID: p.ID}.Key()
}
