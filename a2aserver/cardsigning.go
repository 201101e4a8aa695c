package a2aserver

import (
	"fmt"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/orchd/orchd/internal/limitedfile"
)

// maxSigningKeyBytes bounds the signing key file.
const maxSigningKeyBytes = 64 << 10

// LoadSigningKey reads the private key orchd signs its card with from the
// file at path (agent.signingKey): PEM (PKCS #1, PKCS #8 or SEC 1) or a
// JWK in JSON, given kid (agent.signingKeyID) when not empty. It returns
// nil when path is empty.
func LoadSigningKey(path, kid string) (jwk.Key, error) {
	if path == "" {
		return nil, nil
	}
	b, err := limitedfile.Read(path, maxSigningKeyBytes)
	if err != nil {
		return nil, fmt.Errorf("agent.signingKey: %w", err)
	}
	key, err := jwk.ParseKey(b, jwk.WithPEM(true))
	if err != nil {
		if key, err = jwk.ParseKey(b); err != nil {
			return nil, fmt.Errorf("agent.signingKey %s: neither a PEM private key nor a JWK", path)
		}
	}
	if private, err := jwk.IsPrivateKey(key); err != nil || !private {
		return nil, fmt.Errorf("agent.signingKey %s: want a private key (RSA, EC or Ed25519)", path)
	}
	if kid != "" {
		if err := key.Set(jwk.KeyIDKey, kid); err != nil {
			return nil, fmt.Errorf("agent.signingKeyID: %w", err)
		}
	}
	return key, nil
}
