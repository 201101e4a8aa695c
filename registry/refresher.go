package registry

import (
	"context"
	"errors"
	"time"
)

// Start launches the background refresher, which revalidates each agent
// when its card expires (or, after failures, when its backoff ends) and
// retries pending agents. With Config.Store set it also watches the store
// and applies the changes other processes save (see [AgentStore]); call
// [Registry.Load] first. Both are owned by the registry and stop on Close.
// Calling Start more than once has no further effect.
func (r *Registry) Start() {
	r.startOnce.Do(func() {
		r.wg.Add(1)
		go r.loop()
		if r.cfg.Store != nil {
			r.wg.Add(1)
			go r.watch()
		}
	})
}

// Close stops the refresher and every background fetch, and waits for them
// to end. Lookups keep working on what is registered; Add, Refresh and
// Inspect fail with ErrClosed.
func (r *Registry) Close() {
	r.closeOnce.Do(func() {
		r.cancel()
		r.wg.Wait()
		r.cache.close()
	})
}

func (r *Registry) loop() {
	defer r.wg.Done()
	t := time.NewTicker(r.cfg.RefreshInterval)
	defer t.Stop()
	sem := make(chan struct{}, r.cfg.RefreshConcurrency)
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-t.C:
			r.refreshDue(sem)
		}
	}
}

// refreshDue starts a refresh for every agent and pending agent that is
// due, at most RefreshConcurrency at once.
func (r *Registry) refreshDue(sem chan struct{}) {
	now := r.cfg.Now()
	type job struct {
		id      string
		base    string
		pending *pendingAgent
	}
	var jobs []job
	r.mu.RLock()
	for id, a := range r.byID {
		if !now.Before(a.nextCheck) {
			jobs = append(jobs, job{id: id, base: a.base})
		}
	}
	for base, p := range r.pending {
		if !now.Before(p.nextCheck) {
			jobs = append(jobs, job{base: base, pending: p})
		}
	}
	r.mu.RUnlock()

	for _, j := range jobs {
		r.inflightMu.Lock()
		busy := r.inflight[j.base]
		r.inflight[j.base] = true
		r.inflightMu.Unlock()
		if busy {
			continue
		}
		select {
		case <-r.ctx.Done():
			r.done(j.base)
			return
		case sem <- struct{}{}:
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer func() { <-sem }()
			defer r.done(j.base)
			ctx, cancel := context.WithTimeout(r.ctx, 2*r.cfg.Timeout)
			defer cancel()
			if j.pending != nil {
				r.retryPending(ctx, j.pending)
				return
			}
			e, err := r.cache.revalidate(ctx, j.base)
			if r.ctx.Err() != nil {
				return // closing: not the agent's fault
			}
			_, _ = r.settle(ctx, j.id, e, err) // settle logs the outcome
		}()
	}
}

func (r *Registry) done(base string) {
	r.inflightMu.Lock()
	delete(r.inflight, base)
	r.inflightMu.Unlock()
}

// retryPending tries a pending agent again. With a Store, one that
// another process registered meanwhile is taken from it, and one the store
// cannot take yet stays pending.
func (r *Registry) retryPending(ctx context.Context, p *pendingAgent) {
	if r.cfg.Store != nil && !p.kept {
		if a, ok := r.registered(p.spec); ok {
			r.mu.Lock()
			if cur, ok := r.pending[p.base]; ok && cur == p {
				delete(r.pending, p.base)
			}
			r.mu.Unlock()
			r.log.Info("pending agent was registered through the store", "id", a.ID, "url", p.base)
			return
		}
	}
	e, err := r.cache.revalidate(ctx, p.base)
	if r.ctx.Err() != nil {
		return
	}
	if err == nil {
		if _, err = r.register(ctx, p.spec, p.base, e, p.origin); err == nil {
			return
		}
		if !errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrStale) {
			r.log.Error("pending agent cannot be registered; giving up on it", "url", p.base, "error", err)
			r.mu.Lock()
			delete(r.pending, p.base)
			r.mu.Unlock()
			return
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.pending[p.base]; ok && cur == p {
		next := *p
		next.failures++
		next.err = err
		next.nextCheck = r.cfg.Now().Add(r.cfg.backoff(next.failures))
		r.pending[p.base] = &next
		r.log.Warn("pending agent still unreachable", "url", p.base, "failures", next.failures, "next", next.nextCheck, "error", err)
	}
}
