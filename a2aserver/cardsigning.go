package a2aserver

import (
	"fmt"

	"github.com/lestrrat-go/jwx/v3/jwk"

	"github.com/orchd/orchd/internal/limitedfile"
)

// maxSigningKeyBytes bounds the signing key file.
const maxSigningKeyBytes = 64 << 10

// loadSigningKey reads the private key orchd signs its card with: PEM
// (PKCS #1, PKCS #8 or SEC 1) or a JWK in JSON, given kid when not empty.
// It returns nil when no key is configured.
func loadSigningKey(cfg AgentConfig) (jwk.Key, error) {
	if cfg.SigningKey == "" {
		return nil, nil
	}
	b, err := limitedfile.Read(cfg.SigningKey, maxSigningKeyBytes)
	if err != nil {
		return nil, fmt.Errorf("agent.signingKey: %w", err)
	}
	key, err := jwk.ParseKey(b, jwk.WithPEM(true))
	if err != nil {
		if key, err = jwk.ParseKey(b); err != nil {
			return nil, fmt.Errorf("agent.signingKey %s: neither a PEM private key nor a JWK", cfg.SigningKey)
		}
	}
	if private, err := jwk.IsPrivateKey(key); err != nil || !private {
		return nil, fmt.Errorf("agent.signingKey %s: want a private key (RSA, EC or Ed25519)", cfg.SigningKey)
	}
	if cfg.SigningKeyID != "" {
		if err := key.Set(jwk.KeyIDKey, cfg.SigningKeyID); err != nil {
			return nil, fmt.Errorf("agent.signingKeyID: %w", err)
		}
	}
	return key, nil
}
