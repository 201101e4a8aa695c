package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"
)

const (
	// verifiedCacheSize bounds the verified JWTs remembered.
	verifiedCacheSize = 1024
	// verifiedCacheTTL bounds how long a verified JWT is remembered; it is
	// never remembered past its expiry, nor across a change of the key set.
	verifiedCacheTTL = time.Minute
	// maxClaimLen bounds the principal and tenant taken from claims.
	maxClaimLen = 1024
	// maxRoles bounds the roles taken from a token.
	maxRoles = 256
)

// jwtVerifier checks bearer JWTs of one issuer.
type jwtVerifier struct {
	cfg      JWTConfig // with defaults
	allowed  map[string]jwa.SignatureAlgorithm
	accepted string // the allowed algorithms, for reasons
	keys     *keySource
	now      func() time.Time
	validate []jwt.ValidateOption
	verified *lru.Cache[[sha256.Size]byte, verifiedJWT] // nil: no cache
}

// verifiedJWT is a remembered verification.
type verifiedJWT struct {
	p     *Principal // without secret
	since time.Time  // when it was verified, by the injected clock
	until time.Time  // when it must be verified again
	gen   uint64     // key snapshot it was verified with
}

// jwsHeader is the part of a JWT's protected header used to choose the key.
type jwsHeader struct {
	Alg *string `json:"alg"`
	Kid string  `json:"kid"`
}

// newJWTVerifier builds the verifier of cfg (with defaults) over keys.
func newJWTVerifier(cfg JWTConfig, keys *keySource, now func() time.Time) (*jwtVerifier, error) {
	v := &jwtVerifier{cfg: cfg, keys: keys, now: now, allowed: make(map[string]jwa.SignatureAlgorithm)}
	for _, name := range cfg.Algorithms {
		alg, err := signatureAlgorithm(name)
		if err != nil {
			return nil, err
		}
		v.allowed[name] = alg
	}
	v.accepted = strings.Join(cfg.Algorithms, ", ")
	v.validate = []jwt.ValidateOption{
		jwt.WithClock(jwt.ClockFunc(now)),
		jwt.WithAcceptableSkew(cfg.ClockSkew),
		jwt.WithIssuer(cfg.Issuer),
		jwt.WithAudience(cfg.Audience),
		jwt.WithRequiredClaim(jwt.ExpirationKey),
	}
	c, err := lru.New[[sha256.Size]byte, verifiedJWT](verifiedCacheSize)
	if err != nil {
		return nil, fmt.Errorf("jwt: verified token cache: %w", err)
	}
	v.verified = c
	return v, nil
}

// signatureAlgorithm returns the asymmetric algorithm called name, refusing
// none, HMAC and unknown names.
func signatureAlgorithm(name string) (jwa.SignatureAlgorithm, error) {
	if strings.EqualFold(name, "none") {
		return jwa.SignatureAlgorithm{}, errors.New(`algorithm "none" means unsigned tokens and is never accepted`)
	}
	alg, ok := jwa.LookupSignatureAlgorithm(name)
	if !ok || !slices.Contains(defaultAlgorithms, name) {
		if ok && alg.IsSymmetric() {
			return jwa.SignatureAlgorithm{}, fmt.Errorf("algorithm %s is symmetric (HMAC) and is never accepted: an issuer's public key is no secret", name)
		}
		return jwa.SignatureAlgorithm{}, fmt.Errorf("algorithm %q is not one of %s", name, strings.Join(defaultAlgorithms, ", "))
	}
	return alg, nil
}

// looksLikeJWT reports whether tok has the shape of a compact JWS or JWE.
func looksLikeJWT(tok string) bool {
	n := strings.Count(tok, ".")
	return (n == 2 || n == 4) && strings.HasPrefix(tok, "ey")
}

