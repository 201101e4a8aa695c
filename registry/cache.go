package registry

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/orchd/orchd/capability"
)

// entry is one cached card, or one remembered failure. Entries are
// immutable; an update stores a new one.
type entry struct {
	base    string
	cardURL string
	legacy  bool
	// profile is nil for a failure with no good card to fall back on.
	profile *capability.Profile
	// raw is the card as fetched, kept only when Config.Store is set, so
	// a saved agent rebuilds the same profile, or when the card may be
	// signed, as signatures are verified over the card as served.
	raw []byte
	// sig is the card's signature check for the agent it is registered
	// as; set on a copy by register, for prepare.
	sig     capability.Signature
	etag    string
	lastMod string
	policy  cachePolicy
	// fetchedAt is when the card was last fetched or revalidated.
	fetchedAt  time.Time
	freshUntil time.Time
	swr, sie   time.Duration
	// failures counts failed revalidations in a row; err is the last one
	// and retryAt is when the next attempt may go out.
	failures int
	err      error
	retryAt  time.Time
}

// cardCache is an RFC 9111 cache of cards keyed by agent base URL, bounded
// by an LRU. hashicorp/golang-lru's expirable LRU is not used: it has one
// TTL for every entry where cards need their own, and its purge goroutine
// can never be stopped.
type cardCache struct {
	cfg   Config
	f     *fetcher
	log   *slog.Logger
	in    instruments
	lru   *lru.Cache[string, *entry]
	group singleflight.Group

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	bg     map[string]bool // background revalidations in flight
	closed bool
}

func newCardCache(cfg Config, f *fetcher, log *slog.Logger, in instruments) (*cardCache, error) {
	l, err := lru.New[string, *entry](cfg.MaxEntries)
	if err != nil {
		return nil, fmt.Errorf("card cache: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &cardCache{cfg: cfg, f: f, log: log, in: in, lru: l, ctx: ctx, cancel: cancel, bg: map[string]bool{}}, nil
}

// get returns the card for base as a client of the cache would: fresh
// entries at once; stale ones within stale-while-revalidate at once with a
// background revalidation; otherwise after revalidating, falling back to
// the stale card within stale-if-error. After a failure nothing goes out
// until its backoff ends: the stale card is served while a stale window
// allows it, and the remembered error otherwise.
func (c *cardCache) get(ctx context.Context, base string) (*entry, error) {
	now := c.cfg.Now()
	if e, ok := c.lru.Get(base); ok {
		stale := e.freshUntil.Add(max(e.swr, e.sie))
		switch {
		case e.profile != nil && now.Before(e.freshUntil):
			c.in.cache.Add(ctx, 1, cacheHit)
			return e, nil
		case now.Before(e.retryAt): // backing off after a failure
			if e.profile != nil && now.Before(stale) {
				c.in.cache.Add(ctx, 1, cacheStale)
				return e, nil
			}
			return nil, fmt.Errorf("%w (remembered failure; next attempt in %s)", e.err, e.retryAt.Sub(now).Round(time.Second))
		case e.profile != nil && now.Before(e.freshUntil.Add(e.swr)):
			c.in.cache.Add(ctx, 1, cacheStale)
			c.background(base)
			return e, nil
		}
	}
	e, err := c.revalidate(ctx, base)
	if err != nil && e != nil && e.profile != nil && now.Before(e.freshUntil.Add(e.sie)) {
		c.in.cache.Add(ctx, 1, cacheStale)
		c.log.WarnContext(ctx, "serving stale agent card after a failed revalidation", "url", base, "error", err, "failures", e.failures)
		return e, nil
	}
	return e, err
}

// revalidate fetches base now, conditionally when a card is cached. Callers
// asking for the same URL at once share one request. On failure it returns
// the entry recording the failure, which still holds the last good card if
// there is one.
func (c *cardCache) revalidate(ctx context.Context, base string) (*entry, error) {
	if !c.track() {
		return nil, ErrClosed
	}
	type result struct {
		e   *entry
		err error
	}
	ch := make(chan result, 1)
	go func() {
		defer c.wg.Done()
		v, err, _ := c.group.Do(base, func() (any, error) { return c.fetch(ctx, base) })
		e, _ := v.(*entry)
		ch <- result{e, err}
	}()
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("fetch card %s: %w", base, context.Cause(ctx))
	case r := <-ch:
		return r.e, r.err
	}
}

// track counts a goroutine about to start, unless the cache is closed.
func (c *cardCache) track() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return false
	}
	c.wg.Add(1)
	return true
}

