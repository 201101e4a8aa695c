package registry

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orchd/orchd/internal/testwait"
)

// TestCache_Freshness walks one card through the RFC 9111 life cycle on a
// settable clock: fresh hits, expiry, conditional revalidation and 304.
func TestCache_Freshness(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		cacheControl string
		lastModified string
		noETag       bool
		// after the first fetch, the clock moves by advance and the card
		// is inspected again.
		advance time.Duration
		// want: total requests, conditional requests, and the expiry
		// relative to the first fetch.
		requests, conditional int32
		expires               time.Duration
	}{
		{name: "fresh max-age", cacheControl: "max-age=60", advance: 59 * time.Second, requests: 1, expires: 60 * time.Second},
		{name: "default ttl", advance: 4 * time.Minute, requests: 1, expires: 5 * time.Minute},
		{name: "expired etag revalidates to 304", cacheControl: "max-age=60, must-revalidate", advance: 61 * time.Second, requests: 2, conditional: 1, expires: 121 * time.Second},
		{name: "last-modified revalidates", cacheControl: "max-age=60, must-revalidate", lastModified: "Wed, 01 Jan 2025 00:00:00 GMT", noETag: true, advance: 61 * time.Second, requests: 2, conditional: 1, expires: 121 * time.Second},
		{name: "no-cache always revalidates", cacheControl: "no-cache", advance: time.Second, requests: 2, conditional: 1, expires: time.Second},
		{name: "no-store is never reused", cacheControl: "no-store", advance: time.Second, requests: 2, conditional: 0, expires: time.Second + 5*time.Minute},
		{name: "s-maxage wins over max-age", cacheControl: "max-age=10, s-maxage=100", advance: 50 * time.Second, requests: 1, expires: 100 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newCardServer(t, card("Cached", ""))
			s.set(func(s *cardServer) {
				s.cacheControl, s.lastModified, s.noETag = tt.cacheControl, tt.lastModified, tt.noETag
			})
			clk := newClock()
			start := clk.Now()
			r := newTestRegistry(t, Config{Now: clk.Now})
			a1, err := r.Inspect(t.Context(), s.URL)
			if err != nil {
				t.Fatal(err)
			}
			clk.Advance(tt.advance)
			a2, err := r.Inspect(t.Context(), s.URL)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.requests.Load(); got != tt.requests {
				t.Errorf("requests = %d, want %d", got, tt.requests)
			}
			if got := s.conditional.Load(); got != tt.conditional {
				t.Errorf("conditional requests = %d, want %d", got, tt.conditional)
			}
			if got := a2.ExpiresAt.Sub(start); got != tt.expires {
				t.Errorf("expires after %s, want %s", got, tt.expires)
			}
			if a1.Digest != a2.Digest || a2.Profile == nil {
				t.Error("the card changed across a revalidation")
			}
		})
	}
}

func TestCache_AgeHeaderShortensFreshness(t *testing.T) {
	t.Parallel()
	p := parseCachePolicy(http.Header{"Cache-Control": {"max-age=100"}, "Age": {"30"}}, time.Now())
	e := &entry{policy: p}
	now := time.Now()
	e.applyPolicy(Config{}.withDefaults(), now)
	if got := e.freshUntil.Sub(now); got != 70*time.Second {
		t.Errorf("fresh for %s, want 70s", got)
	}
	exp := parseCachePolicy(http.Header{"Expires": {"0"}}, now)
	if !exp.hasLifetime || exp.lifetime != 0 {
		t.Errorf("Expires: 0 must mean already expired, got %+v", exp)
	}
}

func TestCache_StaleWhileRevalidate(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("SWR", ""))
	s.set(func(s *cardServer) { s.cacheControl = "max-age=10, stale-while-revalidate=60" })
	clk := newClock()
	r := newTestRegistry(t, Config{Now: clk.Now})
	if _, err := r.Inspect(t.Context(), s.URL); err != nil {
		t.Fatal(err)
	}
	// The server is now slow: a stale lookup must not wait for it.
	s.set(func(s *cardServer) { s.delay = 300 * time.Millisecond; s.card = card("SWR", `"streaming":true`) })
	clk.Advance(30 * time.Second)
	begin := time.Now()
	a, err := r.Inspect(t.Context(), s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if waited := time.Since(begin); waited > 200*time.Millisecond {
		t.Errorf("stale lookup waited %s for the network", waited)
	}
	if a.Supports("streaming") {
		t.Error("stale lookup returned the new card before revalidation")
	}
	testwait.Until(t, 10*time.Second, "the background revalidation", func() bool {
		a, err := r.Inspect(t.Context(), s.URL)
		return err == nil && a.Supports("streaming")
	})
}

