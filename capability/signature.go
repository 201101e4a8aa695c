package capability

import (
	"bytes"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gowebpki/jcs"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
)

// Bounds on what [VerifyCardSignatures] reads, so a hostile card cannot
// make verification expensive.
const (
	// MaxCardSignatures is the most signatures a card may carry; a card
	// with more is not verified.
	MaxCardSignatures = 8
	// MaxKeysPerSignature is the most trusted keys tried for one
	// signature.
	MaxKeysPerSignature = 16
	// maxProtectedLen and maxSignatureLen bound a signature's encoded
	// protected header and signature value (an RSA-8192 signature is
	// 1,366 characters).
	maxProtectedLen = 4096
	maxSignatureLen = 2048
)

// Signature is what orchd found when it checked an Agent Card's JWS
// signatures (A2A 1.0 §8.4). The zero value means the card is unsigned.
type Signature struct {
	// Present is true when the card carries at least one signature.
	Present bool `json:"present"`
	// Verified is true when one of the signatures verifies, over the card
	// as served, with a key orchd trusts.
	Verified bool `json:"verified"`
	// KeyID names the key that verified the card: the signature's kid,
	// else the key's own kid, else its RFC 7638 thumbprint. It is empty
	// when nothing verified.
	KeyID string `json:"keyId"`
	// Algorithm is the JWS algorithm of the signature that verified.
	Algorithm string `json:"alg,omitempty"`
	// Error says why no signature verified, one reason per signature.
	Error string `json:"error,omitempty"`
}

// KeySource gives [VerifyCardSignatures] the public keys it trusts. Keep it
// small: the registry's implementation adds keys fetched from allowed jku
// URLs to the keys pinned for the agent.
type KeySource interface {
	// CardKeys returns the keys to try for one signature whose protected
	// header names kid and jku ("" when absent). A non-nil error says why
	// some keys could not be had (a jku that may not be followed, a key
	// set that could not be fetched); the keys returned are still tried.
	// It must not return secrets in the error.
	CardKeys(kid, jku string) ([]jwk.Key, error)
}

// KeySet returns a [KeySource] over pinned keys. For a signature naming a
// kid it gives the keys with that kid and the keys that have none (a PEM
// key carries no kid, so it vouches for any); for a signature naming no
// kid, every key. It never follows jku. A nil set trusts nothing.
func KeySet(set jwk.Set) KeySource { return pinnedKeys{set} }

type pinnedKeys struct{ set jwk.Set }

func (p pinnedKeys) CardKeys(kid, _ string) ([]jwk.Key, error) {
	return MatchKeys(p.set, kid), nil
}

// MatchKeys returns the keys of set a signature naming kid may be checked
// with: those whose kid is kid and those without a kid, or every key when
// kid is "". A nil set gives none.
func MatchKeys(set jwk.Set, kid string) []jwk.Key {
	if set == nil {
		return nil
	}
	var out []jwk.Key
	for i := range set.Len() {
		k, ok := set.Key(i)
		if !ok {
			continue
		}
		if own, _ := k.KeyID(); kid == "" || own == "" || own == kid {
			out = append(out, k)
		}
	}
	return out
}

// signatureAlgorithms are the JWS algorithms a card signature may use:
// asymmetric ones only, so a card cannot be "signed" with nothing (none) or
// with a public key used as an HMAC secret (HS256 key confusion).
var signatureAlgorithms = []string{
	"RS256", "RS384", "RS512", "PS256", "PS384", "PS512",
	"ES256", "ES384", "ES512", "EdDSA", "Ed25519",
}

// CardSigned reports, without decoding it, whether a card's JSON may carry
// signatures, so callers keep the bytes verification needs only for such
// cards. A true answer can be wrong (the word in a description); a false
// one cannot.
func CardSigned(raw []byte) bool { return bytes.Contains(raw, []byte(`"signatures"`)) }

// VerifyCardSignatures checks the JWS signatures of a card, given as the raw
// JSON it was served as (A2A 1.0 §8.4): each signature's payload is the RFC
// 8785 canonical JSON of the card without its signatures member. The card
// verifies when any signature verifies with a key from keys; orchd also
// accepts the canonical form with empty members (null, "", [] and {})
// removed, as A2A's default-value rule has signers drop them. It never
// panics and never fails: what went wrong is in the result's Error.
func VerifyCardSignatures(card []byte, keys KeySource) Signature {
	doc, err := decodeCard(card, Options{})
	if err != nil {
		return Signature{Error: err.Error()}
	}
	raw, ok := doc["signatures"]
	if !ok || raw == nil {
		return Signature{}
	}
	list, ok := raw.([]any)
	switch {
	case !ok:
		return Signature{Present: true, Error: "signatures: want an array, got " + jsonKind(raw)}
	case len(list) == 0:
		return Signature{}
	case len(list) > MaxCardSignatures:
		return Signature{Present: true, Error: fmt.Sprintf("card carries %d signatures, more than the limit of %d", len(list), MaxCardSignatures)}
	}
	v := verifier{doc: doc, keys: keys}
	reasons := make([]string, 0, len(list))
	for i, s := range list {
		sig, reason := v.verify(s)
		if sig.Verified {
			return sig
		}
		if len(list) > 1 {
			reason = fmt.Sprintf("signature %d: %s", i+1, reason)
		}
		reasons = append(reasons, reason)
	}
	return Signature{Present: true, Error: strings.Join(reasons, "; ")}
}

