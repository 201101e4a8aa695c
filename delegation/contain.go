package delegation

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// Containing an agent: an operator's brake on it (Engine.Contain). From
// the moment it is kept, no new work is sent to the agent (choose refuses
// it as a candidate, open checks again just before sending, and input to
// its waiting work is refused), and the running work that reaches it is
// stopped (holdBack): the delegations whose hop is the agent, and those
// whose lineage or steer and interrupt receipts name it below their hop
// (reaches). Each gets a
// "contained" event saying who contained the agent, when and why, then is
// interrupted, or canceled when the containment says so. Every process
// sharing the store watches the containments (watchContainments) and
// acts on the work it follows; the registry carries them on its agents,
// where policies see them.

// ErrContained means the work would reach an agent an operator holds
// contained: nothing was sent to it. The error wrapping it says by whom,
// when and why.
var ErrContained = errors.New("agent is contained")

// Containments keeps the agents' containments where every process sharing
// the store sees them, across restarts; store.Agents is one. Errors from a
// store that cannot be reached wrap registry.ErrUnavailable.
type Containments interface {
	// Contain keeps c, unless c.Agent is contained already. It returns the
	// containment in force and whether this call made it.
	Contain(ctx context.Context, c registry.Containment) (registry.Containment, bool, error)
	// Release ends the containment of agent id. It returns the
	// containment it ended and whether there was one.
	Release(ctx context.Context, id string) (registry.Containment, bool, error)
	// WatchContainments calls fn, one call at a time, with every
	// containment kept, then calls ready once, then calls fn for every
	// change, a release with nil, until ctx is done (returning nil) or
	// the watch fails (returning why).
	WatchContainments(ctx context.Context, fn func(id string, c *registry.Containment), ready func()) error
}

// refusedContained is the refusal reason of a contained agent, as counted
// by orchd.delegation.refusals.
const refusedContained = "contained"

// containWatchRetry is how long the containments' watch waits before it
// starts again after failing; holdBackLimit bounds the delegations being
// stopped at once.
const (
	containWatchRetry = time.Second
	holdBackLimit     = 16
)

// containedReason words a containment as a candidate's refusal reason.
func containedReason(c *registry.Containment) string {
	return fmt.Sprintf("contained by %s at %s: %s", c.By, stamp(c.At), c.Reason)
}

// Contain holds agent id contained, for every process sharing the store,
// from now until Release: nothing new is sent to it, and the work running
// on it is interrupted, or canceled when cancel is set. by names who
// contains it ("anonymous" when empty). It fails with ErrUnknownAgent for
// an id the registry does not hold and ErrBadRequest for a reason that is
// not 1 to registry.MaxContainmentReason bytes of UTF-8. An agent
// contained already stays as it was: the containment in force is
// returned, with created false.
func (e *Engine) Contain(ctx context.Context, id, by, reason string, cancel bool) (c registry.Containment, created bool, err error) {
	if !registry.ValidContainmentReason(reason) {
		return registry.Containment{}, false, fmt.Errorf("%w: a containment needs a reason of 1 to %d bytes of UTF-8, got %d bytes",
			ErrBadRequest, registry.MaxContainmentReason, len(reason))
	}
	if _, ok := e.reg.Get(id); !ok {
		return registry.Containment{}, false, fmt.Errorf("%w: %q", ErrUnknownAgent, id)
	}
	if by == "" {
		by = "anonymous"
	}
	c, created, err = e.containments.Contain(ctx, registry.Containment{Agent: id, Reason: reason, By: by, At: e.cfg.Now().UTC(), Cancel: cancel})
	if err != nil {
		return registry.Containment{}, false, fmt.Errorf("contain agent %s: %w", id, err)
	}
	if created {
		e.log.WarnContext(ctx, "agent contained", "agent", id, "by", c.By, "reason", c.Reason, "cancel", c.Cancel)
		e.instruments.containments.Add(ctx, 1, e.instruments.attr("action", "contain").add...)
	}
	e.applyContainment(id, &c)
	return c, created, nil
}

