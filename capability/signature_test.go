package capability

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"slices"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/google/go-cmp/cmp"
	"github.com/gowebpki/jcs"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"

	"github.com/orchd/orchd/internal/testcmp"
)

// signedCard is a realistic 1.0 card, the kind the tests sign.
const signedCard = `{
  "name": "Research Agent",
  "description": "Finds and summarizes sources.",
  "version": "2.1.0",
  "supportedInterfaces": [
    {"url": "https://research.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
    {"url": "https://research.example/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
  ],
  "provider": {"organization": "Example Research", "url": "https://example.org"},
  "capabilities": {"streaming": true, "pushNotifications": false,
    "extensions": [{"uri": "https://a2a-protocol.org/extensions/steering/v1", "params": {"interruptible": true, "steerable": true}}]},
  "securitySchemes": {"corp": {"httpAuthSecurityScheme": {"scheme": "Bearer", "bearerFormat": "JWT"}}},
  "securityRequirements": [{"schemes": {"corp": {"list": []}}}],
  "defaultInputModes": ["text/plain", "application/json"],
  "defaultOutputModes": ["text/plain"],
  "skills": [
    {"id": "research", "name": "Research", "description": "Research a topic <deeply> & cite.", "tags": ["search", "summarize"],
     "examples": ["What changed in A2A 1.0?"], "inputModes": ["text/plain"], "outputModes": ["text/plain"]},
    {"id": "translate", "name": "Translate", "description": "Translates text: 日本語, émoji 🚀, 1e3 words.", "tags": ["language"]}
  ],
  "rating": 4.50
}`

// testKey is a private JWK with its kid, and its public JWK.
type testKey struct {
	private, public jwk.Key
	pem             []byte // the public key, PEM encoded
}

func newRSAKey(t testing.TB, kid string) testKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return importKey(t, k, &k.PublicKey, kid)
}

func newECKey(t testing.TB, kid string) testKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return importKey(t, k, &k.PublicKey, kid)
}

func importKey(t testing.TB, priv, pub any, kid string) testKey {
	t.Helper()
	sk, err := jwk.Import(priv)
	if err != nil {
		t.Fatal(err)
	}
	pk, err := jwk.Import(pub)
	if err != nil {
		t.Fatal(err)
	}
	if kid != "" {
		if err := sk.Set(jwk.KeyIDKey, kid); err != nil {
			t.Fatal(err)
		}
		if err := pk.Set(jwk.KeyIDKey, kid); err != nil {
			t.Fatal(err)
		}
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return testKey{private: sk, public: pk, pem: pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})}
}

func keySet(t testing.TB, keys ...jwk.Key) jwk.Set {
	t.Helper()
	set := jwk.NewSet()
	for _, k := range keys {
		if err := set.AddKey(k); err != nil {
			t.Fatal(err)
		}
	}
	return set
}

