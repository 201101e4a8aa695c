package delegation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/orchd/orchd/internal/keylock"
	"github.com/orchd/orchd/internal/outagelog"
	"github.com/orchd/orchd/internal/ownstack"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
)

// PolicySource gives the policies in force; *policies.Engine is one.
type PolicySource interface {
	Set() *policies.Set
}

// ErrClosed means the engine was closed.
var ErrClosed = errors.New("delegation engine closed")

// Engine delegates work and owns every delegation it starts: the
// goroutines following downstream tasks end when their tasks end or when
// the engine is closed.
type Engine struct {
	cfg      Config
	reg      *registry.Registry
	policies PolicySource
	store    Store
	log      *slog.Logger
	// instruments records the engine's spans and metrics (telemetry.go).
	instruments *instruments
	// answerLimit bounds an agent's answer read whole (bounded.go):
	// maxAgentAnswer, smaller in tests.
	answerLimit int64

	// ctx ends at Close, and with it every goroutine the engine owns;
	// wg counts them (track), and Close waits for it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// mu guards the live set (live, finished) and stopRelay.
	// Close cancels ctx under it, so no goroutine is counted (track, under
	// the read lock) once Close waits. Lock order: Delegation.mu before
	// mu (overLimitLocked calls track with Delegation.mu held), so no
	// code takes a Delegation.mu while holding mu: walk liveNow instead.
	mu       sync.RWMutex
	live     map[string]*Delegation
	finished []string // ended delegations still live, oldest first
	// takingOver holds the delegations this engine is taking over from
	// the store now (resume.go, lockTakeOver).
	takingOver keylock.Locks
	// reopening holds a slot for each carried-on delegation reading its
	// downstream task again (resume.go, reopenAndFollow).
	reopening chan struct{}

	clients *lru.Cache[string, cachedClient]
	// onResume runs for each delegation carried on from the store.
	onResume func(*Delegation)
	// stopRelay stops answering operations other processes pass here.
	stopRelay func()
	// push holds the webhooks of delegations followed by push (push.go).
	push pushHub
	// reads runs the reads of the tasks followed by push or polls, a
	// bounded number per agent (taskreads.go).
	reads taskReads
	// early bounds the polls all delegations make before PollInterval
	// (poll.go).
	early pollBudget
	// writes reports the store's failed writes of delegations,
	// followReads the followers' failed reads of their logs, and takes
	// the failed takes of running delegations' leases, an outage in a few
	// lines each (package outagelog; rideout.go, resume.go).
	writes, followReads, takes *outagelog.Log
	// rewrites holds the running delegations whose writes failed, which
	// the engine writes again (keepwrites.go).
	rewrites rewrites
	// stacks runs the deep work of each event an agent's stream brings,
	// its decoding and its taking, on goroutines kept for it, so the
	// stream's own goroutine waits with a small stack (stream.go).
	stacks *ownstack.Workers
	// containments keeps the agents' containments (contain.go); holding
	// bounds the delegations being stopped for one at once.
	containments Containments
	holding      chan struct{}
	// running counts the delegations that have not ended, against
	// MaxRunning and MaxRunningPerCaller (limits.go).
	running running

	// memberMu guards joined, this process's liveness lease when the
	// engine has Leases (nil until it joins, and after it lost one),
	// renewed, when it was last renewed, and leaving, a lost one not
	// given up yet (lease.go).
	memberMu sync.Mutex
	joined   Member
	renewed  time.Time
	leaving  Member
}

// keptStacks is how many goroutines the engine keeps waiting for the deep
// work of streamed events (Engine.stacks): about as many as decode or
// store an event at one moment under load, each for a few milliseconds.
// Each holds a stack of a few to some tens of KiB while it waits.
const keptStacks = 32

// NewEngine returns an engine delegating to agents in reg under the
// policies of pol, recording delegations in store. A nil logger discards
// logs.
func NewEngine(reg *registry.Registry, pol PolicySource, store Store, cfg Config, log *slog.Logger) *Engine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	clients, _ := lru.New[string, cachedClient](1024) // only a non-positive size fails
	e := &Engine{
		cfg:         cfg.withDefaults(),
		reg:         reg,
		policies:    pol,
		store:       store,
		log:         log,
		instruments: newInstruments(cfg.TracerProvider, cfg.MeterProvider),
		answerLimit: maxAgentAnswer,
		ctx:         ctx,
		cancel:      cancel,
		live:        map[string]*Delegation{},
		clients:     clients,
		reopening:   make(chan struct{}, reopenLimit),
		holding:     make(chan struct{}, holdBackLimit),
		stacks:      ownstack.NewWorkers(keptStacks),
	}
	e.writes = outagelog.New(log, e.cfg.Now, slog.LevelError, "delegations' writes", "each is tried again with its delegation's next write or by itself", unavailable)
	e.followReads = outagelog.New(log, e.cfg.Now, slog.LevelWarn, "followers' reads of delegation events", "each follower waits and reads again", unavailable)
	e.takes = outagelog.New(log, e.cfg.Now, slog.LevelWarn, "takes of running delegations", "each is taken at the next look for delegations to carry on", unavailable)
	e.containments = e.cfg.Containments
	if e.containments == nil {
		e.containments = &memoryContainments{}
	}
	e.running.max, e.running.perCaller = max(e.cfg.MaxRunning, 0), max(e.cfg.MaxRunningPerCaller, 0)
	e.instruments.observe = e.observe // every call's outcome feeds the agent's breaker
	return e
}