// Release ends the containment of agent id: new work may go to it again,
// and input to its waiting work. Work stopped while it was contained
// stays as it is. It fails with ErrUnknownAgent for an id the registry
// neither holds nor knows contained. An agent not contained is no error:
// released is false.
func (e *Engine) Release(ctx context.Context, id, by string) (c registry.Containment, released bool, err error) {
	if _, ok := e.reg.Get(id); !ok && e.reg.Containment(id) == nil {
		return registry.Containment{}, false, fmt.Errorf("%w: %q", ErrUnknownAgent, id)
	}
	if by == "" {
		by = "anonymous"
	}
	c, released, err = e.containments.Release(ctx, id)
	if err != nil {
		return registry.Containment{}, false, fmt.Errorf("release agent %s: %w", id, err)
	}
	if released {
		e.log.WarnContext(ctx, "agent released", "agent", id, "by", by, "containedBy", c.By, "containedAt", c.At)
		e.instruments.containments.Add(ctx, 1, e.instruments.attr("action", "release").add...)
	}
	e.applyContainment(id, nil)
	return c, released, nil
}

// applyContainment makes the registry carry agent id's containment c (nil:
// none) and, when that is news here, stops the work live here that
// reaches the agent. The process that kept the containment and the watch
// that sees it both call it; only the first does anything.
func (e *Engine) applyContainment(id string, c *registry.Containment) {
	if !e.reg.SetContainment(id, c) || c == nil {
		return
	}
	for _, d := range e.liveNow() {
		e.holdBackIfReached(d, c)
	}
}

// holdBackIfReached stops d, in a goroutine of the engine's, when its work
// reaches the contained agent.
func (e *Engine) holdBackIfReached(d *Delegation, c *registry.Containment) {
	if !e.reaches(d, c.Agent) || !e.track() {
		return
	}
	go func() {
		defer e.wg.Done()
		select {
		case e.holding <- struct{}{}:
		case <-e.ctx.Done():
			return
		}
		defer func() { <-e.holding }()
		e.holdBack(d, *c)
	}()
}

// checkContained stops a delegation just made live when its work reaches
// an agent contained meanwhile: one chosen before the containment, or
// carried on after a restart.
func (e *Engine) checkContained(d *Delegation) {
	for _, c := range e.reg.Containments() {
		e.holdBackIfReached(d, &c)
	}
}

// reaches reports whether the running delegation d reaches agent id: its
// hop is the agent; or a hop below, in the lineage the orchd below
// reports or in a steer or interrupt receipt, names the agent by its id,
// its card's name or the identity an orchd's card advertises, or, in
// the lineage, pinned the agent's card (its digest).
func (e *Engine) reaches(d *Delegation, id string) bool {
	names := []string{id}
	var digest string
	if a, ok := e.reg.Get(id); ok {
		if a.Profile != nil && a.Name != "" {
			names = append(names, a.Name)
		}
		if self, _ := advertisedIdentity(a); self != "" {
			names = append(names, self)
		}
		digest = a.Digest
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rec.State.Terminal() {
		return false
	}
	if d.rec.Downstream.Agent == id {
		return true
	}
	if l := d.rec.Lineage; l != nil {
		// Every hop's agent is below this delegation's: the first is
		// what the orchd it went to chose.
		for _, h := range l.Hops {
			if slices.Contains(names, h.Agent) || h.AgentName != "" && slices.Contains(names, h.AgentName) ||
				digest != "" && h.CardDigest == digest {
				return true
			}
		}
	}
	for _, r := range d.prog.Receipts {
		for i, h := range r.Hops {
			if i > 0 && slices.Contains(names, h.Agent) {
				return true
			}
		}
	}
	return false
}

// holdBack stops one running delegation that reaches a contained agent:
// it logs a "contained" event, once per containment, then interrupts the
// delegation, or cancels it when the containment says so, when its hop
// does not take interrupts, or while it is not WORKING yet. Work waiting
// for input is left waiting: input to it is refused while the agent is
// contained.
func (e *Engine) holdBack(d *Delegation, c registry.Containment) {
	d.mu.Lock()
	if d.rec.State.Terminal() || d.prog.ContainedAt.Equal(c.At) {
		d.mu.Unlock()
		return
	}
	d.prog.ContainedAt = c.At
	d.emitLocked(Event{Kind: KindContained, Containment: &c})
	state, modes := d.rec.State, d.modes()
	d.mu.Unlock()

	ctx, id := e.ctx, d.rec.ID
	outcome := "canceled"
	switch {
	case !c.Cancel && waiting(state):
		outcome = "waiting"
	case !c.Cancel && state == a2a.TaskStateWorking && modes.Allows(steering.Interrupt):
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(fmt.Sprintf("agent %s was contained by %s: %s", c.Agent, c.By, c.Reason)))
		_, err := e.steerLocal(ctx, d, steering.Interrupt, msg)
		switch {
		case err == nil:
			outcome = "interrupted"
		case ctx.Err() != nil, errors.Is(err, ErrEnded):
			return // closing, or the work ended meanwhile
		case waiting(d.Record().State):
			outcome = "waiting" // it settled waiting meanwhile
		}
		if outcome != "canceled" {
			break
		}
		e.log.Warn("contained agent: the interrupt was refused; canceling", "delegation", id, "agent", c.Agent, "error", err)
		fallthrough
	default:
		_, err := e.cancelLocal(ctx, d)
		switch {
		case errors.Is(err, ErrEnded) || ctx.Err() != nil:
			return // the work ended meanwhile, or orchd is closing
		case err != nil:
			e.log.Warn("contained agent: cancel its work", "delegation", id, "agent", c.Agent, "error", err)
			outcome = "failed"
		}
	}
	e.log.Info("contained agent: work stopped", "delegation", id, "agent", c.Agent, "outcome", outcome)
	e.instruments.heldBack.Add(ctx, 1, e.instruments.attr("outcome", outcome).add...)
}