func sign(t testing.TB, card string, k testKey) string {
	t.Helper()
	out, err := SignCard([]byte(card), k.private)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// withSignature appends a hand-made signature object to card.
func withSignature(t testing.TB, card string, header map[string]any, sig string) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(card), &doc); err != nil {
		t.Fatal(err)
	}
	h, err := json.Marshal(header)
	if err != nil {
		t.Fatal(err)
	}
	list, _ := doc["signatures"].([]any)
	doc["signatures"] = append(list, map[string]any{"protected": base64.RawURLEncoding.EncodeToString(h), "signature": sig})
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// edit changes a field of a signed card, keeping its signatures.
func edit(t testing.TB, card string, fn func(doc map[string]any)) string {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal([]byte(card), &doc); err != nil {
		t.Fatal(err)
	}
	fn(doc)
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestVerifyCardSignatures(t *testing.T) {
	t.Parallel()
	rsaKey := newRSAKey(t, "rsa-1")
	ecKey := newECKey(t, "ec-1")
	forger := newECKey(t, "ec-1") // another key claiming the same kid
	trusted := KeySet(keySet(t, rsaKey.public, ecKey.public))

	rsaSigned := sign(t, signedCard, rsaKey)
	ecSigned := sign(t, signedCard, ecKey)
	pemKey, err := jwk.ParseKey(ecKey.pem, jwk.WithPEM(true))
	if err != nil {
		t.Fatal(err)
	}
	hmacSig := func() string {
		h := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"HS256","kid":"rsa-1"}`))
		doc := map[string]any{}
		_ = json.Unmarshal([]byte(signedCard), &doc)
		payload, _ := canonicalCard(doc, false)
		mac := hmac.New(sha256.New, rsaKey.pem) // the public key as the HMAC secret
		mac.Write([]byte(h + "." + base64.RawURLEncoding.EncodeToString(payload)))
		return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
	}()

	tests := []struct {
		name      string
		card      string
		keys      KeySource
		verified  bool
		present   bool
		keyID     string
		alg       string
		errSubstr string
	}{
		{name: "unsigned", card: signedCard, keys: trusted},
		{name: "RS256 valid", card: rsaSigned, keys: trusted, verified: true, present: true, keyID: "rsa-1", alg: "RS256"},
		{name: "ES256 valid", card: ecSigned, keys: trusted, verified: true, present: true, keyID: "ec-1", alg: "ES256"},
		{name: "reformatted card still verifies", card: edit(t, ecSigned, func(map[string]any) {}), keys: trusted, verified: true, present: true, keyID: "ec-1", alg: "ES256"},
		{name: "changed after signing", card: edit(t, rsaSigned, func(d map[string]any) { d["version"] = "2.1.1" }), keys: trusted,
			present: true, errSubstr: `signature does not match the card (kid "rsa-1")`},
		{name: "skill added after signing", card: edit(t, ecSigned, func(d map[string]any) {
			d["skills"] = append(d["skills"].([]any), map[string]any{"id": "exfiltrate", "name": "x", "tags": []any{}})
		}), keys: trusted, present: true, errSubstr: "does not match"},
		{name: "forged with another key under the same kid", card: sign(t, signedCard, forger), keys: trusted,
			present: true, errSubstr: `signature does not match the card (kid "ec-1")`},
		{name: "unknown kid", card: sign(t, signedCard, newECKey(t, "stranger")), keys: trusted,
			present: true, errSubstr: `no trusted key for kid "stranger"`},
		{name: "no keys at all", card: ecSigned, keys: nil, present: true, errSubstr: `no trusted key for kid "ec-1"`},
		{name: "pinned key without kid vouches for any kid", card: ecSigned, keys: KeySet(keySet(t, pemKey)),
			verified: true, present: true, keyID: "ec-1", alg: "ES256"},
		{name: "alg none", card: withSignature(t, signedCard, map[string]any{"alg": "none", "kid": "rsa-1"}, "AA"), keys: trusted,
			present: true, errSubstr: `alg "none" refused`},
		{name: "HS256 with the public key as secret", card: withSignature(t, signedCard, map[string]any{"alg": "HS256", "kid": "rsa-1"}, hmacSig),
			keys: trusted, present: true, errSubstr: `alg "HS256" refused`},
		{name: "key type does not fit alg", card: withSignature(t, signedCard, map[string]any{"alg": "ES256", "kid": "rsa-1"}, "AAAA"),
			keys: trusted, present: true, errSubstr: `key "rsa-1" (RSA) cannot verify ES256`},
		{name: "unknown alg", card: withSignature(t, signedCard, map[string]any{"alg": "XY9", "kid": "rsa-1"}, "AAAA"),
			keys: trusted, present: true, errSubstr: `alg "XY9" refused`},
		{name: "crit refused", card: withSignature(t, signedCard, map[string]any{"alg": "ES256", "kid": "ec-1", "crit": []string{"exp"}, "exp": 1}, "AAAA"),
			keys: trusted, present: true, errSubstr: "crit"},
		{name: "protected header not base64url", card: edit(t, signedCard, func(d map[string]any) {
			d["signatures"] = []any{map[string]any{"protected": "eyJ+/=", "signature": "AAAA"}}
		}), keys: trusted, present: true, errSubstr: "malformed protected header"},
		{name: "protected header not an object", card: edit(t, signedCard, func(d map[string]any) {
			d["signatures"] = []any{map[string]any{"protected": base64.RawURLEncoding.EncodeToString([]byte(`["ES256"]`)), "signature": "AAAA"}}
		}), keys: trusted, present: true, errSubstr: "malformed protected header: not a JSON object"},
		{name: "no alg", card: withSignature(t, signedCard, map[string]any{"kid": "ec-1"}, "AAAA"), keys: trusted,
			present: true, errSubstr: "no alg"},
		{name: "signature missing", card: edit(t, signedCard, func(d map[string]any) {
			d["signatures"] = []any{map[string]any{"protected": base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"ES256","kid":"ec-1"}`))}}
		}), keys: trusted, present: true, errSubstr: "signature is missing"},
		{name: "signatures not an array", card: edit(t, signedCard, func(d map[string]any) { d["signatures"] = "x" }), keys: trusted,
			present: true, errSubstr: "signatures: want an array"},
		{name: "empty signatures", card: edit(t, signedCard, func(d map[string]any) { d["signatures"] = []any{} }), keys: trusted},
		{name: "too many signatures", card: edit(t, ecSigned, func(d map[string]any) {
			s := d["signatures"].([]any)
			for range MaxCardSignatures {
				s = append(s, s[0])
			}
			d["signatures"] = s
		}), keys: trusted, present: true, errSubstr: "more than the limit of 8"},
		{name: "second signature verifies after a stale first", card: sign(t, sign(t, signedCard, newRSAKey(t, "retired")), ecKey), keys: trusted,
			verified: true, present: true, keyID: "ec-1", alg: "ES256"},
		{name: "empty members added after signing are ignored", card: edit(t, sign(t, edit(t, signedCard, func(d map[string]any) {
			delete(d, "securityRequirements") // its scope list is the one empty member
		}), ecKey), func(d map[string]any) {
			d["iconUrl"] = ""
			d["documentationUrl"] = nil
			d["capabilities"].(map[string]any)["extensions"].([]any)[0].(map[string]any)["description"] = ""
		}), keys: trusted, verified: true, present: true, keyID: "ec-1", alg: "ES256"},
		{name: "not JSON", card: `{"name":`, keys: trusted, errSubstr: "not valid JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := VerifyCardSignatures([]byte(tt.card), tt.keys)
			if got.Verified != tt.verified || got.Present != tt.present {
				t.Fatalf("got %+v, want verified=%v present=%v", got, tt.verified, tt.present)
			}
			if got.KeyID != tt.keyID || got.Algorithm != tt.alg {
				t.Errorf("got keyId %q alg %q, want %q %q", got.KeyID, got.Algorithm, tt.keyID, tt.alg)
			}
			if tt.errSubstr == "" && got.Error != "" {
				t.Errorf("unexpected error %q", got.Error)
			}
			if !strings.Contains(got.Error, tt.errSubstr) {
				t.Errorf("error %q does not contain %q", got.Error, tt.errSubstr)
			}
		})
	}
}

