package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/lestrrat-go/jwx/v3/jwk"
	"golang.org/x/sync/singleflight"

	"github.com/orchd/orchd/capability"
)

// Errors of card signature checks, for callers to decide on.
var (
	// ErrSignature means Config.RequireSignatures is set and an agent's
	// card is unsigned or no signature on it verifies; the error says why.
	ErrSignature = errors.New("agent card signature not verified")
	// ErrCardKeys means an agent's pinned card keys (Spec.CardKeys) could
	// not be read; the error names the file.
	ErrCardKeys = errors.New("card keys cannot be loaded")
)

// How long a fetched JWKS is used before it is fetched again, and how long
// a failed fetch waits before the next attempt (meanwhile the last good set,
// if any, stays in use).
const (
	jwksTTL        = 5 * time.Minute
	jwksRetryAfter = 30 * time.Second
)

// cardVerifier checks card signatures for the registry: it loads each
// agent's pinned keys and fetches, through the registry's guarded HTTP
// client, the key sets that signatures name by jku when
// Config.CardKeyURLs allows them, caching each.
type cardVerifier struct {
	cfg     Config
	client  *http.Client
	log     *slog.Logger
	allowed map[string]bool // normalized allowed jku URLs

	mu    sync.Mutex
	sets  map[string]*jwksEntry // by normalized URL; only allowed ones
	group singleflight.Group
}

// jwksEntry is one fetched key set, or the failure to fetch it.
type jwksEntry struct {
	set  jwk.Set // the last good set, nil if none
	err  error   // the last failure, nil after a success
	next time.Time
}

func newCardVerifier(cfg Config, client *http.Client, log *slog.Logger) (*cardVerifier, error) {
	v := &cardVerifier{cfg: cfg, client: client, log: log, allowed: map[string]bool{}, sets: map[string]*jwksEntry{}}
	for _, u := range cfg.CardKeyURLs {
		n, err := normalizeKeyURL(u)
		if err != nil {
			return nil, fmt.Errorf("cardKeyURLs: %w", err)
		}
		v.allowed[n] = true
	}
	return v, nil
}

