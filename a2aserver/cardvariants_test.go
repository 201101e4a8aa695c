package a2aserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/registry"
)

// signingKey is a new P-256 private key, as LoadSigningKey reads one from
// a PKCS #8 PEM file.
func signingKey(t *testing.T) jwk.Key {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "card.key")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := LoadSigningKey(path, "")
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// noAgents is a registry with no agent.
type noAgents struct{}

func (noAgents) List() []*registry.Agent { return nil }
func (noAgents) Generation() uint64      { return 1 }

// TestCard_RebuildKeepsUnchangedCard checks that a rebuild whose content
// is the same (a registry change that adds no skill) keeps the bytes, the
// ETags and Last-Modified, even with a signing key whose signatures differ
// on every signing, and that a change moves them.
func TestCard_RebuildKeepsUnchangedCard(t *testing.T) {
	t.Parallel()
	s := &Server{cfg: Config{Name: "orchd", Signer: signingKey(t)}, agents: noAgents{},
		gate: httpgate.NewGate(httpgate.AuthConfig{}, nil, nil)}
	if err := s.SetCard(t.Context(), "http://127.0.0.1:8080"); err != nil {
		t.Fatal(err)
	}
	first := s.card.Load()
	s.cardMu.Lock()
	err := s.buildCard(t.Context(), first.base, first.gen+1)
	s.cardMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	same := s.card.Load()
	if same.gen != first.gen+1 {
		t.Errorf("unchanged rebuild: generation %d, want %d", same.gen, first.gen+1)
	}
	// served is what a caller sees of a built card.
	type served struct {
		JSON, V1JSON string
		ETag         string
		Modified     time.Time
	}
	servedOf := func(c *servedCard) served { return served{string(c.json), string(c.v1.json), c.etag, c.modified} }
	if diff := cmp.Diff(servedOf(first), servedOf(same)); diff != "" {
		t.Errorf("unchanged rebuild changed the served card (-want +got):\n%s", diff)
	}
	// Last-Modified has a resolution of a second: date the card an hour
	// back rather than wait for the clock.
	past := *same
	past.modified = same.modified.Add(-time.Hour)
	s.card.Store(&past)
	s.cardMu.Lock()
	s.cfg.Description += " (changed)"
	err = s.buildCard(t.Context(), first.base, first.gen+2)
	s.cardMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	changed := s.card.Load()
	if changed.etag == first.etag || changed.v1.etag == first.v1.etag {
		t.Errorf("changed card kept ETag %q / %q", changed.etag, changed.v1.etag)
	}
	if !changed.modified.After(past.modified) {
		t.Errorf("changed card kept Last-Modified %s, want after %s", changed.modified, past.modified)
	}
}

// TestCard_VariantPerVersionAndPath checks which variant each
// A2A-Version gets at the well-known path and at the 0.2-era path: a 1.x
// version the 1.0 card and a 0.x one the dual card at both; no version, or
// one that is neither, the path's default.
func TestCard_VariantPerVersionAndPath(t *testing.T) {
	t.Parallel()
	c := &servedCard{json: []byte(`{"dual":true}`), etag: `"dual"`, v1: cardVariant{json: []byte(`{}`), etag: `"v1"`}}
	for _, tc := range []struct {
		header, query string
		wellKnown     string // the variant's ETag at /.well-known/agent-card.json
		legacy        string // at /.well-known/agent.json
	}{
		{"", "", `"v1"`, `"dual"`},
		{"  ", "", `"v1"`, `"dual"`},
		{"1.0", "", `"v1"`, `"v1"`},
		{"1", "", `"v1"`, `"v1"`},
		{" 1.2 ", "", `"v1"`, `"v1"`},
		{"0.3", "", `"dual"`, `"dual"`},
		{"0.3.0", "", `"dual"`, `"dual"`},
		{"0.2", "", `"dual"`, `"dual"`},
		{"2.0", "", `"v1"`, `"dual"`},
		{"banana", "", `"v1"`, `"dual"`},
		{"", "0.3", `"dual"`, `"dual"`},
		{"", "1.0", `"v1"`, `"v1"`},
		{"1.0", "0.3", `"v1"`, `"v1"`}, // the header decides
	} {
		target := "/.well-known/agent-card.json"
		if tc.query != "" {
			target += "?A2A-Version=" + tc.query
		}
		r := httptest.NewRequest("GET", target, nil)
		if tc.header != "" {
			r.Header.Set("A2A-Version", tc.header)
		}
		if got := c.variant(r, false).etag; got != tc.wellKnown {
			t.Errorf("A2A-Version %q, query %q, well-known path: %s, want %s", tc.header, tc.query, got, tc.wellKnown)
		}
		if got := c.variant(r, true).etag; got != tc.legacy {
			t.Errorf("A2A-Version %q, query %q, agent.json: %s, want %s", tc.header, tc.query, got, tc.legacy)
		}
	}
}

// FuzzCardConditionalHeaders feeds the card's request headers to the
// variant choice, at both paths, and the conditional check: neither
// panics, the choice is one of the two variants, a matching ETag is always
// fresh, and If-None-Match decides alone when present.
func FuzzCardConditionalHeaders(f *testing.F) {
	f.Add("1.0", `"abc"`, "")
	f.Add("", `W/"abc", "def"`, "Mon, 02 Jan 2006 15:04:05 GMT")
	f.Add("0.3", "", "Mon, 02 Jan 2006 15:04:05 GMT")
	f.Add("1.x", "*", "garbage")
	c := &servedCard{json: []byte(`{}`), etag: `"abc"`, v1: cardVariant{json: []byte(`{"v":1}`), etag: `"def"`},
		modified: time.Date(2006, 1, 2, 15, 4, 5, 0, time.UTC)}
	f.Fuzz(func(t *testing.T, version, inm, ims string) {
		for _, legacy := range []bool{false, true} {
			r := httptest.NewRequest("GET", "/.well-known/agent-card.json", nil)
			r.Header.Set("A2A-Version", version)
			r.Header.Set("If-None-Match", inm)
			r.Header.Set("If-Modified-Since", ims)
			v := c.variant(r, legacy)
			if v.etag != c.etag && v.etag != c.v1.etag {
				t.Fatalf("variant %q is neither", v.etag)
			}
			got := notModified(r, v.etag, c.modified)
			if strings.TrimSpace(inm) != "" {
				r.Header.Del("If-Modified-Since")
				if alone := notModified(r, v.etag, c.modified); alone != got {
					t.Fatalf("If-None-Match %q: %v with If-Modified-Since %q, %v without", inm, got, ims, alone)
				}
			}
			r.Header.Set("If-None-Match", inm+", "+v.etag)
			if !notModified(r, v.etag, c.modified) {
				t.Fatalf("If-None-Match %q naming the ETag is not fresh", inm+", "+v.etag)
			}
		}
	})
}