func TestCache_StaleIfErrorAndNegativeCaching(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("SIE", ""))
	s.set(func(s *cardServer) { s.cacheControl = "max-age=10, stale-while-revalidate=0, stale-if-error=600" })
	clk := newClock()
	r := newTestRegistry(t, Config{Now: clk.Now, MinBackoff: 10 * time.Second})
	if _, err := r.Inspect(t.Context(), s.URL); err != nil {
		t.Fatal(err)
	}
	s.set(func(s *cardServer) { s.status = http.StatusBadGateway })
	clk.Advance(time.Minute)
	a, err := r.Inspect(t.Context(), s.URL)
	if err != nil {
		t.Fatalf("stale-if-error: %v", err)
	}
	if a.Profile == nil {
		t.Fatal("stale-if-error: the stale card's profile is gone")
	}
	if a.Failures != 1 || !strings.Contains(a.LastError, "502") {
		t.Fatalf("stale-if-error: %d failures, last %q; want 1, the 502", a.Failures, a.LastError)
	}
	// Within the backoff the stale card is served without a new request.
	n := s.requests.Load()
	if _, err := r.Inspect(t.Context(), s.URL); err != nil || s.requests.Load() != n {
		t.Errorf("backoff: err %v, requests %d -> %d", err, n, s.requests.Load())
	}
	// Past stale-if-error the failure surfaces.
	clk.Advance(time.Hour)
	if _, err := r.Inspect(t.Context(), s.URL); err == nil {
		t.Error("card served past its stale-if-error window")
	}
	// and, within the new backoff, is remembered without a request.
	n = s.requests.Load()
	if _, err := r.Inspect(t.Context(), s.URL); err == nil || !strings.Contains(err.Error(), "remembered failure") || s.requests.Load() != n {
		t.Errorf("past the windows, in backoff: err %v, requests %d -> %d", err, n, s.requests.Load())
	}

	// A URL that never worked is remembered as failing until its backoff ends.
	down := newCardServer(t, "")
	down.set(func(s *cardServer) { s.status = http.StatusServiceUnavailable })
	if _, err := r.Inspect(t.Context(), down.URL); err == nil {
		t.Fatal("Inspect of a failing card succeeded")
	}
	_, err = r.Inspect(t.Context(), down.URL)
	if err == nil || !strings.Contains(err.Error(), "remembered failure") || down.requests.Load() != 1 {
		t.Errorf("negative cache: err %v, requests %d", err, down.requests.Load())
	}
	clk.Advance(11 * time.Second)
	if _, err := r.Inspect(t.Context(), down.URL); err == nil || down.requests.Load() != 2 {
		t.Errorf("after backoff: err %v, requests %d (want a new attempt)", err, down.requests.Load())
	}
}

func TestCache_OneRequestPerURL(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("Popular", ""))
	s.set(func(s *cardServer) { s.delay = 100 * time.Millisecond })
	r := newTestRegistry(t, Config{})
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for range 50 {
		wg.Go(func() {
			_, err := r.Inspect(t.Context(), s.URL)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := s.requests.Load(); got != 1 {
		t.Errorf("50 concurrent lookups made %d requests, want 1", got)
	}
}

func TestCache_EvictionIsBounded(t *testing.T) {
	t.Parallel()
	r := newTestRegistry(t, Config{MaxEntries: 2})
	var servers []*cardServer
	for range 3 {
		s := newCardServer(t, card("E", ""))
		servers = append(servers, s)
		if _, err := r.Inspect(t.Context(), s.URL); err != nil {
			t.Fatal(err)
		}
	}
	if n := r.cache.lru.Len(); n != 2 {
		t.Errorf("cache holds %d entries, want 2", n)
	}
	if _, err := r.Inspect(t.Context(), servers[0].URL); err != nil || servers[0].requests.Load() != 2 {
		t.Errorf("evicted entry was not fetched again: err %v, requests %d", err, servers[0].requests.Load())
	}
}

func TestCache_CallerCancelDoesNotFailOthers(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("Slow", ""))
	s.set(func(s *cardServer) { s.delay = 200 * time.Millisecond })
	r := newTestRegistry(t, Config{})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := r.Inspect(t.Context(), s.URL); done <- err }()
	if _, err := r.Inspect(ctx, s.URL); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("impatient caller: err = %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("patient caller sharing the request failed: %v", err)
	}
}

// TestInspect_UnhealthySaysWhy checks that an inspected card served stale
// after failed revalidations says why it is unhealthy, as a registered
// agent does.
func TestInspect_UnhealthySaysWhy(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("SIE", ""))
	s.set(func(s *cardServer) { s.cacheControl = "max-age=10, stale-while-revalidate=0, stale-if-error=600" })
	clk := newClock()
	r := newTestRegistry(t, Config{Now: clk.Now, UnhealthyAfter: 1})
	if _, err := r.Inspect(t.Context(), s.URL); err != nil {
		t.Fatal(err)
	}
	s.set(func(s *cardServer) { s.status = http.StatusBadGateway })
	clk.Advance(time.Minute)
	a, err := r.Inspect(t.Context(), s.URL)
	if err != nil {
		t.Fatalf("stale card after a failed revalidation: %v", err)
	}
	if why := a.UnhealthyReason; a.Healthy || !strings.HasPrefix(why, "1 card refreshes failed in a row, last: ") || !strings.Contains(why, "502") {
		t.Errorf("stale card after a failed revalidation: healthy %v, reason %q; want unhealthy for the 502", a.Healthy, why)
	}
}