// verifier checks the signatures of one card, computing each of its
// canonical payloads once, and only when needed.
type verifier struct {
	doc      map[string]any
	keys     KeySource
	payloads [2][]byte // as served, and with empty members removed
	errs     [2]error
	done     [2]bool
}

// payload returns the card's canonical form without signatures: as served
// (i = 0) or with empty members removed (i = 1, nil when that is the same).
func (v *verifier) payload(i int) ([]byte, error) {
	if !v.done[i] {
		v.done[i] = true
		v.payloads[i], v.errs[i] = canonicalCard(v.doc, i == 1)
		if i == 1 && v.errs[i] == nil {
			if served, err := v.payload(0); err == nil && bytes.Equal(served, v.payloads[1]) {
				v.payloads[1] = nil
			}
		}
	}
	return v.payloads[i], v.errs[i]
}

// protectedHeader is what a signature's protected header says.
type protectedHeader struct {
	alg, kid, jku string
}

// verify checks one signature object and says why it failed.
func (v *verifier) verify(s any) (Signature, string) {
	obj, ok := s.(map[string]any)
	if !ok {
		return Signature{}, "want an object, got " + jsonKind(s)
	}
	prot, _ := obj["protected"].(string)
	sigVal, _ := obj["signature"].(string)
	switch {
	case prot == "":
		return Signature{}, "malformed signature: protected is missing or not a string"
	case len(prot) > maxProtectedLen:
		return Signature{}, fmt.Sprintf("malformed signature: protected header is over %d characters", maxProtectedLen)
	}
	h, reason := parseProtected(prot)
	if reason != "" {
		return Signature{}, reason
	}
	switch {
	case sigVal == "":
		return Signature{}, "malformed signature: signature is missing or not a string"
	case len(sigVal) > maxSignatureLen:
		return Signature{}, fmt.Sprintf("malformed signature: signature is over %d characters", maxSignatureLen)
	}
	if _, err := base64.RawURLEncoding.Strict().DecodeString(sigVal); err != nil {
		return Signature{}, "malformed signature: signature is not unpadded base64url"
	}
	alg, ok := jwa.LookupSignatureAlgorithm(h.alg)
	if !ok {
		return Signature{}, fmt.Sprintf("alg %q is not a JWS algorithm", h.alg)
	}

	keys, keysErr := []jwk.Key(nil), error(nil)
	if v.keys != nil {
		keys, keysErr = v.keys.CardKeys(h.kid, h.jku)
	}
	if len(keys) == 0 {
		if keysErr != nil {
			return Signature{}, keysErr.Error()
		}
		if h.kid == "" {
			return Signature{}, "no trusted key (the signature names no kid)"
		}
		return Signature{}, fmt.Sprintf("no trusted key for kid %q", h.kid)
	}
	if len(keys) > MaxKeysPerSignature {
		keys = keys[:MaxKeysPerSignature]
	}
	if _, err := v.payload(0); err != nil {
		return Signature{}, "card cannot be canonicalized: " + err.Error()
	}
	// Only the protected header and the signature are signed over; the
	// unprotected header is left out so nothing in it can matter.
	buf, err := json.Marshal(map[string]string{"protected": prot, "signature": sigVal})
	if err != nil {
		return Signature{}, "malformed signature"
	}
	var mismatch string
	fit := make([]jwk.Key, 0, len(keys))
	for _, k := range keys {
		if r := keyFits(k, alg); r != "" {
			mismatch = r
			continue
		}
		fit = append(fit, k)
	}
	tried := len(fit)
	for i := range 2 {
		p, err := v.payload(i)
		if err != nil || p == nil {
			continue
		}
		for _, k := range fit {
			if _, err := jws.Verify(buf, jws.WithJSON(), jws.WithKey(alg, k), jws.WithDetachedPayload(p)); err == nil {
				return Signature{Present: true, Verified: true, KeyID: keyID(h.kid, k), Algorithm: h.alg}, ""
			}
		}
		if tried == 0 {
			break
		}
	}
	reason = "signature does not match the card"
	switch {
	case tried == 0:
		reason = mismatch
	case h.kid != "":
		reason = fmt.Sprintf("signature does not match the card (kid %q)", h.kid)
	}
	if keysErr != nil {
		reason += " (" + keysErr.Error() + ")"
	}
	return Signature{}, reason
}