// Close stops following every delegation and waits for the goroutines to
// end. Downstream tasks are left as they are; their records stay in the
// store with their last known state.
func (e *Engine) Close() {
	e.mu.Lock() // no timer starts an owned goroutine past this point
	e.cancel()
	stop := e.stopRelay
	e.mu.Unlock()
	if stop != nil {
		stop()
	}
	e.wg.Wait()
	e.writes.Close()
	e.followReads.Close()
	e.takes.Close()
	e.stacks.Close() // the streams that used them have ended
	if e.cfg.Leases != nil {
		e.leave() // once nothing follows a delegation here any more
	}
}

// track counts a goroutine about to run among those Close waits for, and
// reports whether it may run: not once the engine is closed, since Close
// may be waiting already. A counted goroutine calls e.wg.Done when it ends.
func (e *Engine) track() bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	if e.ctx.Err() != nil {
		return false
	}
	e.wg.Add(1)
	return true
}

// owned runs f as a goroutine Close waits for, unless the engine is
// closed. Timer callbacks run through it: they may start while Close is
// waiting.
func (e *Engine) owned(f func()) {
	if !e.track() {
		return
	}
	defer e.wg.Done()
	f()
}

// register makes a delegation live.
func (e *Engine) register(d *Delegation) {
	e.instruments.inflight.Add(e.ctx, 1)
	e.mu.Lock()
	e.live[d.rec.ID] = d
	e.mu.Unlock()
}

// liveNow returns the live delegations at this moment, for work that
// locks each one (which must not happen under mu; see Engine.mu).
func (e *Engine) liveNow() []*Delegation {
	e.mu.RLock()
	defer e.mu.RUnlock()
	out := make([]*Delegation, 0, len(e.live))
	for _, d := range e.live {
		out = append(out, d)
	}
	return out
}

// Get returns a live delegation.
func (e *Engine) Get(id string) (*Delegation, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	d, ok := e.live[id]
	return d, ok
}

// ended forgets the event logs of the oldest ended delegations beyond
// KeepFinished.
func (e *Engine) ended(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.finished = append(e.finished, id)
	for len(e.finished) > e.cfg.KeepFinished {
		delete(e.live, e.finished[0])
		e.finished = e.finished[1:]
	}
}

// forget drops a delegation from the live set, and from the ended ones
// kept there (a rare call: a lost lease, a record that was never kept),
// giving its running slot back.
func (e *Engine) forget(id string) {
	e.mu.Lock()
	d, ok := e.live[id]
	if ok {
		d.slot.release()
	}
	delete(e.live, id)
	e.finished = slices.DeleteFunc(e.finished, func(f string) bool { return f == id })
	e.mu.Unlock()
	if ok {
		// Its waiters look again: another process follows it now, and
		// its events reach them through the store (WaitEvents).
		d.mu.Lock()
		d.wakeLocked()
		d.mu.Unlock()
	}
}

// Lookup returns a delegation's record, live or stored, with its
// artifacts: a stored one's are folded from its log (artifacts.go).
func (e *Engine) Lookup(ctx context.Context, id string) (Record, error) {
	return e.lookup(ctx, id, true)
}

// LookupHead returns a delegation's record as Lookup does, but without
// reading the artifacts of one that is not live here (a live one's are at
// hand): what deciding whether a caller may act on it needs, before
// reading more.
func (e *Engine) LookupHead(ctx context.Context, id string) (Record, error) {
	return e.lookup(ctx, id, false)
}

func (e *Engine) lookup(ctx context.Context, id string, artifacts bool) (Record, error) {
	if d, ok := e.Get(id); ok {
		return d.Record(), nil
	}
	r, err := e.store.Get(ctx, id)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %q", err, id)
	}
	if artifacts {
		if r.Artifacts, _, err = e.rebuildArtifacts(ctx, r); err != nil {
			return Record{}, err
		}
	}
	r.Progress = nil
	return r, nil
}

// List returns a page of records, newest first, without their artifacts,
// which Lookup reads (artifacts.go).
func (e *Engine) List(ctx context.Context, q Query) (Page, error) {
	p, err := e.store.List(ctx, q)
	for i := range p.Records {
		p.Records[i].Progress = nil
	}
	return p, err
}
