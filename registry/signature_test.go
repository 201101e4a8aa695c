package registry

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/gowebpki/jcs"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/orchd/orchd/capability"
)

// sigKey is a signing key made for a test, with its public half written to
// a PEM file and a JWKS file.
type sigKey struct {
	private, public jwk.Key
	alg             jwa.SignatureAlgorithm
	pemFile         string
	jwksFile        string
	jwks            []byte
}

func newSigKey(t *testing.T, alg, kid string) sigKey {
	t.Helper()
	var priv, pub any
	var a jwa.SignatureAlgorithm
	switch alg {
	case "RS256":
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		priv, pub, a = k, &k.PublicKey, jwa.RS256()
	case "ES256":
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		priv, pub, a = k, &k.PublicKey, jwa.ES256()
	}
	sk, err := jwk.Import(priv)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := jwk.Import(pub)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []jwk.Key{sk, pk} {
		if err := k.Set(jwk.KeyIDKey, kid); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	s := sigKey{private: sk, public: pk, alg: a, pemFile: filepath.Join(dir, kid+".pem"), jwksFile: filepath.Join(dir, kid+".jwks.json")}
	if err := os.WriteFile(s.pemFile, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	set := jwk.NewSet()
	_ = set.AddKey(pk)
	if s.jwks, err = json.Marshal(set); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.jwksFile, s.jwks, 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// signed returns raw signed with k.
func (k sigKey) signed(t *testing.T, raw string) string {
	t.Helper()
	out, err := capability.SignCard([]byte(raw), k.private)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// signedWithHeader signs an unsigned card by hand, with the protected
// header h (alg and kid are added).
func (k sigKey) signedWithHeader(t *testing.T, raw string, h map[string]any) string {
	t.Helper()
	payload, err := jcs.Transform([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	hdr := jws.NewHeaders()
	for name, v := range h {
		if err := hdr.Set(name, v); err != nil {
			t.Fatal(err)
		}
	}
	kid, _ := k.private.KeyID()
	_ = hdr.Set(jws.KeyIDKey, kid)
	compact, err := jws.Sign(nil, jws.WithKey(k.alg, k.private, jws.WithProtectedHeaders(hdr)), jws.WithDetachedPayload(payload))
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(string(compact), ".")
	return withSigs(t, raw, map[string]any{"protected": parts[0], "signature": parts[2]})
}

// withSigs sets a card's signatures.
func withSigs(t *testing.T, raw string, sigs ...map[string]any) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(raw), &doc); err != nil {
		t.Fatal(err)
	}
	list := make([]any, 0, len(sigs))
	for _, s := range sigs {
		list = append(list, s)
	}
	doc["signatures"] = list
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// tampered changes a signed card's version, keeping its signatures.
func tampered(t *testing.T, signed string) string {
	t.Helper()
	out := strings.Replace(signed, `"version":"1.0.0"`, `"version":"6.6.6"`, 1)
	if out == signed {
		t.Fatal("nothing to tamper with")
	}
	return out
}

// jwksServer serves a JWKS on 127.0.0.1 and counts requests.
type jwksServer struct {
	*httptest.Server
	hits atomic.Int32
}

func newJWKSServer(t *testing.T, body []byte) *jwksServer {
	t.Helper()
	s := &jwksServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	return s
}

func TestRegistry_Add_cardSignatures(t *testing.T) {
	t.Parallel()
	rsaKey := newSigKey(t, "RS256", "rsa-1")
	ecKey := newSigKey(t, "ES256", "ec-1")
	forger := newSigKey(t, "ES256", "ec-1")
	stranger := newSigKey(t, "RS256", "stranger")
	unsigned := card("Signed Agent", `"streaming":true`)
	none := withSigs(t, unsigned, map[string]any{
		"protected": base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"ec-1"}`)), "signature": ""})

	tests := []struct {
		name     string
		card     string
		keys     []string
		require  bool
		verified bool
		keyID    string
		reason   string // in Signature.Error, or in the error when require refuses
	}{
		{name: "RS256 with a pinned PEM key", card: rsaKey.signed(t, unsigned), keys: []string{rsaKey.pemFile}, verified: true, keyID: "rsa-1"},
		{name: "ES256 with a pinned JWKS", card: ecKey.signed(t, unsigned), keys: []string{ecKey.jwksFile}, verified: true, keyID: "ec-1"},
		{name: "required and verified", card: ecKey.signed(t, unsigned), keys: []string{rsaKey.pemFile, ecKey.jwksFile}, require: true, verified: true, keyID: "ec-1"},
		{name: "changed after signing", card: tampered(t, rsaKey.signed(t, unsigned)), keys: []string{rsaKey.pemFile}, reason: "signature does not match the card"},
		{name: "changed after signing, required", card: tampered(t, rsaKey.signed(t, unsigned)), keys: []string{rsaKey.pemFile}, require: true, reason: "signature does not match the card"},
		{name: "forged under the same kid", card: forger.signed(t, unsigned), keys: []string{ecKey.jwksFile}, reason: `does not match the card (kid "ec-1")`},
		{name: "unknown kid", card: stranger.signed(t, unsigned), keys: []string{ecKey.jwksFile}, reason: `no trusted key for kid "stranger"`},
		{name: "alg none", card: none, keys: []string{ecKey.jwksFile}, require: true, reason: `alg "none" refused`},
		{name: "unsigned, not required", card: unsigned},
		{name: "unsigned, required", card: unsigned, require: true, reason: "the card is not signed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newCardServer(t, tt.card)
			r := newTestRegistry(t, Config{RequireSignatures: tt.require})
			a, err := r.Add(t.Context(), Spec{ID: "signed", URL: s.URL, CardKeys: tt.keys})
			if tt.require && !tt.verified {
				if !errors.Is(err, ErrSignature) || !strings.Contains(err.Error(), tt.reason) {
					t.Fatalf("Add = %v, want ErrSignature with %q", err, tt.reason)
				}
				if r.Len() != 0 {
					t.Fatal("a refused agent was registered")
				}
				if _, err := r.AddOrRetry(t.Context(), Spec{ID: "signed", URL: s.URL, CardKeys: tt.keys}); !errors.Is(err, ErrSignature) || len(r.Pending()) != 0 {
					t.Fatalf("AddOrRetry = %v, pending %v; want a refusal, not a retry", err, r.Pending())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sig := a.Signature
			want := capability.Signature{Present: tt.card != unsigned, Verified: tt.verified, KeyID: tt.keyID}
			if diff := cmp.Diff(want, sig, cmpopts.IgnoreFields(capability.Signature{}, "Algorithm", "Error")); diff != "" {
				t.Fatalf("signature (-want +got):\n%s", diff)
			}
			if !strings.Contains(sig.Error, tt.reason) || (tt.reason == "") != (sig.Error == "") {
				t.Errorf("signature error %q, want %q", sig.Error, tt.reason)
			}
			out, err := json.Marshal(a)
			if err != nil || !strings.Contains(string(out), `"signature":{"present":`) {
				t.Errorf("agent JSON lacks the signature: %s", out)
			}
		})
	}
}

func TestRegistry_Add_cardKeyFiles(t *testing.T) {
	t.Parallel()
	k := newSigKey(t, "ES256", "ec-1")
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	privPEM := func() string {
		var raw ecdsa.PrivateKey
		if err := jwk.Export(k.private, &raw); err != nil {
			t.Fatal(err)
		}
		der, err := x509.MarshalPKCS8PrivateKey(&raw)
		if err != nil {
			t.Fatal(err)
		}
		return write("private.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})))
	}()
	signed := k.signed(t, card("Keys", ""))
	tests := []struct {
		name string
		file string
		want string // "" when the card verifies
	}{
		{"private key stands for its public half", privPEM, ""},
		{"missing file", filepath.Join(dir, "absent.pem"), "no such file"},
		{"symmetric JWK", write("oct.json", `{"kty":"oct","k":"c2VjcmV0LXNlY3JldC1zZWNyZXQ"}`), "symmetric"},
		{"garbage", write("junk.txt", "not a key -----BEGIN"), "neither PEM nor JSON"},
		{"bad PEM", write("bad.pem", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"), "not a PEM public key"},
		{"oversized", write("big.json", `{"keys":[`+strings.Repeat(" ", maxKeyBytes)+`]}`), "over 262144 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newCardServer(t, signed)
			r := newTestRegistry(t, Config{})
			a, err := r.Add(t.Context(), Spec{URL: s.URL, CardKeys: []string{tt.file}})
			if tt.want == "" {
				if err != nil || !a.Signature.Verified {
					t.Fatalf("Add = %v, %+v", err, a)
				}
				return
			}
			if !errors.Is(err, ErrCardKeys) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Add = %v, want ErrCardKeys with %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "c2VjcmV0") {
				t.Fatal("the error quotes the key file")
			}
		})
	}
}

func TestRegistry_Refresh_signatureDrift(t *testing.T) {
	t.Parallel()
	for _, require := range []bool{false, true} {
		t.Run(map[bool]string{false: "recorded", true: "required"}[require], func(t *testing.T) {
			t.Parallel()
			k := newSigKey(t, "RS256", "rsa-1")
			good := k.signed(t, card("Drifting", `"streaming":true`))
			s := newCardServer(t, good)
			clk := newClock()
			r := newTestRegistry(t, Config{Now: clk.Now, RequireSignatures: require, UnhealthyAfter: 2})
			a, err := r.Add(t.Context(), Spec{ID: "d", URL: s.URL, CardKeys: []string{k.pemFile}})
			if err != nil || !a.Signature.Verified {
				t.Fatalf("Add = %v, %+v", err, a)
			}
			clk.Advance(time.Minute)
			s.set(func(s *cardServer) { s.card = tampered(t, good) })
			b, err := r.Refresh(t.Context(), "d")
			if require {
				if !errors.Is(err, ErrSignature) {
					t.Fatalf("Refresh = %v, want ErrSignature", err)
				}
				if b.Digest != a.Digest || !b.Signature.Verified {
					t.Fatalf("the last good card was not kept: digest %s (want %s), signature %+v", b.Digest, a.Digest, b.Signature)
				}
				if b.Failures != 1 {
					t.Fatalf("the refused card counts %d failures, want 1", b.Failures)
				}
			} else {
				if err != nil {
					t.Fatalf("Refresh = %v", err)
				}
				if b.Signature.Verified || b.Digest == a.Digest {
					t.Fatalf("the tampered card was not taken as unverified: digest %s (was %s), signature %+v", b.Digest, a.Digest, b.Signature)
				}
			}
			if len(b.Drift) != 1 || !strings.HasPrefix(b.Drift[0].Signature, "signature no longer verifies: signature does not match") {
				t.Fatalf("drift = %+v", b.Drift)
			}
			if !b.DriftedSince(clk.Now().Add(-time.Second)) {
				t.Error("a lost signature is not drift to DriftedSince")
			}
			clk.Advance(time.Minute)
			c, _ := r.Refresh(t.Context(), "d")
			if len(c.Drift) != 1 {
				t.Errorf("the same loss was recorded again: %+v", c.Drift)
			}
			if require && c.Healthy {
				t.Errorf("two refused refreshes and still healthy: %+v", c)
			}
			// The signer fixes the card: it verifies again.
			clk.Advance(time.Minute)
			s.set(func(s *cardServer) { s.card = good })
			d, err := r.Refresh(t.Context(), "d")
			if err != nil {
				t.Fatalf("Refresh of the fixed card: %v", err)
			}
			if !d.Signature.Verified || !d.Healthy {
				t.Fatalf("fixed card: signature %+v, healthy %v (%s)", d.Signature, d.Healthy, d.UnhealthyReason)
			}
		})
	}
}

func TestRegistry_cardKeyURLs(t *testing.T) {
	t.Parallel()
	k := newSigKey(t, "ES256", "ec-jku")
	jwks := newJWKSServer(t, k.jwks)
	unsigned := card("JKU Agent", "")
	viaJKU := k.signedWithHeader(t, unsigned, map[string]any{jws.JWKSetURLKey: jwks.URL + "/jwks.json", jws.TypeKey: "JOSE"})

	t.Run("allowed", func(t *testing.T) {
		s := newCardServer(t, viaJKU)
		clk := newClock()
		r := newTestRegistry(t, Config{Now: clk.Now, CardKeyURLs: []string{jwks.URL + "/jwks.json"}, RequireSignatures: true})
		a, err := r.Add(t.Context(), Spec{ID: "j", URL: s.URL})
		if err != nil {
			t.Fatal(err)
		}
		if !a.Signature.Verified || a.Signature.KeyID != "ec-jku" {
			t.Fatalf("signature %+v, want verified by ec-jku", a.Signature)
		}
		if n := jwks.hits.Load(); n != 1 {
			t.Fatalf("JWKS fetched %d times, want 1", n)
		}
		clk.Advance(time.Minute)
		if b, err := r.Refresh(t.Context(), "j"); err != nil || !b.Signature.Verified {
			t.Fatalf("Refresh = %v, %+v", err, b)
		}
		if n := jwks.hits.Load(); n != 1 {
			t.Errorf("JWKS fetched %d times within its TTL, want 1 (cached)", n)
		}
		clk.Advance(jwksTTL)
		if b, err := r.Refresh(t.Context(), "j"); err != nil || !b.Signature.Verified {
			t.Fatalf("after the TTL: Refresh = %v, signature %+v", err, b.Signature)
		}
		if n := jwks.hits.Load(); n != 2 {
			t.Fatalf("JWKS fetched %d times after its TTL, want 2", n)
		}
	})
	t.Run("not allowed", func(t *testing.T) {
		before := jwks.hits.Load()
		s := newCardServer(t, viaJKU)
		r := newTestRegistry(t, Config{CardKeyURLs: []string{"https://keys.example/jwks.json"}})
		a, err := r.Add(t.Context(), Spec{URL: s.URL})
		if err != nil {
			t.Fatal(err)
		}
		if a.Signature.Verified || !strings.Contains(a.Signature.Error, "is not in registry.cardKeyURLs") {
			t.Fatalf("signature %+v", a.Signature)
		}
		if jwks.hits.Load() != before {
			t.Error("a jku that is not allowed was fetched")
		}
	})
	t.Run("inspect", func(t *testing.T) {
		s := newCardServer(t, k.signed(t, unsigned))
		r := newTestRegistry(t, Config{})
		a, err := r.Inspect(t.Context(), s.URL)
		if err != nil {
			t.Fatal(err)
		}
		if !a.Signature.Present || a.Signature.Verified {
			t.Fatalf("signature %+v, want present and not verified", a.Signature)
		}
	})
}

func TestRegistry_New_badCardKeyURL(t *testing.T) {
	t.Parallel()
	if _, err := New(Config{CardKeyURLs: []string{"ftp://keys"}}, nil); err == nil || !strings.Contains(err.Error(), "cardKeyURLs") {
		t.Fatalf("New = %v", err)
	}
}
