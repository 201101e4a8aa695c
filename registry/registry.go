package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/credentials"
)

// Spec names an agent to register: its base URL and, optionally, the id to
// register it under. Without an id the registry derives one from the card's
// name ("Research Agent" → "research-agent", then "research-agent-2", …).
type Spec struct {
	// ID is the agent's id; letters, digits, '.', '_' and '-', at most 64.
	ID string `json:"id,omitempty" yaml:"id,omitempty"`
	// URL is the agent's base URL; the card is read from
	// URL/.well-known/agent-card.json. A URL ending in .json is read as
	// the card itself.
	URL string `json:"url" yaml:"url"`
	// CardKeys pins the keys the agent's card signatures must verify with:
	// paths to PEM public keys or JWKS files, read afresh at each check.
	// They come from the config file only: the API cannot name files on
	// the daemon's machine.
	CardKeys []string `json:"-" yaml:"cardKeys,omitempty"`
	// Credentials are what orchd may send to authenticate to the agent
	// (see package credentials). They come only from the configuration:
	// never from the API, never saved in the store, never in JSON.
	Credentials *credentials.Config `json:"-" yaml:"credentials,omitempty"`
	// Peer marks the agent as an orchd this one trusts to report its
	// lineage (what it chose below, and how it stands), when
	// authentication is configured; with none, every orchd's lineage is
	// believed (docs/delegation.md#lineage-up-the-chain). It comes from
	// the configuration only, and needs an ID.
	Peer bool `json:"-" yaml:"peer,omitempty"`
}