// parseProtected decodes and checks a protected header, or says why it is
// refused.
func parseProtected(prot string) (protectedHeader, string) {
	var h protectedHeader
	b, err := base64.RawURLEncoding.Strict().DecodeString(prot)
	if err != nil {
		return h, "malformed protected header: not unpadded base64url"
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil || m == nil || dec.More() {
		return h, "malformed protected header: not a JSON object"
	}
	str := func(k string) (string, bool) {
		v, ok := m[k]
		if !ok {
			return "", true
		}
		s, ok := v.(string)
		return s, ok
	}
	var ok1, ok2, ok3 bool
	h.alg, ok1 = str("alg")
	h.kid, ok2 = str("kid")
	h.jku, ok3 = str("jku")
	switch {
	case !ok1 || !ok2 || !ok3:
		return h, "malformed protected header: alg, kid and jku must be strings"
	case h.alg == "":
		return h, "malformed protected header: no alg"
	case strings.EqualFold(h.alg, "none"):
		return h, `alg "none" refused: an unsigned card is not a signed one`
	case strings.HasPrefix(strings.ToUpper(h.alg), "HS"):
		return h, fmt.Sprintf("alg %q refused: a shared-secret MAC proves nothing about who signed the card", h.alg)
	case !slices.Contains(signatureAlgorithms, h.alg):
		return h, fmt.Sprintf("alg %q refused: want one of %s", h.alg, strings.Join(signatureAlgorithms, ", "))
	}
	if _, ok := m["crit"]; ok {
		return h, "protected header lists critical parameters (crit), which orchd does not support"
	}
	if _, ok := m["b64"]; ok {
		return h, "protected header sets b64, which orchd does not support"
	}
	return h, ""
}

// keyFits says why key cannot check a signature made with alg, or returns
// "" when it can.
func keyFits(key jwk.Key, alg jwa.SignatureAlgorithm) string {
	name := keyName(key)
	if own, ok := key.Algorithm(); ok && own.String() != alg.String() {
		return fmt.Sprintf("key %s is for %s, not %s", name, own, alg)
	}
	if use, ok := key.KeyUsage(); ok && use != "" && use != string(jwk.ForSignature) {
		return fmt.Sprintf("key %s is for use %q, not signatures", name, use)
	}
	if ops, ok := key.KeyOps(); ok && len(ops) > 0 && !slices.Contains(ops, jwk.KeyOpVerify) {
		return fmt.Sprintf("key %s may not verify (key_ops %v)", name, ops)
	}
	if !slices.Contains(keyAlgorithms(key), alg.String()) {
		return fmt.Sprintf("key %s (%s) cannot verify %s", name, key.KeyType(), alg)
	}
	return ""
}

// keyAlgorithms lists the card signature algorithms a key may be used
// with, by its type and curve (RFC 7518 §3.3–3.5, RFC 8037 §3.1): RSA keys
// for RS* and PS*, an EC key for the one ES* its curve is defined for, an
// Ed25519 key for EdDSA. Any other key gets none. The first is the one a
// signer without an "alg" uses.
func keyAlgorithms(key jwk.Key) []string {
	crv := func() string {
		c, ok := key.(interface {
			Crv() (jwa.EllipticCurveAlgorithm, bool)
		})
		if !ok {
			return ""
		}
		v, _ := c.Crv()
		return v.String()
	}
	switch key.KeyType() {
	case jwa.RSA():
		return []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
	case jwa.EC():
		switch crv() {
		case jwa.P256().String():
			return []string{"ES256"}
		case jwa.P384().String():
			return []string{"ES384"}
		case jwa.P521().String():
			return []string{"ES512"}
		}
	case jwa.OKP():
		if crv() == jwa.Ed25519().String() {
			return []string{"EdDSA", "Ed25519"}
		}
	}
	return nil
}

// keyName names a key in errors by its kid, or says it has none.
func keyName(key jwk.Key) string {
	if kid, ok := key.KeyID(); ok && kid != "" {
		return fmt.Sprintf("%q", kid)
	}
	return "without kid"
}

// keyID names the key that verified a signature: the signature's kid, the
// key's kid, or the key's RFC 7638 SHA-256 thumbprint.
func keyID(headerKid string, key jwk.Key) string {
	if headerKid != "" {
		return headerKid
	}
	if kid, ok := key.KeyID(); ok && kid != "" {
		return kid
	}
	return Thumbprint(key)
}

// Thumbprint returns key's RFC 7638 SHA-256 thumbprint, base64url encoded,
// the name a key without a kid goes by; "" when it cannot be computed.
func Thumbprint(key jwk.Key) string {
	tp, err := key.Thumbprint(crypto.SHA256)
	if err != nil {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(tp)
}

// canonicalCard returns the RFC 8785 canonical JSON of a decoded card
// without its signatures member; with clean, members whose value is empty
// (null, "", [] or {}) are removed first, at every depth.
func canonicalCard(doc map[string]any, clean bool) ([]byte, error) {
	m := make(map[string]any, len(doc))
	for k, v := range doc {
		if k != "signatures" {
			m[k] = v
		}
	}
	var v any = m
	if clean {
		v = dropEmpty(m)
		if v == nil {
			v = map[string]any{}
		}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return jcs.Transform(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

// dropEmpty returns v without empty members and elements, or nil when v
// itself is empty.
func dropEmpty(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if e = dropEmpty(e); e != nil {
				out[k] = e
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		out := make([]any, 0, len(x))
		for _, e := range x {
			if e = dropEmpty(e); e != nil {
				out = append(out, e)
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case string:
		if x == "" {
			return nil
		}
	}
	return v
}

// SignCard returns card, an Agent Card's JSON, with one more signature
// appended to its signatures: a JWS (A2A 1.0 §8.4) over the RFC 8785
// canonical card without signatures, made with the private key. The
// protected header holds alg (the key's own alg, else RS256 for RSA, ES256,
// ES384 or ES512 by curve, EdDSA for Ed25519), kid (the key's, else its
// thumbprint) and typ JOSE. The card comes back compact, keys sorted; what
// it says is unchanged, so a verifier canonicalizing it, or a2a-go's
// re-encoding of it, gets the signed payload. It fails on a card that is not
// a JSON object, a public or symmetric key, and signatures that are not an
// array.
func SignCard(card []byte, key jwk.Key) ([]byte, error) {
	if key == nil {
		return nil, errors.New("sign card: no key")
	}
	if private, err := jwk.IsPrivateKey(key); err != nil || !private {
		return nil, errors.New("sign card: want an asymmetric private key")
	}
	alg, err := signingAlgorithm(key)
	if err != nil {
		return nil, fmt.Errorf("sign card: %w", err)
	}
	doc, err := decodeCard(card, Options{})
	if err != nil {
		return nil, fmt.Errorf("sign card: %w", err)
	}
	var sigs []any
	switch s := doc["signatures"].(type) {
	case nil:
	case []any:
		sigs = s
	default:
		return nil, fmt.Errorf("sign card: signatures: want an array, got %s", jsonKind(s))
	}
	payload, err := canonicalCard(doc, false)
	if err != nil {
		return nil, fmt.Errorf("sign card: canonicalize: %w", err)
	}
	kid, _ := key.KeyID()
	if kid == "" {
		kid = Thumbprint(key)
	}
	hdr := jws.NewHeaders()
	for k, v := range map[string]any{jws.KeyIDKey: kid, jws.TypeKey: "JOSE"} {
		if err := hdr.Set(k, v); err != nil {
			return nil, fmt.Errorf("sign card: header %s: %w", k, err)
		}
	}
	compact, err := jws.Sign(nil, jws.WithKey(alg, key, jws.WithProtectedHeaders(hdr)), jws.WithDetachedPayload(payload))
	if err != nil {
		return nil, fmt.Errorf("sign card: %w", err)
	}
	prot, sig, ok := splitDetached(compact)
	if !ok {
		return nil, errors.New("sign card: unexpected JWS form")
	}
	doc["signatures"] = append(sigs, map[string]any{"protected": prot, "signature": sig})
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("sign card: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// signingAlgorithm picks the JWS algorithm for a signing key.
func signingAlgorithm(key jwk.Key) (jwa.SignatureAlgorithm, error) {
	if a, ok := key.Algorithm(); ok {
		alg, ok := jwa.LookupSignatureAlgorithm(a.String())
		if !ok || !slices.Contains(signatureAlgorithms, alg.String()) {
			return alg, fmt.Errorf("key alg %q is not an accepted card signature algorithm", a)
		}
		return alg, nil
	}
	algs := keyAlgorithms(key)
	if len(algs) == 0 {
		return jwa.SignatureAlgorithm{}, fmt.Errorf("key type %s has no accepted card signature algorithm", key.KeyType())
	}
	alg, ok := jwa.LookupSignatureAlgorithm(algs[0])
	if !ok {
		return alg, fmt.Errorf("signature algorithm %s is not known to jwx", algs[0])
	}
	return alg, nil
}

// splitDetached splits a compact JWS with a detached payload,
// "protected..signature".
func splitDetached(compact []byte) (string, string, bool) {
	parts := strings.Split(string(compact), ".")
	if len(parts) != 3 || parts[1] != "" || parts[0] == "" || parts[2] == "" {
		return "", "", false
	}
	return parts[0], parts[2], true
}