// verify checks raw, whose SHA-256 is sum, and returns its principal.
func (v *jwtVerifier) verify(raw string, sum *[sha256.Size]byte) (*Principal, error) {
	now := v.now()
	if c, ok := v.cached(sum); ok {
		if s := v.keys.current(); s != nil && s.gen == c.gen && !now.Before(c.since) && now.Before(c.until) {
			p := c.p.clone()
			p.secret = &bearer{token: raw}
			return p, nil
		}
		v.verified.Remove(*sum)
	}

	parts := strings.Split(raw, ".")
	switch len(parts) {
	case 3:
	case 5:
		return nil, malformed(MethodJWT, "encrypted JWTs (JWE) are not accepted")
	default:
		return nil, malformed(MethodJWT, "malformed JWT: not three dot-separated parts")
	}
	hb, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return nil, malformed(MethodJWT, "malformed JWT: header is not base64url")
	}
	var hdr jwsHeader
	if err := json.Unmarshal(hb, &hdr); err != nil {
		return nil, malformed(MethodJWT, "malformed JWT: header is not a JSON object with string alg and kid")
	}
	if hdr.Alg == nil || *hdr.Alg == "" {
		return nil, malformed(MethodJWT, "malformed JWT: header has no alg")
	}
	algName := *hdr.Alg
	if strings.EqualFold(algName, "none") {
		return nil, refuse(MethodJWT, "unsigned JWT (alg none) refused")
	}
	alg, ok := v.allowed[algName]
	if !ok {
		if a, known := jwa.LookupSignatureAlgorithm(algName); known && a.IsSymmetric() {
			return nil, refuse(MethodJWT, "JWT algorithm %s is symmetric (HMAC) and never accepted", quote(algName))
		}
		return nil, refuse(MethodJWT, "JWT algorithm %s is not accepted (accepted: %s)", quote(algName), v.accepted)
	}

	key, gen, rerr := v.key(hdr.Kid, algName)
	if rerr != nil {
		return nil, rerr
	}
	tok, err := jwt.Parse([]byte(raw), jwt.WithKey(alg, key.pub), jwt.WithValidate(false))
	if err != nil {
		if errors.Is(err, jws.VerificationError()) || errors.Is(err, jws.VerifyError()) {
			return nil, refuse(MethodJWT, "JWT signature does not verify with key %s", quote(key.kid))
		}
		return nil, malformed(MethodJWT, "malformed JWT claims")
	}
	if err := jwt.Validate(tok, v.validate...); err != nil {
		return nil, v.validationError(tok, err)
	}
	claims, err := decodeClaims(parts[1])
	if err != nil {
		return nil, malformed(MethodJWT, "malformed JWT claims")
	}
	p, rerr := v.principal(claims)
	if rerr != nil {
		return nil, rerr
	}
	if v.verified != nil {
		until := now.Add(verifiedCacheTTL)
		if exp, ok := tok.Expiration(); ok && exp.Before(until) {
			until = exp
		}
		if now.Before(until) {
			v.verified.Add(*sum, verifiedJWT{p: p.clone(), since: now, until: until, gen: gen})
		}
	}
	p.secret = &bearer{token: raw}
	return p, nil
}

// cached returns the remembered verification of the token whose hash is
// sum.
func (v *jwtVerifier) cached(sum *[sha256.Size]byte) (verifiedJWT, bool) {
	if v.verified == nil {
		return verifiedJWT{}, false
	}
	return v.verified.Get(*sum)
}

// key finds the issuer's key for kid and alg, refetching the key set once
// (rate-limited) when kid is unknown or no set has been fetched yet. It
// also returns the generation of the key set the key is from.
func (v *jwtVerifier) key(kid, alg string) (*verifyKey, uint64, *Error) {
	s := v.keys.current()
	if s == nil || (kid != "" && len(s.byKid[kid]) == 0) {
		if v.keys.refetch() {
			s = v.keys.current()
		}
	}
	if s == nil {
		return nil, 0, unavailable(MethodJWT, "the issuer's signing keys are not available")
	}
	if kid == "" {
		var fits []*verifyKey
		for _, k := range s.all {
			if keyFits(k, alg) == "" {
				fits = append(fits, k)
			}
		}
		switch len(fits) {
		case 1:
			return fits[0], s.gen, nil
		case 0:
			return nil, 0, refuse(MethodJWT, "JWT has no kid and the issuer has no %s key", alg)
		default:
			return nil, 0, refuse(MethodJWT, "JWT has no kid and the issuer has %d %s keys", len(fits), alg)
		}
	}
	cands := s.byKid[kid]
	if len(cands) == 0 {
		return nil, 0, refuse(MethodJWT, "JWT key id %s is not one of the issuer's keys", quote(kid))
	}
	why := ""
	for _, k := range cands {
		if why = keyFits(k, alg); why == "" {
			return k, s.gen, nil
		}
	}
	return nil, 0, refuse(MethodJWT, "JWT key %s %s", quote(kid), why)
}

