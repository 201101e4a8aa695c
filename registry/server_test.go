package registry

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/orchd/orchd/internal/testclock"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// cardServer is a real HTTP server on 127.0.0.1 serving one agent card with
// headers, status and latency the test controls. It answers conditional
// requests with 304 when the validators match.
type cardServer struct {
	*httptest.Server
	mu           sync.Mutex
	card         string
	status       int
	cacheControl string
	lastModified string
	noETag       bool
	legacyOnly   bool
	delay        time.Duration
	requests     atomic.Int32
	conditional  atomic.Int32
}

func newCardServer(t *testing.T, card string) *cardServer {
	t.Helper()
	s := &cardServer{card: card, status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *cardServer) set(fn func(s *cardServer)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fn(s)
}

func (s *cardServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	card, status, cc, lm, noETag, legacyOnly, delay := s.card, s.status, s.cacheControl, s.lastModified, s.noETag, s.legacyOnly, s.delay
	s.mu.Unlock()
	wantPath := WellKnownPath
	if legacyOnly {
		wantPath = LegacyWellKnownPath
	}
	if r.URL.Path != wantPath {
		http.NotFound(w, r)
		return
	}
	s.requests.Add(1)
	if delay > 0 {
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
	}
	if status != http.StatusOK {
		http.Error(w, "unavailable", status)
		return
	}
	sum := sha256.Sum256([]byte(card))
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	if cc != "" {
		w.Header().Set("Cache-Control", cc)
	}
	if !noETag {
		w.Header().Set("ETag", etag)
	}
	if lm != "" {
		w.Header().Set("Last-Modified", lm)
	}
	inm, ims := r.Header.Get("If-None-Match"), r.Header.Get("If-Modified-Since")
	if inm != "" || ims != "" {
		s.conditional.Add(1)
	}
	if (!noETag && inm == etag) || (inm == "" && lm != "" && ims == lm) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, card)
}

// card returns a minimal 1.0 card.
func card(name, capabilities string) string {
	return fmt.Sprintf(`{"name":%q,"version":"1.0.0","description":"test agent",
		"supportedInterfaces":[{"url":"http://127.0.0.1/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],
		"capabilities":{%s},
		"skills":[{"id":"research","name":"Research","tags":["search","summarize"]}]}`, name, capabilities)
}

// clock is a settable time source for Config.Now.
type clock = testclock.Clock

func newClock() *clock { return testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) }

// testLogger logs to stderr only with -v, keeping test output readable.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

// newTestRegistry returns a registry allowed to reach loopback, closed at
// the end of the test.
func newTestRegistry(t *testing.T, cfg Config) *Registry {
	t.Helper()
	if cfg.AllowNetworks == nil {
		cfg.AllowNetworks = []string{"127.0.0.0/8"}
	}
	r, err := New(cfg, testLogger())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	return r
}