// normalizeKeyURL returns a JWKS URL in the form allow-list entries and
// jku values are compared in: http or https, lower-case scheme and host,
// no fragment or credentials.
func normalizeKeyURL(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.User != nil || u.Fragment != "" {
		return "", fmt.Errorf("%q is not an http(s) URL without credentials or fragment", raw)
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	return u.String(), nil
}

// agentKeys is the capability.KeySource of one verification: the agent's
// pinned keys, and the key sets of allowed jku URLs.
type agentKeys struct {
	ctx    context.Context
	v      *cardVerifier
	pinned jwk.Set
}

// CardKeys implements capability.KeySource.
func (k agentKeys) CardKeys(kid, jku string) ([]jwk.Key, error) {
	keys := capability.MatchKeys(k.pinned, kid)
	if jku == "" {
		return keys, nil
	}
	n, err := normalizeKeyURL(jku)
	if err != nil || !k.v.allowed[n] {
		return keys, fmt.Errorf("jku %q is not in registry.cardKeyURLs, so it is not followed", truncate(jku, 200))
	}
	set, err := k.v.jwks(k.ctx, n)
	return append(keys, capability.MatchKeys(set, kid)...), err
}

// jwks returns the key set at the allowed URL u, fetching it when it is
// not cached or is due again. A failed fetch returns the last good set, if
// any, with the error.
func (v *cardVerifier) jwks(ctx context.Context, u string) (jwk.Set, error) {
	now := v.cfg.Now()
	v.mu.Lock()
	e := v.sets[u]
	v.mu.Unlock()
	if e != nil && now.Before(e.next) {
		return e.set, e.err
	}
	res, _, _ := v.group.Do(u, func() (any, error) {
		set, err := v.fetch(ctx, u)
		next := &jwksEntry{set: set, next: v.cfg.Now().Add(jwksTTL)}
		if err != nil {
			next.err, next.next = err, v.cfg.Now().Add(jwksRetryAfter)
			if e != nil {
				next.set = e.set
			}
			v.log.Warn("card key set fetch failed", "url", u, "error", err, "keptLastGood", next.set != nil)
		}
		v.mu.Lock()
		v.sets[u] = next
		v.mu.Unlock()
		return next, nil
	})
	ne := res.(*jwksEntry)
	return ne.set, ne.err
}

// fetch GETs a JWKS within Config.Timeout and maxKeyBytes.
func (v *cardVerifier) fetch(ctx context.Context, u string) (jwk.Set, error) {
	ctx, cancel := context.WithTimeout(ctx, v.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("fetch card keys %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	req.Header.Set("User-Agent", v.cfg.UserAgent)
	resp, err := v.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch card keys %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("fetch card keys %s: server answered HTTP %d", u, resp.StatusCode)
	}
	if resp.ContentLength > maxKeyBytes {
		return nil, fmt.Errorf("fetch card keys %s: Content-Length %d is over %d bytes", u, resp.ContentLength, maxKeyBytes)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxKeyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch card keys %s: read body: %w", u, err)
	}
	if len(b) > maxKeyBytes {
		return nil, fmt.Errorf("fetch card keys %s: body is over %d bytes", u, maxKeyBytes)
	}
	set, err := parseKeys(b)
	if err != nil {
		return nil, fmt.Errorf("fetch card keys %s: %w", u, err)
	}
	return set, nil
}

// truncate bounds a string taken from a card before it goes into an error.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// signature verifies the card of e for an agent pinning keyPaths. raw is
// kept only for cards that may be signed, so an entry without it is
// unsigned. keyErr reports pinned keys that could not be loaded; the
// signature is still checked with the other keys.
func (r *Registry) signature(ctx context.Context, keyPaths []string, e *entry) (sig capability.Signature, keyErr error) {
	pinned, keyErr := loadCardKeys(keyPaths)
	if keyErr != nil {
		keyErr = fmt.Errorf("%w: %w", ErrCardKeys, keyErr)
	}
	if e == nil || e.raw == nil || !capability.CardSigned(e.raw) {
		return capability.Signature{}, keyErr
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	sig = capability.VerifyCardSignatures(e.raw, agentKeys{ctx: ctx, v: r.sigs, pinned: pinned})
	if keyErr != nil && !sig.Verified {
		sig.Error = strings.TrimPrefix(sig.Error+"; "+keyErr.Error(), "; ")
	}
	return sig, keyErr
}

// required returns an error wrapping ErrSignature when
// Config.RequireSignatures refuses sig.
func (r *Registry) required(sig capability.Signature) error {
	switch {
	case !r.cfg.RequireSignatures || sig.Verified:
		return nil
	case !sig.Present && sig.Error == "":
		return fmt.Errorf("%w: the card is not signed and registry.requireSignatures is on", ErrSignature)
	}
	return fmt.Errorf("%w: %s", ErrSignature, sig.Error)
}

// signedEntry verifies a freshly fetched card for spec and returns e
// carrying the result, for prepare. It fails when spec's pinned keys cannot
// be loaded or Config.RequireSignatures refuses the card.
func (r *Registry) signedEntry(ctx context.Context, spec Spec, base string, e *entry) (*entry, error) {
	sig, keyErr := r.signature(ctx, spec.CardKeys, e)
	if keyErr != nil {
		return nil, fmt.Errorf("add agent %s: %w", base, keyErr)
	}
	if err := r.required(sig); err != nil {
		return nil, fmt.Errorf("add agent %s: %w", base, err)
	}
	cp := *e
	cp.sig = sig
	return &cp, nil
}

// refreshSignature verifies the card a refresh of agent id fetched. The
// error wraps ErrSignature when Config.RequireSignatures refuses it: the
// refresh then fails and the agent keeps its last good card.
func (r *Registry) refreshSignature(id string, e *entry) (capability.Signature, error) {
	a, ok := r.Get(id)
	if !ok {
		return capability.Signature{}, nil
	}
	sig, _ := r.signature(r.ctx, a.cardKeys, e)
	return sig, r.required(sig)
}

// signatureDrift records in next's drift history, and logs, a card whose
// signature verified before and no longer does (sig), once per reason.
// Callers hold mu.
func (r *Registry) signatureDrift(old, next *Agent, sig capability.Signature, e *entry, now time.Time) {
	if !old.Signature.Verified || sig.Verified {
		if !old.Signature.Verified && sig.Verified {
			r.log.Info("agent card signature verifies", "id", old.ID, "keyId", sig.KeyID, "alg", sig.Algorithm)
		}
		return
	}
	note := "signature no longer verifies: " + sig.Error
	if !sig.Present {
		note = "signature no longer verifies: the card is not signed any more"
	}
	if n := len(old.Drift); n > 0 && old.Drift[n-1].Signature == note {
		return
	}
	r.log.Warn("agent card signature no longer verifies", "id", old.ID, "was", old.Signature.KeyID, "reason", note)
	if len(next.Drift) > len(old.Drift) { // this refresh already recorded capability drift
		next.Drift[len(next.Drift)-1].Signature = note
		return
	}
	next.Drift = append(slices.Clone(old.Drift), DriftRecord{At: now, Drift: capability.Drift{From: old.Digest, To: e.profile.Digest, Signature: note}})
	if over := len(next.Drift) - r.cfg.DriftHistory; over > 0 {
		next.Drift = next.Drift[over:]
	}
}

// adopt gives an agent the store registered before its spec was known
// (Load, then AddOrRetry) its pinned keys, and checks its card with them.
func (r *Registry) adopt(ctx context.Context, a *Agent, spec Spec) *Agent {
	e, _ := r.cache.lru.Peek(a.base)
	sig, keyErr := r.signature(ctx, spec.CardKeys, e)
	if keyErr != nil {
		r.log.Error("agent card keys cannot be loaded", "id", a.ID, "error", keyErr)
	}
	if err := r.required(sig); err != nil {
		r.log.Error("stored agent card refused by registry.requireSignatures; it stays registered until its next refresh", "id", a.ID, "error", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.byID[a.ID]
	if !ok || cur.base != a.base {
		return a
	}
	next := *cur
	next.Signature, next.cardKeys = sig, spec.CardKeys
	r.replace(cur, &next)
	return &next
}