// Pending is a configured agent whose card could not be fetched yet. The
// registry keeps retrying it with backoff and registers it on success.
type Pending struct {
	// ID is the configured id, if any.
	ID string `json:"id,omitempty"`
	// URL is the agent's normalized base URL.
	URL string `json:"url"`
	// Failures counts the attempts that failed.
	Failures int `json:"failures"`
	// LastError says why the last attempt failed.
	LastError string `json:"lastError"`
	// NextAttempt is when the next attempt goes out.
	NextAttempt time.Time `json:"nextAttempt"`
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// Registry is the set of known agents. Its lookups are safe for concurrent
// use and never touch the network; Add, Refresh and Inspect do.
//
// Lock order: storeMu before mu before inflightMu. Only storeMu is held
// across calls, and only across calls to Config.Store.
type Registry struct {
	cfg   Config
	log   *slog.Logger
	cache *cardCache
	sigs  *cardVerifier

	mu      sync.RWMutex
	byID    map[string]*Agent
	byURL   map[string]*Agent
	bySkill map[string][]*Agent
	byCap   map[string][]*Agent
	byExt   map[string][]*Agent
	list    []*Agent // sorted by id; nil when it must be rebuilt
	pending map[string]*pendingAgent
	// gen counts changes of the set of agents or of their profiles.
	gen atomic.Uint64

	inflightMu sync.Mutex
	inflight   map[string]bool // bases being refreshed in the background

	// creds holds the configured agents' credentials by base URL.
	creds credentialSet
	// contained holds the containments by agent id (contain.go), under mu.
	contained map[string]*Containment

	// With a Store, storeMu serializes store writes and every change to
	// the set of agents, so stored tracks the store's revisions exactly.
	storeMu sync.Mutex
	stored  map[string]storedAgent // by id: what the store holds
	// watchFrom is the highest revision Load or the watch delivered; a
	// watch (re)starts after it.
	watchFrom uint64

	ctx       context.Context
	cancel    context.CancelFunc
	startOnce sync.Once
	closeOnce sync.Once
	wg        sync.WaitGroup
}

type pendingAgent struct {
	spec      Spec
	base      string
	failures  int
	err       error
	nextCheck time.Time
	// origin is where the agent came from (OriginConfig or OriginAPI);
	// kept marks an agent the store holds under spec.ID whose saved card
	// no longer builds, and drift is its saved drift history.
	origin string
	kept   bool
	drift  []DriftRecord
}

// New returns a registry with cfg's zero fields set to their defaults. It
// starts no goroutine: call [Registry.Start] to refresh agents in the
// background and [Registry.Close] to stop. A nil logger discards logs.
func New(cfg Config, log *slog.Logger) (*Registry, error) {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f, err := newFetcher(cfg)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	in := newInstruments(cfg.TracerProvider, cfg.MeterProvider)
	cache, err := newCardCache(cfg, f, log, in)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	sigs, err := newCardVerifier(cfg, f.client, log)
	if err != nil {
		return nil, fmt.Errorf("registry: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Registry{
		cfg: cfg, log: log, cache: cache, sigs: sigs,
		byID: map[string]*Agent{}, byURL: map[string]*Agent{},
		bySkill: map[string][]*Agent{}, byCap: map[string][]*Agent{}, byExt: map[string][]*Agent{},
		pending: map[string]*pendingAgent{}, inflight: map[string]bool{},
		stored: map[string]storedAgent{}, contained: map[string]*Containment{},
		ctx: ctx, cancel: cancel,
	}, nil
}

// Add fetches the agent's card and registers it. Nothing is registered
// unless the card was fetched and read successfully. It fails with
// ErrConflict when the URL or the explicit id is taken, ErrInvalidURL or
// ErrInvalidID for a bad URL or id, a *FetchError when the card cannot be fetched and a
// *capability.CardError when it cannot be read. With Config.Store set the
// agent is saved before Add returns; when it cannot be, Add fails (wrapping
// ErrUnavailable when the store cannot be reached, ErrConflict when another
// process stored an agent under the id) and nothing is registered.
func (r *Registry) Add(ctx context.Context, spec Spec) (*Agent, error) {
	return r.add(ctx, spec, OriginAPI)
}

func (r *Registry) add(ctx context.Context, spec Spec, origin string) (*Agent, error) {
	base, err := r.checkSpec(spec)
	if err != nil {
		return nil, err
	}
	e, err := r.cache.revalidate(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("add agent %s: %w", base, err)
	}
	return r.register(ctx, spec, base, e, origin)
}

// AddOrRetry is Add for configured agents: when the card cannot be fetched
// or read, the agent is kept pending and retried in the background with
// backoff, and the error is returned for the caller to report. With
// Config.Store set, an agent already registered at spec's URL (under
// spec.ID, when it names one), as [Registry.Load] registers the saved
// ones, is returned at once without a fetch; one the store cannot take
// yet is kept pending too.
func (r *Registry) AddOrRetry(ctx context.Context, spec Spec) (*Agent, error) {
	if r.cfg.Store != nil {
		if a, ok := r.registered(spec); ok {
			return r.adopt(ctx, r.credentialed(a, spec), spec), nil
		}
	}
	a, err := r.add(ctx, spec, OriginConfig)
	refused := errors.Is(err, ErrConflict) && !errors.Is(err, ErrStale) || // a store conflict is retried
		errors.Is(err, ErrSignature) || errors.Is(err, ErrCardKeys)
	if err == nil || refused || errors.Is(err, ErrInvalidURL) || errors.Is(err, ErrInvalidID) || errors.Is(err, ErrInvalidCredentials) || errors.Is(err, ErrClosed) {
		return a, err
	}
	base, _ := NormalizeURL(spec.URL)
	r.mu.Lock()
	r.pending[base] = &pendingAgent{spec: spec, base: base, failures: 1, err: err, nextCheck: r.cfg.Now().Add(r.cfg.backoff(1)), origin: OriginConfig}
	r.mu.Unlock()
	return nil, err
}

// checkSpec validates spec and fails fast on conflicts before any fetch.
func (r *Registry) checkSpec(spec Spec) (string, error) {
	if r.ctx.Err() != nil {
		return "", ErrClosed
	}
	base, err := NormalizeURL(spec.URL)
	if err != nil {
		return "", err
	}
	if spec.ID != "" && !idPattern.MatchString(spec.ID) {
		return "", fmt.Errorf("%w %q: use letters, digits, '.', '_' and '-' (at most 64)", ErrInvalidID, spec.ID)
	}
	if err := spec.Credentials.Validate(); err != nil {
		return "", fmt.Errorf("%w: agent %s: %w", ErrInvalidCredentials, base, err)
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return base, r.conflict(spec.ID, base)
}

func (r *Registry) conflict(id, base string) error {
	if a, ok := r.byURL[base]; ok {
		return fmt.Errorf("%w: %s is registered as %q", ErrConflict, base, a.ID)
	}
	if a, ok := r.byID[id]; ok && id != "" {
		return fmt.Errorf("%w: id %q is taken by %s", ErrConflict, id, a.base)
	}
	return nil
}

// register inserts a freshly fetched agent; with a Store, once it is saved.
func (r *Registry) register(ctx context.Context, spec Spec, base string, e *entry, origin string) (*Agent, error) {
	e, err := r.signedEntry(ctx, spec, base, e)
	if err != nil {
		return nil, err
	}
	if r.cfg.Store != nil {
		return r.registerKept(ctx, spec, base, e, origin)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a, err := r.prepare(spec, base, e)
	if err != nil {
		return nil, err
	}
	r.insert(a, e)
	return a, nil
}

// prepare checks that a fetched agent can be registered and returns it,
// not indexed yet. Callers hold mu.
func (r *Registry) prepare(spec Spec, base string, e *entry) (*Agent, error) {
	if r.ctx.Err() != nil {
		return nil, ErrClosed
	}
	if err := r.conflict(spec.ID, base); err != nil {
		return nil, err
	}
	id := spec.ID
	var drift []DriftRecord
	if p, ok := r.pending[base]; ok && p.kept {
		// The store holds the agent under its id: it stays there.
		if id != "" && id != p.spec.ID {
			return nil, fmt.Errorf("%w: %s is kept as %q", ErrConflict, base, p.spec.ID)
		}
		id, drift = p.spec.ID, p.drift
	}
	if id == "" {
		id = r.freeID(slug(e.profile.Name))
	}
	a := &Agent{base: base, Healthy: true, Breaker: Breaker{State: BreakerClosed}, Drift: drift, creds: spec.Credentials}
	a.Profile = withID(e.profile, id)
	a.Signature, a.cardKeys = e.sig, spec.CardKeys
	a.setCacheState(e, r.cfg)
	return a, nil
}

// insert indexes a prepared agent. Callers hold mu.
func (r *Registry) insert(a *Agent, e *entry) {
	delete(r.pending, a.base)
	r.index(a)
	r.log.Info("agent registered", "id", a.ID, "url", a.base, "card", e.cardURL,
		"compatible", a.ClientCompatible, "reason", a.IncompatibleReason, "warnings", len(a.Warnings))
}

// withID returns p carrying id, sharing everything else with p.
func withID(p *capability.Profile, id string) *capability.Profile {
	if p.ID == id {
		return p
	}
	cp := *p
	cp.ID = id
	return &cp
}

func (a *Agent) setCacheState(e *entry, cfg Config) {
	a.FetchedAt, a.ExpiresAt, a.ETag = e.fetchedAt, e.freshUntil, e.etag
	a.nextCheck = e.freshUntil
	if floor := e.fetchedAt.Add(cfg.MinRefreshInterval); a.nextCheck.Before(floor) {
		a.nextCheck = floor
	}
}

// slug turns a card name into an id.
func slug(name string) string {
	var b strings.Builder
	dash := false
	for _, c := range strings.ToLower(name) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			b.WriteRune(c)
			dash = false
			if b.Len() >= 48 {
				break
			}
			continue
		}
		dash = true
	}
	if b.Len() == 0 {
		return "agent"
	}
	return b.String()
}

// freeID returns s, or s-2, s-3, … whichever no agent uses. Callers hold mu.
func (r *Registry) freeID(s string) string {
	taken := func(id string) bool {
		if _, ok := r.byID[id]; ok {
			return true
		}
		for _, p := range r.pending {
			if p.spec.ID == id {
				return true
			}
		}
		return false
	}
	id := s
	for n := 2; taken(id); n++ {
		id = s + "-" + strconv.Itoa(n)
	}
	return id
}

// Remove unregisters the agent, or forgets a pending one with that id.
// With Config.Store set the agent is deleted from the store first, within
// Config.StoreTimeout; when that fails the error is returned (wrapping
// ErrUnavailable when the store cannot be reached) and the agent stays.
func (r *Registry) Remove(id string) error {
	if r.cfg.Store != nil {
		return r.removeKept(id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if a, ok := r.byID[id]; ok {
		r.unindex(a)
		r.cache.lru.Remove(a.base)
		r.log.Info("agent removed", "id", id, "url", a.base)
		return nil
	}
	for base, p := range r.pending {
		if p.spec.ID == id {
			delete(r.pending, base)
			return nil
		}
	}
	return fmt.Errorf("%w: %q", ErrNotFound, id)
}

// Refresh revalidates the agent's card now. On failure it returns the
// error; the agent keeps its last good profile and its failure count rises.
func (r *Registry) Refresh(ctx context.Context, id string) (*Agent, error) {
	a, ok := r.Get(id)
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	e, err := r.cache.revalidate(ctx, a.base)
	if ctx.Err() != nil && err != nil {
		return a, err // the caller gave up; that says nothing of the agent
	}
	return r.settle(ctx, id, e, err)
}

// Inspect fetches one card, through the cache, without registering it.
func (r *Registry) Inspect(ctx context.Context, url string) (*Agent, error) {
	if r.ctx.Err() != nil {
		return nil, ErrClosed
	}
	base, err := NormalizeURL(url)
	if err != nil {
		return nil, err
	}
	e, err := r.cache.get(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("inspect %s: %w", base, err)
	}
	a := &Agent{base: base, Failures: e.failures, Breaker: Breaker{State: BreakerClosed}}
	if e.err != nil {
		a.LastError = e.err.Error()
	}
	a.setHealth(&r.cfg)
	a.Profile = e.profile
	a.Signature, _ = r.signature(ctx, nil, e)
	a.setCacheState(e, r.cfg)
	r.creds.attach(a)
	return a, nil
}

// apply records the outcome of a revalidation of agent id and returns the
// agent as it now stands.
func (r *Registry) apply(id string, e *entry, fetchErr error) (*Agent, error) {
	var sig capability.Signature
	if fetchErr == nil {
		sig, fetchErr = r.refreshSignature(id, e)
	}
	now := r.cfg.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.byID[id]
	if !ok {
		return nil, fmt.Errorf("%w: %q (removed during refresh)", ErrNotFound, id)
	}
	next := *old
	if fetchErr != nil {
		next.Failures++
		next.LastError = fetchErr.Error()
		next.nextCheck = now.Add(r.cfg.backoff(next.Failures))
		r.refreshed(&next, fetchErr, now)
		next.setHealth(&r.cfg)
		if errors.Is(fetchErr, ErrSignature) {
			r.signatureDrift(old, &next, sig, e, now)
		}
		r.cache.in.cache.Add(context.Background(), 1, cacheStale) // the last good card stays in use
		if next.Failures == r.cfg.UnhealthyAfter {
			r.log.Error("agent marked unhealthy; serving its last good card", "id", id, "failures", next.Failures, "error", fetchErr)
		} else {
			r.log.Warn("agent card refresh failed; serving its last good card", "id", id, "failures", next.Failures, "error", fetchErr)
		}
		r.replace(old, &next)
		return &next, fetchErr
	}
	next.Failures, next.LastError = 0, ""
	next.setCacheState(e, r.cfg)
	r.refreshed(&next, nil, now)
	next.setHealth(&r.cfg)
	if e.profile.Digest != old.Digest {
		next.Profile = withID(e.profile, id)
		if d := capability.Diff(old.Profile, next.Profile); !d.Empty() {
			next.Drift = append(slices.Clone(old.Drift), DriftRecord{At: now, Drift: d})
			if over := len(next.Drift) - r.cfg.DriftHistory; over > 0 {
				next.Drift = next.Drift[over:]
			}
			log := r.log.Info
			if len(d.Violations) > 0 {
				log = r.log.Warn
			}
			log("agent card drifted", "id", id, "added", d.Added, "removed", d.Removed,
				"deprecated", d.Deprecated, "versions", d.Versions, "violations", d.Violations)
		} else {
			r.log.Debug("agent card changed without capability drift", "id", id, "digest", d.To)
		}
	}
	next.Signature = sig
	r.signatureDrift(old, &next, sig, e, now)
	if !old.Healthy {
		r.log.Info("agent healthy again", "id", id)
	}
	r.replace(old, &next)
	return &next, nil
}

// Get returns the agent registered under id.
func (r *Registry) Get(id string) (*Agent, bool) {
	r.mu.RLock()
	a, ok := r.byID[id]
	r.mu.RUnlock()
	return a, ok
}

// ByURL returns the agent registered under a base URL.
func (r *Registry) ByURL(url string) (*Agent, bool) {
	r.mu.RLock()
	a, ok := r.byURL[url]
	r.mu.RUnlock()
	if ok {
		return a, true
	}
	base, err := NormalizeURL(url)
	if err != nil || base == url {
		return nil, false
	}
	r.mu.RLock()
	a, ok = r.byURL[base]
	r.mu.RUnlock()
	return a, ok
}

// BySkill returns the agents with a skill whose id or one of whose tags is
// s, sorted by id. The slice is shared: do not modify it.
func (r *Registry) BySkill(s string) []*Agent { return r.lookup(r.bySkill, s) }

// ByCapability returns the agents that have the capability, in any
// spelling capability.CanonicalName accepts, sorted by id. The slice is
// shared: do not modify it.
func (r *Registry) ByCapability(name string) []*Agent {
	return r.lookup(r.byCap, capability.CanonicalName(name))
}

// ByExtension returns the agents whose card advertises the extension URI,
// sorted by id. The slice is shared: do not modify it.
func (r *Registry) ByExtension(uri string) []*Agent { return r.lookup(r.byExt, uri) }

func (r *Registry) lookup(m map[string][]*Agent, key string) []*Agent {
	r.mu.RLock()
	as := m[key]
	r.mu.RUnlock()
	return as
}

// List returns every registered agent sorted by id. The slice is shared:
// do not modify it.
func (r *Registry) List() []*Agent {
	r.mu.RLock()
	l := r.list
	r.mu.RUnlock()
	if l != nil {
		return l
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.list == nil {
		r.list = make([]*Agent, 0, len(r.byID))
		for _, a := range r.byID {
			r.list = append(r.list, a)
		}
		slices.SortFunc(r.list, byID)
	}
	return r.list
}

// Len returns how many agents are registered.
func (r *Registry) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.byID)
}

// Pending returns the configured agents not registered yet, sorted by URL.
func (r *Registry) Pending() []Pending {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Pending, 0, len(r.pending))
	for _, p := range r.pending {
		out = append(out, Pending{ID: p.spec.ID, URL: p.base, Failures: p.failures, LastError: p.err.Error(), NextAttempt: p.nextCheck})
	}
	slices.SortFunc(out, func(a, b Pending) int { return strings.Compare(a.URL, b.URL) })
	return out
}

// Generation changes whenever an agent is added or removed or its profile
// changes (not on health or cache updates alone), so a view derived from
// the agents, such as the skills a card offers, knows when to rebuild.
func (r *Registry) Generation() uint64 { return r.gen.Load() }

func byID(a, b *Agent) int { return strings.Compare(a.ID, b.ID) }

// indexKeys lists, per secondary index, the keys an agent is filed under.
func (r *Registry) indexKeys(a *Agent, fn func(m map[string][]*Agent, key string)) {
	for _, k := range skillKeys(a) {
		fn(r.bySkill, k)
	}
	for k := range a.Capabilities {
		fn(r.byCap, k)
	}
	for _, x := range a.Extensions {
		fn(r.byExt, x.URI)
	}
}

// index adds a to every index. Callers hold mu for writing. Index slices
// are copied on write, so slices handed to readers never change.
func (r *Registry) index(a *Agent) {
	r.creds.attach(a) // a is not published yet: every indexed agent passes here
	r.contain(a)
	r.gen.Add(1)
	r.byID[a.ID] = a
	r.byURL[a.base] = a
	r.list = nil
	r.indexKeys(a, func(m map[string][]*Agent, k string) {
		i, _ := slices.BinarySearchFunc(m[k], a, byID)
		m[k] = slices.Insert(slices.Clone(m[k]), i, a)
	})
}

// unindex removes a from every index. Callers hold mu for writing.
func (r *Registry) unindex(a *Agent) {
	r.gen.Add(1)
	delete(r.byID, a.ID)
	delete(r.byURL, a.base)
	r.list = nil
	r.indexKeys(a, func(m map[string][]*Agent, k string) {
		out := slices.DeleteFunc(slices.Clone(m[k]), func(x *Agent) bool { return x == a })
		if len(out) == 0 {
			delete(m, k)
			return
		}
		m[k] = out
	})
}

// replace swaps old for next. When the profile is unchanged the agent keeps
// its place in every index. Callers hold mu for writing.
func (r *Registry) replace(old, next *Agent) {
	if old.Profile != next.Profile {
		r.unindex(old)
		r.index(next)
		return
	}
	r.byID[next.ID] = next
	r.byURL[next.base] = next
	r.list = nil
	r.indexKeys(old, func(m map[string][]*Agent, k string) {
		if i := slices.Index(m[k], old); i >= 0 {
			cp := slices.Clone(m[k])
			cp[i] = next
			m[k] = cp
		}
	})
}

func skillKeys(a *Agent) []string {
	var keys []string
	seen := map[string]bool{}
	for _, s := range a.Skills {
		for _, k := range append([]string{s.ID}, s.Tags...) {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
	}
	return keys
}
