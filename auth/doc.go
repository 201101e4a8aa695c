// Package auth tells orchd who is calling: it turns the credentials an HTTP
// request presents into one [Principal] (id, tenant, roles, claims), or
// refuses them with an [*Error] whose Reason is safe to show the caller.
//
// Three kinds of credential are understood, each enabled by its section of
// [Config]:
//
//   - Static bearer tokens and API keys ("Authorization: Bearer <t>", or the
//     configured API key header). Only their SHA-256 hashes need be
//     configured; a presented token is hashed and compared with every
//     configured hash in constant time. A tokens file is reloaded when it
//     changes; an edit that does not parse keeps the previous set.
//   - JWTs signed by one configured issuer, whose keys come from its JWKS
//     (given directly, or found by OIDC discovery from the issuer). The
//     signature, issuer, audience, expiry, not-before and issued-at are
//     checked, with a bounded clock skew. Keys are cached and refreshed; a
//     token naming an unknown key id triggers one rate-limited refetch, so
//     key rotation at the issuer needs no restart.
//   - mTLS client certificates verified against the configured client CA.
//     The principal is the certificate's SPIFFE ID (a spiffe:// URI SAN),
//     else its subject common name.
//
// # What is trusted, and why
//
// A static token is trusted because whoever holds it was given it by the
// operator: the configuration maps each token to a principal, tenant and
// roles, and nothing the caller sends can change them.
//
// A JWT is trusted only for what its issuer signed. The algorithm is taken
// from the configured allow-list and must match the type of the issuer's key
// named by the token: "alg: none" and every HMAC algorithm (HS256...) are
// always refused, so a token "signed" with the issuer's public key as an HMAC
// secret, or not signed at all, never passes. The issuer and audience must
// be the configured ones, so a token the issuer minted for another service is
// refused. Principal, tenant and roles are read from configured claims of the
// verified token; the unverified header is used only to pick the key.
//
// A client certificate is trusted because the TLS handshake verified its
// chain to the configured client CA (and [Authenticator.AuthenticateTLS]
// checks again that the chain ends there); the CA vouches for the SPIFFE ID or
// common name. Tenants and roles of certificate principals come from the
// configuration, never from the certificate.
//
// Everything else the request carries (headers, A2A metadata, claimed
// tenants) is not credentials and is not trusted by this package.
//
// # Secrets
//
// Tokens never appear in errors, logs or JSON: reasons describe what was wrong
// ("token expired at ...", "audience does not include \"orchd\"") without
// echoing the token. The raw bearer token a caller presented is kept only
// behind [Principal.Token], for forwarding to agents that are configured to
// receive it.
//
// # Lifecycle
//
// [New] validates the configuration and reads the tokens file and client CA;
// [Authenticator.Start] starts the background work (tokens file watch, JWKS
// discovery and refresh), which stops when its context ends or on
// [Authenticator.Close]. A request that presents no credentials at all is
// answered (nil, nil): whether anonymous callers may use a route is the
// caller's decision.
package auth
