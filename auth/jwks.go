package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lestrrat-go/httprc/v3"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"golang.org/x/sync/singleflight"
)

// Bounds of what is fetched from the issuer.
const (
	// fetchTimeout bounds one discovery or JWKS request when the HTTP
	// client has no timeout of its own.
	fetchTimeout = 10 * time.Second
	// maxDiscoverySize bounds the OIDC discovery document.
	maxDiscoverySize = 256 << 10
	// maxJWKSSize bounds the JWKS document.
	maxJWKSSize = 1 << 20
	// maxSetupBackoff bounds the wait between discovery attempts.
	maxSetupBackoff = time.Minute
)

// errRefetchTooSoon is returned by a refetch inside RefetchInterval of the
// previous one.
var errRefetchTooSoon = errors.New("key set was fetched moments ago")

// keySource keeps the issuer's verification keys: it finds the JWKS URL (by
// OIDC discovery when not configured), registers it with a jwk.Cache that
// refreshes it every RefreshInterval, and refetches on demand, at most once
// per RefetchInterval, when a token names a key it does not know.
type keySource struct {
	cfg    JWTConfig
	client *http.Client
	log    *slog.Logger

	cache  *jwk.Cache      // set by start
	runCtx context.Context // start's context: refetches outlive requests
	res    atomic.Pointer[httprc.ResourceBase[jwk.Set]]
	snap   atomic.Pointer[keySnapshot]
	gen    atomic.Uint64
	snapMu sync.Mutex // serialises snapshot builds

	fetchErr chan error // the cache's fetch errors, for setup's wait

	sf          singleflight.Group
	refetchMu   sync.Mutex
	lastRefetch time.Time // real time of the last on-demand refetch
}

// keySnapshot is the usable keys of one fetched key set.
type keySnapshot struct {
	set   jwk.Set
	gen   uint64 // changes whenever the set does
	byKid map[string][]*verifyKey
	all   []*verifyKey
}

// verifyKey is one public key of the issuer, ready to verify with.
type verifyKey struct {
	kid string
	alg string // the JWK's "alg"; "" when it has none
	pub any    // *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
}

// start creates the cache and sets the source up, retrying in the
// background (owned by wg) when the issuer cannot be reached yet.
func (ks *keySource) start(ctx context.Context, wg *sync.WaitGroup) error {
	ks.fetchErr = make(chan error, 1)
	cache, err := jwk.NewCache(ctx, httprc.NewClient(
		httprc.WithHTTPClient(ks.client),
		httprc.WithWorkers(2),
		httprc.WithErrorSink(fetchErrors{ks})))
	if err != nil {
		return fmt.Errorf("jwt: start key cache: %w", err)
	}
	ks.cache = cache
	ks.runCtx = ctx
	if err := ks.setup(ctx); err != nil {
		ks.log.Error("jwt: cannot get the issuer's signing keys yet; retrying in the background, and JWTs are refused until then",
			"issuer", ks.cfg.Issuer, "error", err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ks.retrySetup(ctx)
		}()
	}
	return nil
}

// stop shuts the cache down, waiting at most until ctx ends.
func (ks *keySource) stop(ctx context.Context) error {
	if ks.cache == nil {
		return nil
	}
	return ks.cache.Shutdown(ctx)
}

// retrySetup calls setup with a growing delay until it succeeds or ctx ends.
func (ks *keySource) retrySetup(ctx context.Context) {
	delay := time.Second
	t := time.NewTimer(delay)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := ks.setup(ctx)
		if err == nil {
			ks.log.Info("jwt: got the issuer's signing keys", "issuer", ks.cfg.Issuer)
			return
		}
		if ctx.Err() != nil {
			return
		}
		ks.log.Warn("jwt: still cannot get the issuer's signing keys", "issuer", ks.cfg.Issuer, "error", err, "retryIn", delay.String())
		delay = min(2*delay, maxSetupBackoff)
		t.Reset(delay)
	}
}

// setup finds the JWKS URL, registers it with the cache and waits (bounded)
// for the first fetch. A registered set that has not been fetched yet is
// not an error: the cache retries, and tokens trigger refetches.
func (ks *keySource) setup(ctx context.Context) error {
	if ks.res.Load() != nil {
		return nil
	}
	u := ks.cfg.JWKSURL
	if u == "" {
		var err error
		if u, err = discover(ctx, ks.client, ks.cfg.Issuer); err != nil {
			return err
		}
	}
	err := ks.cache.Register(ctx, u,
		jwk.WithHTTPClient(ks.client),
		jwk.WithMaxFetchBodySize(maxJWKSSize),
		jwk.WithConstantInterval(ks.cfg.RefreshInterval),
		jwk.WithMinInterval(min(ks.cfg.RefreshInterval, time.Minute)),
		jwk.WithWaitReady(false))
	if err != nil {
		return fmt.Errorf("register key set %s: %w", u, err)
	}
	r, err := ks.cache.LookupResource(ctx, u)
	if err != nil {
		return fmt.Errorf("look up key set %s: %w", u, err)
	}
	ks.res.Store(r)
	// Wait for the first fetch to succeed or fail, bounded.
	wctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	ready := make(chan struct{})
	go func() {
		defer close(ready)
		_ = r.Ready(wctx)
	}()
	select {
	case <-ready:
	case <-ks.fetchErr: //nolint:errcheck // the sink logged it; a lookup says what is missing
	}
	cancel()
	<-ready
	return nil
}