// fetch runs one revalidation under the cache's own context, so a caller
// that gives up does not fail the others sharing the request; its span
// joins the trace of the caller that started it (parent).
func (c *cardCache) fetch(parent context.Context, base string) (*entry, error) {
	prev, _ := c.lru.Peek(base)
	revalidation := prev != nil && prev.profile != nil
	start := time.Now()
	ctx, span := c.in.fetchSpan(c.ctx, parent, base, revalidation)
	if !revalidation {
		c.in.cache.Add(ctx, 1, cacheMiss)
	}
	e, notModified, err := c.store(ctx, base, prev)
	c.in.fetched(ctx, span, start, revalidation, notModified, err)
	return e, err
}

// store fetches base, revalidating prev when set, and stores the outcome:
// the new entry, or prev marked with the failure. It reports whether the
// server answered 304 Not Modified.
func (c *cardCache) store(ctx context.Context, base string, prev *entry) (*entry, bool, error) {
	res, err := c.f.fetch(ctx, base, prev)
	now := c.cfg.Now()
	var p *capability.Profile
	if err == nil {
		if res.notModified {
			p = prev.profile
		} else {
			p, err = c.f.build(res, "", base)
		}
	}
	if err != nil {
		e := &entry{base: base}
		if prev != nil {
			cp := *prev
			e = &cp
		}
		e.failures++
		e.err = err
		e.retryAt = now.Add(c.cfg.backoff(e.failures))
		c.lru.Add(base, e)
		return e, false, err
	}

	e := &entry{base: base, cardURL: res.cardURL, legacy: res.legacy, profile: p, fetchedAt: now,
		etag: res.etag, lastMod: res.lastMod, policy: res.policy}
	if c.cfg.Store != nil || capability.CardSigned(res.raw) {
		e.raw = res.raw
	}
	if res.notModified {
		e.raw = prev.raw
		// RFC 9111 §4.3.4: a 304 updates the stored response's metadata.
		if e.etag == "" {
			e.etag = prev.etag
		}
		if e.lastMod == "" {
			e.lastMod = prev.lastMod
		}
		if !hasDirectives(res.header) {
			e.policy = prev.policy
		}
	}
	e.applyPolicy(c.cfg, now)
	if e.policy.noStore {
		c.lru.Remove(base)
	} else {
		c.lru.Add(base, e)
	}
	return e, res.notModified, nil
}

// applyPolicy sets the freshness and stale windows from the entry's policy.
func (e *entry) applyPolicy(cfg Config, now time.Time) {
	lifetime := cfg.DefaultTTL
	if e.policy.hasLifetime {
		lifetime = e.policy.lifetime
	}
	e.freshUntil = now.Add(max(lifetime-e.policy.age, 0))
	e.swr, e.sie = cfg.StaleWhileRevalidate, cfg.StaleIfError
	if e.policy.swr >= 0 {
		e.swr = e.policy.swr
	}
	if e.policy.sie >= 0 {
		e.sie = e.policy.sie
	}
	if e.policy.noCache {
		e.swr = 0
	}
	if e.policy.mustRevalidate {
		e.swr, e.sie = 0, 0
	}
}

// background revalidates base once, unless a revalidation is already
// running or the cache is closed.
func (c *cardCache) background(base string) {
	c.mu.Lock()
	if c.bg[base] {
		c.mu.Unlock()
		return
	}
	c.bg[base] = true
	c.mu.Unlock()
	if !c.track() {
		return
	}
	go func() {
		defer c.wg.Done()
		if _, err := c.revalidate(c.ctx, base); err != nil {
			c.log.Warn("background revalidation of agent card failed", "url", base, "error", err)
		}
		c.mu.Lock()
		delete(c.bg, base)
		c.mu.Unlock()
	}()
}

// close stops background revalidations and waits for them.
func (c *cardCache) close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
	c.f.close()
}
