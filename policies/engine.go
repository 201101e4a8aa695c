package policies

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Engine holds the policy set in force and replaces it when its files
// change. A reload compiles the new files first and swaps them in
// atomically only if every file compiles; otherwise the last good set stays
// in force and the error is kept for Status. Evaluations never wait for a
// reload.
type Engine struct {
	paths []string
	opts  Options
	log   *slog.Logger

	current atomic.Pointer[Set]

	mu       sync.Mutex // serializes reloads and guards the fields below
	status   Status
	lastSeen string // digest of the files last read (or why they could not be)
}

// Status describes the policy set in force and the last reload.
type Status struct {
	// Paths are the configured files and directories.
	Paths []string `json:"paths"`
	// Files are the files of the set in force.
	Files []string `json:"files"`
	// Policies names the policies in force, in evaluation order.
	Policies []string `json:"policies"`
	// Rules counts their rules.
	Rules int `json:"rules"`
	// AuthorizationPolicies names the authorization policies in force, in
	// evaluation order, the built-in default included unless replaced.
	AuthorizationPolicies []string `json:"authorizationPolicies"`
	// AuthorizationRules counts their rules.
	AuthorizationRules int `json:"authorizationRules"`
	// Digest identifies the set in force by its files' contents.
	Digest string `json:"digest"`
	// LoadedAt is when the set in force was loaded.
	LoadedAt time.Time `json:"loadedAt"`
	// LastError is why the most recent reload failed, or "" when it
	// succeeded; the set in force is then older than the files.
	LastError string `json:"lastError,omitempty"`
	// LastErrorAt is when that reload failed.
	LastErrorAt time.Time `json:"lastErrorAt,omitzero"`
	// Diagnostics lists the failed reload's problems with their places.
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
}

// NewEngine loads the policies under paths (files or directories of
// *.yaml). The first load must succeed: a daemon should not start on
// broken policies. No paths gives an empty set, which allows every
// candidate. A nil logger discards logs.
func NewEngine(paths []string, opts Options, log *slog.Logger) (*Engine, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	e := &Engine{paths: slices.Clone(paths), opts: opts, log: log}
	if err := e.Reload(); err != nil {
		return nil, err
	}
	return e, nil
}

// Set returns the policy set in force.
func (e *Engine) Set() *Set { return e.current.Load() }

// Status reports the set in force and the last reload.
func (e *Engine) Status() Status {
	e.mu.Lock()
	defer e.mu.Unlock()
	s := e.status
	s.Paths = slices.Clone(s.Paths)
	return s
}

// Reload reads and compiles the policy files now. On success the new set
// replaces the old one; on failure the old one stays and the error (a
// Diagnostics for compile errors) is returned and kept in Status.
func (e *Engine) Reload() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reload(false)
}

// reload does the work of Reload; with onlyIfChanged it does nothing when
// the files are those it last compiled, good or bad. Callers hold mu.
func (e *Engine) reload(onlyIfChanged bool) error {
	files, err := ReadFiles(e.paths)
	seen := "unreadable: " + errString(err)
	if err == nil {
		seen = digestFiles(files)
	}
	if onlyIfChanged && seen == e.lastSeen {
		return nil
	}
	e.lastSeen = seen
	var set *Set
	if err == nil {
		set, err = Compile(files, e.opts)
	}
	now := time.Now()
	if err != nil {
		e.status.LastError, e.status.LastErrorAt = err.Error(), now
		e.status.Diagnostics = nil
		var diags Diagnostics
		if errors.As(err, &diags) {
			e.status.Diagnostics = diags
		}
		if e.current.Load() != nil {
			e.log.Error("policy reload failed; the previous policies stay in force, and orchd will not start again until the files compile",
				"error", err, "digest", e.status.Digest)
		}
		return err
	}
	old := e.current.Swap(set)
	e.status = Status{Paths: e.paths, Files: set.Files(), Policies: set.Policies(), Rules: set.Rules(),
		AuthorizationPolicies: set.AuthorizationPolicies(), AuthorizationRules: set.AuthorizationRules(),
		Digest: set.Digest(), LoadedAt: now}
	if old == nil || old.Digest() != set.Digest() {
		e.log.Info("policies loaded", "policies", set.Policies(), "rules", set.Rules(),
			"authorizationPolicies", set.AuthorizationPolicies(), "authorizationRules", set.AuthorizationRules(), "digest", set.Digest())
	}
	return nil
}

// Watch reloads the policies whenever their files change, checking every
// interval, until ctx is done. It reads the files each time (policy files
// are small), so edits that keep a file's size and time are seen too, and
// a broken edit is compiled (and logged) once, not at every check.
func (e *Engine) Watch(ctx context.Context, interval time.Duration) {
	if interval <= 0 {
		interval = 2 * time.Second
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			e.mu.Lock()
			_ = e.reload(true) // reload logs and records failures
			e.mu.Unlock()
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
