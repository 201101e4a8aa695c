package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/orchd/orchd/capability"
)

// Errors an [AgentStore] reports, for the registry and its callers to
// decide on.
var (
	// ErrUnavailable means the agent store could not be reached or did not
	// answer in time; the error wraps the cause. Nothing was changed by the
	// call that failed, as far as the caller can tell: an HTTP API answers
	// it with 503.
	ErrUnavailable = errors.New("agent store unavailable")
	// ErrStale means a save was refused because the stored agent is not at
	// the revision the save expected: another process saved or deleted it
	// meanwhile.
	ErrStale = errors.New("stored agent changed meanwhile")
)

// Where a saved agent came from.
const (
	// OriginAPI marks an agent registered with [Registry.Add].
	OriginAPI = "api"
	// OriginConfig marks an agent registered with [Registry.AddOrRetry],
	// as configured agents are.
	OriginConfig = "config"
)

// SavedFormat is the version of [SavedAgent]'s layout this registry writes
// and reads. A saved agent in another format is kept pending and fetched
// again, and then saved in this one.
const SavedFormat = 1

// AgentStore keeps the registry's agents across restarts and shares them
// between the processes using one store. The registry writes through it
// before it acknowledges a change, reads it at [Registry.Load], and
// watches it once started. Every agent is stored under its id at a
// revision that grows with each change of the store, so the registry can
// tell its own saves from other processes' and refuse to overwrite a newer
// version with an older one. Errors from a store that cannot be reached
// wrap [ErrUnavailable].
type AgentStore interface {
	// Save stores a under a.ID if the agent stored there is still at
	// a.Revision (0: none is stored) and returns the new revision. When it
	// is not, it fails with an error wrapping [ErrStale].
	Save(ctx context.Context, a SavedAgent) (revision uint64, err error)
	// Delete removes the agent stored under id, whatever its revision.
	// Deleting an id that is not stored is not an error.
	Delete(ctx context.Context, id string) error
	// Load returns the agents stored at one moment, each with its
	// Revision: every change made after that moment has a higher revision
	// than any of them.
	Load(ctx context.Context) ([]SavedAgent, error)
	// Watch calls fn, one call at a time and in revision order, for every
	// change stored after revision after, this process's own saves
	// included; removed is true for a deletion, and then only a.ID and
	// a.Revision are set. It blocks until ctx is done (returning nil) or
	// the watch fails (returning the error); the caller watches again
	// from the last revision it saw.
	Watch(ctx context.Context, after uint64, fn func(a SavedAgent, removed bool)) error
}