// keyFits returns why k cannot verify alg, or "" when it can: the key's
// type (and curve) must be the algorithm's, and a key that names its
// algorithm must name this one.
func keyFits(k *verifyKey, alg string) string {
	if k.alg != "" && k.alg != alg {
		return fmt.Sprintf("is for %s, not %s", quote(k.alg), alg)
	}
	switch pub := k.pub.(type) {
	case *rsa.PublicKey:
		if strings.HasPrefix(alg, "RS") || strings.HasPrefix(alg, "PS") {
			return ""
		}
		return "is an RSA key and cannot verify " + alg
	case *ecdsa.PublicKey:
		want := map[string]string{"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}[alg]
		if want == "" {
			return "is an EC key and cannot verify " + alg
		}
		if pub.Curve.Params().Name != want {
			return fmt.Sprintf("is on curve %s, not the %s of %s", pub.Curve.Params().Name, want, alg)
		}
		return ""
	case ed25519.PublicKey:
		if alg == "EdDSA" {
			return ""
		}
		return "is an Ed25519 key and cannot verify " + alg
	default:
		return "is of an unsupported type"
	}
}

// validationError says which time, issuer or audience check failed.
func (v *jwtVerifier) validationError(tok jwt.Token, err error) *Error {
	const ts = time.RFC3339
	switch {
	case errors.Is(err, jwt.TokenExpiredError()):
		exp, _ := tok.Expiration()
		return expired("token expired at %s", exp.UTC().Format(ts))
	case errors.Is(err, jwt.TokenNotYetValidError()):
		nbf, _ := tok.NotBefore()
		return expired("token is not valid before %s", nbf.UTC().Format(ts))
	case errors.Is(err, jwt.InvalidIssuedAtError()):
		iat, _ := tok.IssuedAt()
		return expired("token is issued in the future, at %s", iat.UTC().Format(ts))
	case errors.Is(err, jwt.InvalidIssuerError()):
		iss, _ := tok.Issuer()
		return refuse(MethodJWT, "issuer %s is not %s", quote(iss), quote(v.cfg.Issuer))
	case errors.Is(err, jwt.InvalidAudienceError()):
		return refuse(MethodJWT, "audience does not include %s", quote(v.cfg.Audience))
	case errors.Is(err, jwt.MissingRequiredClaimError()):
		return refuse(MethodJWT, "token has no expiry (exp)")
	default:
		return refuse(MethodJWT, "token claims are not valid")
	}
}

// decodeClaims decodes a verified payload as a JSON object.
func decodeClaims(payload string) (map[string]any, error) {
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return nil, err
	}
	var claims map[string]any
	if err := json.Unmarshal(b, &claims); err != nil {
		return nil, err
	}
	if claims == nil {
		return nil, errors.New("claims are null")
	}
	return claims, nil
}

// principal reads the principal, tenant and roles claims.
func (v *jwtVerifier) principal(claims map[string]any) (*Principal, *Error) {
	id, ok := claims[v.cfg.PrincipalClaim].(string)
	if !ok || id == "" {
		return nil, refuse(MethodJWT, "JWT has no string %s claim naming the caller", quote(v.cfg.PrincipalClaim))
	}
	if len(id) > maxClaimLen {
		return nil, refuse(MethodJWT, "JWT claim %s is longer than %d bytes", quote(v.cfg.PrincipalClaim), maxClaimLen)
	}
	p := &Principal{ID: id, Claims: claims, Method: MethodJWT}
	if t, present := claims[v.cfg.TenantClaim]; present {
		s, ok := t.(string)
		if !ok || len(s) > maxClaimLen {
			return nil, refuse(MethodJWT, "JWT claim %s is not a string of at most %d bytes", quote(v.cfg.TenantClaim), maxClaimLen)
		}
		p.Tenant = s
	}
	switch r := claims[v.cfg.RolesClaim].(type) {
	case nil:
	case string:
		p.Roles = strings.Fields(r)
	case []any:
		p.Roles = make([]string, 0, len(r))
		for _, e := range r {
			s, ok := e.(string)
			if !ok || s == "" {
				return nil, refuse(MethodJWT, "JWT claim %s is not a list of strings", quote(v.cfg.RolesClaim))
			}
			p.Roles = append(p.Roles, s)
		}
	default:
		return nil, refuse(MethodJWT, "JWT claim %s is neither a string nor a list of strings", quote(v.cfg.RolesClaim))
	}
	if len(p.Roles) > maxRoles {
		return nil, refuse(MethodJWT, "JWT claim %s has more than %d roles", quote(v.cfg.RolesClaim), maxRoles)
	}
	return p, nil
}