// TestVerifyCardSignatures_independentSigner checks orchd verifies a
// signature it did not make: the payload is canonicalized with jcs
// directly, the protected header written with its members in another order
// and the JWS made in flattened JSON form by jws.Sign.
func TestVerifyCardSignatures_independentSigner(t *testing.T) {
	t.Parallel()
	for _, k := range []testKey{newRSAKey(t, "rsa-x"), newECKey(t, "ec-x")} {
		kid, _ := k.public.KeyID()
		t.Run(kid, func(t *testing.T) {
			t.Parallel()
			payload, err := jcs.Transform([]byte(signedCard))
			if err != nil {
				t.Fatal(err)
			}
			alg := jwa.RS256()
			if strings.HasPrefix(kid, "ec") {
				alg = jwa.ES256()
			}
			hdr := jws.NewHeaders()
			_ = hdr.Set(jws.TypeKey, "JOSE")
			_ = hdr.Set(jws.KeyIDKey, kid)
			msg, err := jws.Sign(nil, jws.WithJSON(), jws.WithKey(alg, k.private, jws.WithProtectedHeaders(hdr)), jws.WithDetachedPayload(payload))
			if err != nil {
				t.Fatal(err)
			}
			var flat struct {
				Protected  string `json:"protected"`
				Signature  string `json:"signature"`
				Signatures []struct {
					Protected string `json:"protected"`
					Signature string `json:"signature"`
				} `json:"signatures"`
			}
			if err := json.Unmarshal(msg, &flat); err != nil {
				t.Fatal(err)
			}
			if flat.Protected == "" && len(flat.Signatures) == 1 {
				flat.Protected, flat.Signature = flat.Signatures[0].Protected, flat.Signatures[0].Signature
			}
			card := strings.TrimSuffix(strings.TrimSpace(signedCard), "}") +
				`,"signatures":[{"protected":"` + flat.Protected + `","signature":"` + flat.Signature + `","header":{"note":"unprotected"}}]}`
			got := VerifyCardSignatures([]byte(card), KeySet(keySet(t, k.public)))
			want := Signature{Verified: true, KeyID: kid, Algorithm: alg.String()}
			if diff := cmp.Diff(want, got, testcmp.Only[Signature]("Verified", "KeyID", "Algorithm")); diff != "" {
				t.Fatalf("signature (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSignCard_roundTrip signs cards as a2a-go produces them, including
// the dual-format card orchd serves, and verifies them after a2a-go parses
// and re-encodes them, as a static card handler does.
func TestSignCard_roundTrip(t *testing.T) {
	t.Parallel()
	card := &a2a.AgentCard{
		Name: "orchd", Description: "routes <tasks> & more", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{
			{URL: "http://127.0.0.1:1/a2a", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: "1.0"},
			{URL: "http://127.0.0.1:1/a2a/v0", ProtocolBinding: a2a.TransportProtocolJSONRPC, ProtocolVersion: "0.3"},
		},
		Capabilities: a2a.AgentCapabilities{Streaming: true, Extensions: []a2a.AgentExtension{
			{URI: SteeringURI, Params: map[string]any{"interruptible": true, "steerable": false, "limit": 3}},
		}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []a2a.AgentSkill{{ID: "research", Name: "Research", Tags: []string{"search"}}},
	}
	plain, err := json.Marshal(card)
	if err != nil {
		t.Fatal(err)
	}
	dual, err := a2av0.NewStaticAgentCardProducer(card).(a2asrv.AgentCardJSONProducer).CardJSON(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	edKey := func() testKey {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return importKey(t, priv, pub, "ed-1")
	}()
	for _, k := range []testKey{newRSAKey(t, "rsa-1"), newECKey(t, ""), edKey} {
		for name, raw := range map[string][]byte{"a2a": plain, "dual-format": dual} {
			signed, err := SignCard(raw, k.private)
			if err != nil {
				t.Fatal(err)
			}
			keys := KeySet(keySet(t, k.public))
			if got := VerifyCardSignatures(signed, keys); !got.Verified {
				t.Fatalf("%s %s: signed card does not verify: %+v", name, k.public.KeyType(), got)
			}
			if _, err := Build(signed, Options{}); err != nil {
				t.Fatalf("%s: signed card does not build: %v", name, err)
			}
			var parsed a2a.AgentCard
			if err := json.Unmarshal(signed, &parsed); err != nil {
				t.Fatal(err)
			}
			if len(parsed.Signatures) != 1 || parsed.Signatures[0].Protected == "" {
				t.Fatalf("%s: a2a-go sees signatures %+v", name, parsed.Signatures)
			}
			if name == "a2a" {
				again, err := json.Marshal(&parsed)
				if err != nil {
					t.Fatal(err)
				}
				if got := VerifyCardSignatures(again, keys); !got.Verified {
					t.Fatalf("a2a-go's re-encoding does not verify: %+v", got)
				}
			}
			got := VerifyCardSignatures(signed, keys)
			if want, _ := k.public.KeyID(); want != "" && got.KeyID != want {
				t.Errorf("keyId %q, want %q", got.KeyID, want)
			} else if want == "" && got.KeyID != Thumbprint(k.public) {
				t.Errorf("keyId %q, want the thumbprint %q", got.KeyID, Thumbprint(k.public))
			}
		}
	}
}

func TestSignCard_errors(t *testing.T) {
	t.Parallel()
	k := newECKey(t, "ec-1")
	hmacKey, err := jwk.Import([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		card string
		key  jwk.Key
		want string
	}{
		{"public key", signedCard, k.public, "private key"},
		{"symmetric key", signedCard, hmacKey, "private key"},
		{"no key", signedCard, nil, "no key"},
		{"not an object", `[1]`, k.private, "want a JSON object"},
		{"signatures not an array", `{"name":"x","signatures":{}}`, k.private, "signatures: want an array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := SignCard([]byte(tt.card), tt.key)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// BenchmarkVerifyCardSignature measures verifying one signature on a
// realistic card, canonicalization included, next to the signature check
// alone on a prepared payload.
func BenchmarkVerifyCardSignature(b *testing.B) {
	for _, tc := range []struct {
		name string
		key  testKey
	}{{"RS256", newRSAKey(b, "k")}, {"ES256", newECKey(b, "k")}} {
		card := []byte(sign(b, signedCard, tc.key))
		keys := KeySet(keySet(b, tc.key.public))
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(card)))
			for b.Loop() {
				if s := VerifyCardSignatures(card, keys); !s.Verified {
					b.Fatal(s.Error)
				}
			}
		})
	}
}

// FuzzVerifyCardSignature feeds arbitrary cards, and arbitrary protected
// headers and signature values spliced into a card, to
// VerifyCardSignatures, seeded with testdata/fuzz/FuzzVerifyCardSignature
// and with cards signed by the fuzz key. It must never panic, and a card it
// calls verified must name its key and algorithm.
//
//	go test ./capability -run '^$' -fuzz FuzzVerifyCardSignature -fuzztime 60s -fuzzminimizetime 20x
//
// (each input verifies a signature, so minimizing a large card by the
// default 60s of executions stalls the progress report).
func FuzzVerifyCardSignature(f *testing.F) {
	k := newECKey(f, "fuzz")
	keys := KeySet(keySet(f, k.public))
	signed := sign(f, signedCard, k)
	f.Add([]byte(signed), "", "")
	f.Add([]byte(signedCard), `{"alg":"ES256","kid":"fuzz"}`, "AAAA")
	f.Add([]byte(signedCard), `{"alg":"none"}`, "")
	f.Add([]byte(`{"name":"x","signatures":[{"protected":"e30","signature":"AA","header":{"kid":1}}]}`), `{"alg":"RS256","jku":"https://x"}`, "_-_-")
	f.Fuzz(func(t *testing.T, card []byte, header, sig string) {
		check := func(raw []byte) {
			got := VerifyCardSignatures(raw, keys)
			if got.Verified && (!got.Present || got.KeyID == "" || got.Algorithm == "" || got.Error != "") {
				t.Fatalf("inconsistent result %+v", got)
			}
			if !got.Verified && got.Present && got.Error == "" {
				t.Fatalf("unverified signature without a reason: %+v", got)
			}
		}
		check(card)
		if header == "" && sig == "" {
			return
		}
		var doc map[string]any
		if json.Unmarshal(card, &doc) != nil || doc == nil {
			doc = map[string]any{"name": "fuzz"}
		}
		doc["signatures"] = []any{map[string]any{"protected": base64.RawURLEncoding.EncodeToString([]byte(header)), "signature": sig}}
		raw, err := json.Marshal(doc)
		if err != nil {
			return
		}
		check(raw)
	})
}

// TestDrift_Empty_signature checks a lost signature counts as drift.
func TestDrift_Empty_signature(t *testing.T) {
	t.Parallel()
	if d := (Drift{From: "a", To: "a", Signature: "signature no longer verifies: x"}); d.Empty() {
		t.Fatal("a drift with a signature note is empty")
	}
}

// TestKeyAlgorithms_ByTypeAndCurve: an EC key verifies only the ES* its
// curve is defined for (RFC 7518 §3.4), so a P-256 key is no ES384 key,
// and a key with no accepted algorithm is refused rather than guessed at.
func TestKeyAlgorithms_ByTypeAndCurve(t *testing.T) {
	t.Parallel()
	ec := func(c elliptic.Curve) testKey {
		k, err := ecdsa.GenerateKey(c, rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return importKey(t, k, &k.PublicKey, "k")
	}
	edPub, edPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		key  testKey
		want []string
	}{
		{name: "RSA", key: newRSAKey(t, "k"), want: []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}},
		{name: "P-256", key: ec(elliptic.P256()), want: []string{"ES256"}},
		{name: "P-384", key: ec(elliptic.P384()), want: []string{"ES384"}},
		{name: "P-521", key: ec(elliptic.P521()), want: []string{"ES512"}},
		{name: "Ed25519", key: importKey(t, edPriv, edPub, "k"), want: []string{"EdDSA", "Ed25519"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, keyAlgorithms(tt.key.public)); diff != "" {
				t.Errorf("keyAlgorithms (-want +got):\n%s", diff)
			}
			for _, alg := range signatureAlgorithms {
				a, ok := jwa.LookupSignatureAlgorithm(alg)
				if !ok {
					t.Fatalf("jwx does not know %s", alg)
				}
				refusal := keyFits(tt.key.public, a)
				if fits := slices.Contains(tt.want, alg); fits != (refusal == "") {
					t.Errorf("keyFits(%s key, %s) = %q, want fits=%v", tt.name, alg, refusal, fits)
				}
			}
			alg, err := signingAlgorithm(tt.key.private)
			if err != nil || alg.String() != tt.want[0] {
				t.Errorf("signingAlgorithm = %v, %v; want %s", alg, err, tt.want[0])
			}
		})
	}
	sym, err := jwk.Import([]byte("a shared secret is no signing key"))
	if err != nil {
		t.Fatal(err)
	}
	if algs := keyAlgorithms(sym); algs != nil {
		t.Errorf("keyAlgorithms(oct key) = %v, want none", algs)
	}
	if _, err := signingAlgorithm(sym); err == nil {
		t.Error("signingAlgorithm(oct key) = nil error, want a refusal")
	}
}