// SavedAgent is what an [AgentStore] keeps of an agent: enough to register
// it again without the network, with the card as fetched (so it rebuilds
// the same profile and digest), the validators that make its next
// revalidation conditional, and its drift history. Its JSON field names
// are stable.
//
// Health, failure counts and the circuit breaker are not saved: each
// process observes them itself, and a restarted one starts healthy.
type SavedAgent struct {
	// Format is SavedFormat when the agent was saved.
	Format int `json:"format"`
	// ID is the agent's id.
	ID string `json:"id"`
	// URL is the agent's normalized base URL.
	URL string `json:"url"`
	// Origin is OriginAPI or OriginConfig.
	Origin string `json:"origin,omitempty"`
	// CardURL is where the card was fetched from; Legacy is true when
	// that is the A2A 0.2 path.
	CardURL string `json:"cardUrl"`
	Legacy  bool   `json:"legacy,omitempty"`
	// Card is the card's JSON as fetched. A store may compact it, which
	// changes neither the profile nor the digest it rebuilds.
	Card json.RawMessage `json:"card"`
	// Digest is the profile's digest, for comparing versions without
	// reading the card.
	Digest string `json:"digest"`
	// ETag and LastModified are the card response's validators.
	ETag         string `json:"etag,omitempty"`
	LastModified string `json:"lastModified,omitempty"`
	// FetchedAt is when the card was last fetched or revalidated, and
	// ExpiresAt when it stops being fresh.
	FetchedAt time.Time `json:"fetchedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	// Cache is what the card response said about caching it.
	Cache SavedCache `json:"cache"`
	// Drift is the agent's drift history, oldest first.
	Drift []DriftRecord `json:"drift,omitempty"`

	// Revision is the store's revision of this version: set by Load and
	// Watch, and on Save the revision the save expects to replace.
	Revision uint64 `json:"-"`
}

// SavedCache is the caching policy of a saved card response (RFC 9111
// §5.2.2). Durations are in seconds, as HTTP gives them.
type SavedCache struct {
	// NoStore, NoCache and MustRevalidate are the response directives.
	NoStore        bool `json:"noStore,omitempty"`
	NoCache        bool `json:"noCache,omitempty"`
	MustRevalidate bool `json:"mustRevalidate,omitempty"`
	// Lifetime is the freshness lifetime the response gave; nil when it
	// gave none and Config.DefaultTTL applies.
	Lifetime *int64 `json:"lifetime,omitempty"`
	// Age is the response's Age header.
	Age int64 `json:"age,omitempty"`
	// StaleWhileRevalidate and StaleIfError are the response's
	// directives, nil when absent.
	StaleWhileRevalidate *int64 `json:"staleWhileRevalidate,omitempty"`
	StaleIfError         *int64 `json:"staleIfError,omitempty"`
}

// ValidID reports whether id is acceptable as an agent id: a letter or
// digit, then letters, digits, '.', '_' and '-', 64 at most. A store may
// rely on it when it maps ids to keys.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// storedAgent is what the registry knows of an agent's stored version.
type storedAgent struct {
	rev                            uint64
	origin                         string
	digest, etag, lastMod, cardURL string
}

func storedOf(sa SavedAgent, rev uint64) storedAgent {
	return storedAgent{rev: rev, origin: sa.Origin, digest: sa.Digest, etag: sa.ETag, lastMod: sa.LastModified, cardURL: sa.CardURL}
}

// matches reports whether the stored version has e's card and validators,
// so a refresh that fetched e has nothing to save.
func (s storedAgent) matches(e *entry) bool {
	return s.digest == e.profile.Digest && s.etag == e.etag && s.lastMod == e.lastMod && s.cardURL == e.cardURL
}

// saved returns what the store keeps of a, fetched as e.
func saved(a *Agent, e *entry, origin string) SavedAgent {
	return SavedAgent{
		Format: SavedFormat, ID: a.ID, URL: a.base, Origin: origin,
		CardURL: e.cardURL, Legacy: e.legacy, Card: e.raw, Digest: a.Digest,
		ETag: e.etag, LastModified: e.lastMod, FetchedAt: e.fetchedAt, ExpiresAt: e.freshUntil,
		Cache: savedCache(e.policy), Drift: a.Drift,
	}
}

func savedCache(p cachePolicy) SavedCache {
	secs := func(d time.Duration) *int64 {
		if d < 0 {
			return nil
		}
		s := int64(d / time.Second)
		return &s
	}
	c := SavedCache{NoStore: p.noStore, NoCache: p.noCache, MustRevalidate: p.mustRevalidate, Age: int64(p.age / time.Second),
		StaleWhileRevalidate: secs(p.swr), StaleIfError: secs(p.sie)}
	if p.hasLifetime {
		c.Lifetime = secs(p.lifetime)
	}
	return c
}

func (c SavedCache) policy() cachePolicy {
	dur := func(s *int64) time.Duration {
		if s == nil || *s < 0 {
			return -1
		}
		return time.Duration(min(*s, 1<<31)) * time.Second
	}
	p := cachePolicy{noStore: c.NoStore, noCache: c.NoCache, mustRevalidate: c.MustRevalidate,
		age: max(dur(&c.Age), 0), swr: dur(c.StaleWhileRevalidate), sie: dur(c.StaleIfError)}
	if c.Lifetime != nil {
		p.lifetime, p.hasLifetime = max(dur(c.Lifetime), 0), true
	}
	return p
}

// Load registers the agents kept in Config.Store, without the network:
// each profile is rebuilt from its saved card, and its card cache entry is
// seeded with the saved validators, so its next revalidation is
// conditional. An agent whose card expired is revalidated by the refresher
// once started and serves its last good card meanwhile. A saved agent
// whose card no longer builds (saved by an orchd that reads cards
// differently) is logged and kept pending, to be fetched again and saved
// anew. Call Load once, before [Registry.AddOrRetry] for the configured
// agents (which then finds the saved ones registered) and before
// [Registry.Start]. Without a Store it does nothing. It fails, registering
// nothing, when the store cannot be read within Config.StoreTimeout.
func (r *Registry) Load(ctx context.Context) error {
	if r.cfg.Store == nil {
		return nil
	}
	if r.ctx.Err() != nil {
		return ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StoreTimeout)
	agents, err := r.cfg.Store.Load(ctx)
	cancel()
	if err != nil {
		return fmt.Errorf("load agents: %w", err)
	}
	r.storeMu.Lock()
	defer r.storeMu.Unlock()
	for _, sa := range agents {
		r.keep(sa, false)
	}
	r.log.Info("agents loaded from the store", "stored", len(agents), "agents", r.Len(), "pending", len(r.Pending()))
	return nil
}

// registered returns the agent registered at spec's URL, if spec names it:
// under spec.ID, or under any id when spec has none.
func (r *Registry) registered(spec Spec) (*Agent, bool) {
	base, err := NormalizeURL(spec.URL)
	if err != nil {
		return nil, false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	a, ok := r.byURL[base]
	if !ok || spec.ID != "" && spec.ID != a.ID {
		return nil, false
	}
	return a, true
}

// save writes sa within Config.StoreTimeout. Callers hold storeMu.
func (r *Registry) save(ctx context.Context, sa SavedAgent) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.StoreTimeout)
	defer cancel()
	return r.cfg.Store.Save(ctx, sa)
}

// registerKept saves a freshly fetched agent, then registers it.
func (r *Registry) registerKept(ctx context.Context, spec Spec, base string, e *entry, origin string) (*Agent, error) {
	r.storeMu.Lock()
	defer r.storeMu.Unlock()
	r.mu.Lock()
	a, err := r.prepare(spec, base, e)
	r.mu.Unlock()
	if err != nil {
		return nil, err
	}
	st := r.stored[a.ID]
	if st.origin != "" {
		origin = st.origin
	}
	sa := saved(a, e, origin)
	sa.Revision = st.rev
	rev, err := r.save(ctx, sa)
	switch {
	case errors.Is(err, ErrStale):
		return nil, fmt.Errorf("add agent %s: %w: another process stored agent %q meanwhile: %w", base, ErrConflict, a.ID, err)
	case err != nil:
		return nil, fmt.Errorf("add agent %s: %w", base, err)
	}
	r.stored[a.ID] = storedOf(sa, rev)
	r.mu.Lock()
	r.insert(a, e)
	r.mu.Unlock()
	return a, nil
}

// removeKept deletes the agent from the store, then unregisters it.
func (r *Registry) removeKept(id string) error {
	r.storeMu.Lock()
	defer r.storeMu.Unlock()
	r.mu.RLock()
	_, found := r.byID[id]
	for _, p := range r.pending {
		found = found || p.spec.ID == id
	}
	r.mu.RUnlock()
	if !found {
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.StoreTimeout)
	err := r.cfg.Store.Delete(ctx, id)
	cancel()
	if err != nil {
		return fmt.Errorf("remove agent %s: %w", id, err)
	}
	delete(r.stored, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drop(id)
	return nil
}

// drop unregisters agent id and forgets a pending agent with that id.
// Callers hold mu.
func (r *Registry) drop(id string) {
	if a, ok := r.byID[id]; ok {
		r.unindex(a)
		r.cache.lru.Remove(a.base)
		r.log.Info("agent removed", "id", id, "url", a.base)
	}
	for base, p := range r.pending {
		if p.spec.ID == id {
			delete(r.pending, base)
		}
	}
}

// settle applies a refresh's outcome and, with a Store, saves the agent
// when its card or validators changed. A save that fails is logged; the
// agent as refreshed keeps serving from memory.
func (r *Registry) settle(ctx context.Context, id string, e *entry, fetchErr error) (*Agent, error) {
	if r.cfg.Store == nil {
		return r.apply(id, e, fetchErr)
	}
	r.storeMu.Lock()
	defer r.storeMu.Unlock()
	a, err := r.apply(id, e, fetchErr)
	if err != nil {
		return a, err
	}
	st, ok := r.stored[id]
	if !ok || st.matches(e) {
		return a, nil
	}
	sa := saved(a, e, st.origin)
	sa.Revision = st.rev
	rev, err := r.save(ctx, sa)
	switch {
	case err == nil:
		r.stored[id] = storedOf(sa, rev)
	case errors.Is(err, ErrStale):
		r.log.Info("agent changed in the store meanwhile; the stored version follows", "id", id, "error", err)
	default:
		r.log.Warn("refreshed agent not saved; it serves from memory", "id", id, "error", err)
	}
	return a, nil
}

// keep registers, replaces or keeps pending a saved agent, from Load or
// the watch (fromWatch), unless the registry already has this version or a
// later one. It needs no network. Callers hold storeMu.
func (r *Registry) keep(sa SavedAgent, fromWatch bool) {
	r.watchFrom = max(r.watchFrom, sa.Revision)
	if st, ok := r.stored[sa.ID]; ok && sa.Revision <= st.rev {
		return // this registry's own save coming back, or an older version
	}
	base, err := NormalizeURL(sa.URL)
	if err != nil || !idPattern.MatchString(sa.ID) {
		r.log.Error("stored agent is not valid; ignored", "id", sa.ID, "url", sa.URL, "revision", sa.Revision, "error", err)
		return
	}
	r.mu.RLock()
	cur := r.byID[sa.ID]
	other, taken := r.byURL[base]
	r.mu.RUnlock()
	if taken && other.ID != sa.ID {
		r.log.Error("stored agent has the URL of another agent; ignored", "id", sa.ID, "url", base, "registeredAs", other.ID)
		return
	}
	if cur != nil && cur.base != base {
		cur = nil // another agent under this id now: replaced below
	}
	var p *capability.Profile
	if cur != nil && cur.Digest == sa.Digest && sa.Format == SavedFormat {
		p = cur.Profile // the same card: nothing to rebuild
	} else {
		p, err = r.rebuild(sa, base)
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	r.stored[sa.ID] = storedOf(sa, sa.Revision)
	if old, ok := r.byID[sa.ID]; ok && old.base != base {
		r.unindex(old)
		r.cache.lru.Remove(old.base)
	}
	if err != nil {
		if cur != nil {
			r.log.Warn("stored agent card does not build here; keeping the card in use", "id", sa.ID, "revision", sa.Revision, "error", err)
			return
		}
		r.log.Warn("stored agent card does not build here; fetching it again", "id", sa.ID, "url", base, "error", err)
		r.pending[base] = &pendingAgent{spec: Spec{ID: sa.ID, URL: base}, base: base, failures: 1, err: err,
			nextCheck: r.cfg.Now(), origin: sa.Origin, kept: true, drift: sa.Drift}
		return
	}
	e := &entry{base: base, cardURL: sa.CardURL, legacy: sa.Legacy, profile: p, raw: sa.Card,
		etag: sa.ETag, lastMod: sa.LastModified, policy: sa.Cache.policy(), fetchedAt: sa.FetchedAt}
	e.applyPolicy(r.cfg, sa.FetchedAt)
	e.freshUntil = sa.ExpiresAt
	if !e.policy.noStore {
		r.cache.lru.Add(base, e)
	}
	cur = r.byID[sa.ID] // as it stands now, breaker and health included
	if cur == nil {
		a := &Agent{base: base, Healthy: true, Breaker: Breaker{State: BreakerClosed}, Drift: sa.Drift}
		a.Profile = withID(p, sa.ID)
		a.setCacheState(e, r.cfg)
		delete(r.pending, base)
		r.index(a)
		if fromWatch {
			r.log.Info("agent registered by another process", "id", sa.ID, "url", base, "revision", sa.Revision)
		} else {
			r.log.Debug("agent loaded from the store", "id", sa.ID, "url", base, "revision", sa.Revision)
		}
		return
	}
	next := *cur
	next.Profile = withID(p, sa.ID)
	next.Drift = sa.Drift
	next.setCacheState(e, r.cfg)
	r.replace(cur, &next)
	r.log.Debug("agent updated from the store", "id", sa.ID, "digest", sa.Digest, "revision", sa.Revision)
}

// rebuild reads a saved agent's card.
func (r *Registry) rebuild(sa SavedAgent, base string) (*capability.Profile, error) {
	if sa.Format != SavedFormat {
		return nil, fmt.Errorf("saved in format %d; this orchd reads format %d", sa.Format, SavedFormat)
	}
	p, err := buildCard(r.cfg, sa.Card, "", base, sa.Legacy)
	if err != nil {
		return nil, fmt.Errorf("saved card: %w", err)
	}
	if sa.Digest != "" && p.Digest != sa.Digest {
		r.log.Warn("stored agent card rebuilds with another digest", "id", sa.ID, "saved", sa.Digest, "rebuilt", p.Digest)
	}
	return p, nil
}

// forget applies a deletion seen by the watch. Callers hold storeMu.
func (r *Registry) forget(id string, rev uint64) {
	r.watchFrom = max(r.watchFrom, rev)
	if st, ok := r.stored[id]; ok && rev <= st.rev {
		return
	}
	delete(r.stored, id)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byID[id]; ok {
		r.log.Info("agent removed by another process", "id", id, "revision", rev)
	}
	r.drop(id)
}

// watch applies the changes other processes save, watching again with
// backoff when the watch fails, until the registry closes.
func (r *Registry) watch() {
	defer r.wg.Done()
	failures := 0
	for {
		r.storeMu.Lock()
		from := r.watchFrom
		r.storeMu.Unlock()
		started := time.Now()
		err := r.cfg.Store.Watch(r.ctx, from, r.watched)
		if r.ctx.Err() != nil {
			return
		}
		if time.Since(started) > r.cfg.MaxBackoff {
			failures = 0 // it ran a while: start backing off afresh
		}
		failures++
		wait := r.cfg.backoff(failures)
		r.log.Warn("agent store watch ended; watching again", "after", from, "retryIn", wait, "error", err)
		t := time.NewTimer(wait)
		select {
		case <-r.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// watched applies one change from the store's watch.
func (r *Registry) watched(sa SavedAgent, removed bool) {
	r.storeMu.Lock()
	defer r.storeMu.Unlock()
	if r.ctx.Err() != nil {
		return
	}
	if removed {
		r.forget(sa.ID, sa.Revision)
		return
	}
	r.keep(sa, true)
}
