package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/orchd/orchd/internal/limitedfile"
)

// Bounds on pinned card key files and fetched key sets.
const (
	// maxKeyBytes bounds one key file or fetched JWKS.
	maxKeyBytes = 256 << 10
	// maxKeysPerSource bounds the keys one file or JWKS may hold.
	maxKeysPerSource = 64
)

// loadCardKeys reads an agent's pinned card keys (Spec.CardKeys): each path
// names a PEM file (public keys or certificates; a private key stands for
// its public half) or a JWKS or single JWK in JSON. Keys are read afresh
// on every verification, so replacing a file rotates the key. Errors name
// the file but never quote its content, which may hold a private key.
func loadCardKeys(paths []string) (jwk.Set, error) {
	if len(paths) == 0 {
		return nil, nil
	}
	set := jwk.NewSet()
	for _, path := range paths {
		b, err := limitedfile.Read(path, maxKeyBytes)
		if err != nil {
			return nil, fmt.Errorf("card key file %s: %w", path, err)
		}
		keys, err := parseKeys(b)
		if err != nil {
			return nil, fmt.Errorf("card key file %s: %w", path, err)
		}
		for i := range keys.Len() {
			k, _ := keys.Key(i)
			if err := set.AddKey(k); err != nil {
				return nil, fmt.Errorf("card key file %s: key %d: %w", path, i+1, err)
			}
		}
	}
	return set, nil
}

// parseKeys reads PEM or JSON (a JWKS or one JWK) and returns the public
// keys, refusing symmetric ones, which cannot vouch for a signer.
func parseKeys(b []byte) (jwk.Set, error) {
	trimmed := bytes.TrimSpace(b)
	var set jwk.Set
	var err error
	switch {
	case bytes.HasPrefix(trimmed, []byte("-----BEGIN")):
		set, err = jwk.Parse(trimmed, jwk.WithPEM(true))
		if err != nil {
			return nil, errors.New("not a PEM public key or certificate")
		}
	case json.Valid(trimmed):
		set, err = jwk.Parse(trimmed)
		if err != nil {
			return nil, errors.New("not a JWKS or JWK")
		}
	default:
		return nil, errors.New("neither PEM nor JSON (a JWKS)")
	}
	if set.Len() == 0 {
		return nil, errors.New("holds no key")
	}
	if set.Len() > maxKeysPerSource {
		return nil, fmt.Errorf("holds %d keys, more than %d", set.Len(), maxKeysPerSource)
	}
	out := jwk.NewSet()
	for i := range set.Len() {
		k, _ := set.Key(i)
		if _, ok := k.(jwk.SymmetricKey); ok {
			return nil, fmt.Errorf("key %d is symmetric; card signatures need public keys", i+1)
		}
		pub, err := jwk.PublicKeyOf(k)
		if err != nil {
			return nil, fmt.Errorf("key %d: no public key", i+1)
		}
		if err := out.AddKey(pub); err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
	}
	return out, nil
}