// fetchErrors is the cache's error sink: it logs each failed fetch of the
// key set (the previous set stays in use) and wakes setup's wait.
type fetchErrors struct{ ks *keySource }

// Put logs err and hands it to setup if it is waiting.
func (s fetchErrors) Put(_ context.Context, err error) {
	s.ks.log.Warn("jwt: fetching the issuer's key set failed; the previous keys, if any, stay in use", "issuer", s.ks.cfg.Issuer, "error", err)
	select {
	case s.ks.fetchErr <- err:
	default:
	}
}

// current returns the keys of the latest fetched set, or nil when no set has
// been fetched yet.
func (ks *keySource) current() *keySnapshot {
	r := ks.res.Load()
	if r == nil {
		return nil
	}
	set := r.Resource()
	if set == nil {
		return nil
	}
	if s := ks.snap.Load(); s != nil && s.set == set {
		return s
	}
	ks.snapMu.Lock()
	defer ks.snapMu.Unlock()
	if s := ks.snap.Load(); s != nil && s.set == set {
		return s
	}
	s := ks.build(set)
	ks.snap.Store(s)
	return s
}

// build indexes a fetched set's usable signature keys by kid. Symmetric
// keys, keys for encryption and keys of unsupported types are left out.
func (ks *keySource) build(set jwk.Set) *keySnapshot {
	s := &keySnapshot{set: set, gen: ks.gen.Add(1), byKid: make(map[string][]*verifyKey)}
	for i := range set.Len() {
		key, ok := set.Key(i)
		if !ok {
			continue
		}
		kid, _ := key.KeyID()
		if use, ok := key.KeyUsage(); ok && use != "" && use != jwk.ForSignature.String() {
			continue
		}
		if key.KeyType() == jwa.OctetSeq() {
			ks.log.Warn("jwt: the issuer's key set holds a symmetric key; it is never used", "kid", kid)
			continue
		}
		pk, err := jwk.PublicKeyOf(key)
		if err != nil {
			continue
		}
		var raw any
		if err := jwk.Export(pk, &raw); err != nil {
			continue
		}
		switch raw.(type) {
		case *rsa.PublicKey, *ecdsa.PublicKey, ed25519.PublicKey:
		default:
			continue
		}
		vk := &verifyKey{kid: kid, pub: raw}
		if a, ok := key.Algorithm(); ok {
			vk.alg = a.String()
		}
		s.all = append(s.all, vk)
		s.byKid[kid] = append(s.byKid[kid], vk)
	}
	return s
}

// refetch fetches the key set again now, unless it was refetched within
// RefetchInterval. Concurrent callers share one fetch, made in the first
// caller's goroutine and bounded by fetchTimeout. It reports whether a fetch
// succeeded.
func (ks *keySource) refetch() bool {
	r := ks.res.Load()
	if r == nil || ks.runCtx == nil {
		return false
	}
	_, err, _ := ks.sf.Do("jwks", func() (any, error) {
		ks.refetchMu.Lock()
		if !ks.lastRefetch.IsZero() && time.Since(ks.lastRefetch) < ks.cfg.RefetchInterval {
			ks.refetchMu.Unlock()
			return nil, errRefetchTooSoon
		}
		ks.lastRefetch = time.Now()
		ks.refetchMu.Unlock()
		ctx, cancel := context.WithTimeout(ks.runCtx, fetchTimeout)
		defer cancel()
		if _, err := ks.cache.Refresh(ctx, r.URL()); err != nil {
			ks.log.Warn("jwt: refetching the issuer's key set failed", "url", r.URL(), "error", err)
			return nil, err
		}
		return nil, nil
	})
	return err == nil
}

// discover reads the issuer's OIDC discovery document and returns its
// jwks_uri, after checking that the document names the same issuer.
func discover(ctx context.Context, client *http.Client, issuer string) (string, error) {
	u := strings.TrimSuffix(issuer, "/") + "/.well-known/openid-configuration"
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", fmt.Errorf("discover %s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("discover %s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("discover %s: status %s", u, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDiscoverySize+1))
	if err != nil {
		return "", fmt.Errorf("discover %s: %w", u, err)
	}
	if len(body) > maxDiscoverySize {
		return "", fmt.Errorf("discover %s: document larger than %d bytes", u, maxDiscoverySize)
	}
	var doc struct {
		Issuer  string `json:"issuer"`
		JWKSURI string `json:"jwks_uri"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("discover %s: %w", u, err)
	}
	if doc.Issuer != issuer {
		return "", fmt.Errorf("discover %s: the document's issuer %s is not %s", u, quote(doc.Issuer), quote(issuer))
	}
	if doc.JWKSURI == "" {
		return "", fmt.Errorf("discover %s: the document has no jwks_uri", u)
	}
	if err := checkFetchURL(doc.JWKSURI); err != nil {
		return "", fmt.Errorf("discover %s: jwks_uri: %w", u, err)
	}
	return doc.JWKSURI, nil
}