// refuseContained returns an error wrapping ErrContained when agent id is
// contained now, for the last look before work is sent to it.
func (e *Engine) refuseContained(id string) error {
	if c := e.reg.Containment(id); c != nil {
		return containedError(c)
	}
	return nil
}

// containedFor returns an error wrapping ErrContained when the work of d
// reaches an agent contained now (reaches), for input sent to it.
func (e *Engine) containedFor(d *Delegation) error {
	for _, c := range e.reg.Containments() {
		if e.reaches(d, c.Agent) {
			return containedError(&c)
		}
	}
	return nil
}

// containedError is ErrContained naming the agent and its containment.
func containedError(c *registry.Containment) error {
	return fmt.Errorf("%w: %s is %s", ErrContained, c.Agent, containedReason(c))
}

// watchContainments keeps the registry's containments as the store's,
// stopping the work live here that reaches an agent contained by another
// process. It returns once the containments kept are in the registry, or
// with why it could not read them; the watch then goes on in a goroutine
// of the engine's, starting again after a failure, until Close.
func (e *Engine) watchContainments(ctx context.Context) error {
	ready := make(chan struct{})
	failed := make(chan error, 1)
	var once sync.Once
	if !e.track() {
		return ErrClosed
	}
	go func() {
		defer e.wg.Done()
		for {
			err := e.containments.WatchContainments(e.ctx, func(id string, c *registry.Containment) {
				e.applyContainment(id, c)
			}, func() { once.Do(func() { close(ready) }) })
			if e.ctx.Err() != nil {
				return
			}
			select {
			case failed <- err:
			default:
			}
			e.log.Warn("watch the agents' containments; watching again", "error", err, "in", containWatchRetry)
			t := time.NewTimer(containWatchRetry)
			select {
			case <-t.C:
			case <-e.ctx.Done():
				t.Stop()
				return
			}
		}
	}()
	select {
	case <-ready:
		return nil
	case err := <-failed:
		return fmt.Errorf("read the agents' containments: %w", err)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// memoryContainments keeps containments in this process only, for an
// engine without a store that shares them.
type memoryContainments struct {
	mu sync.Mutex
	m  map[string]registry.Containment
}

func (m *memoryContainments) Contain(_ context.Context, c registry.Containment) (registry.Containment, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.m[c.Agent]; ok {
		return cur, false, nil
	}
	if m.m == nil {
		m.m = map[string]registry.Containment{}
	}
	m.m[c.Agent] = c
	return c, true, nil
}

func (m *memoryContainments) Release(_ context.Context, id string) (registry.Containment, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, ok := m.m[id]
	delete(m.m, id)
	return cur, ok, nil
}

// WatchContainments has nothing to watch: Contain and Release apply their
// changes here themselves.
func (m *memoryContainments) WatchContainments(ctx context.Context, fn func(string, *registry.Containment), ready func()) error {
	m.mu.Lock()
	kept := make([]registry.Containment, 0, len(m.m))
	for _, c := range m.m {
		kept = append(kept, c)
	}
	m.mu.Unlock()
	for _, c := range kept {
		fn(c.Agent, &c)
	}
	ready()
	<-ctx.Done()
	return nil
}
