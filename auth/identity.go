package auth

import "strings"

// Identity is who a caller is, without ambiguity: the same id means
// different callers when a different method or issuer vouched for it. A
// JWT whose sub is "alice" is not the static token of principal "alice",
// and tokens of two JWT issuers are not each other's. Owners of work are
// compared as Identities, never as bare ids (docs/security.md).
type Identity struct {
	// Method is how the caller was authenticated: MethodToken, MethodJWT,
	// MethodMTLS, or a method of the caller's own meaning, such as
	// orchd's "peer" for a root caller a trusted orchd vouched for.
	Method string
	// Issuer is who vouched for the id when that is not this process:
	// the JWT issuer (claim iss) for MethodJWT; empty for static tokens
	// and client certificates, which this process's configuration
	// vouches for.
	Issuer string
	// ID is the principal's id, as Principal.ID.
	ID string
	// Tenant is the principal's tenant; "" when it has none.
	Tenant string
}

// Identity returns the principal's identity: its method, the issuer of a
// JWT (its verified iss claim), its id and tenant.
func (p *Principal) Identity() Identity {
	id := Identity{Method: p.Method, ID: p.ID, Tenant: p.Tenant}
	if p.Method == MethodJWT {
		id.Issuer, _ = p.Claims["iss"].(string)
	}
	return id
}

// Key encodes the identity as one string, so that two identities have the
// same key exactly when they are equal: method ":" [issuer "#"] id
// ["@" tenant], with "%", and each separator that could be read as
// ending a part, escaped in that part as %XX: ":" in the method, "#" in
// the issuer, id and tenant, "@" in the id. The "#" appears only with an
// issuer, the "@" only with a tenant. For example "token:alice@acme",
// "jwt:https://idp.example.com#alice@acme",
// "mtls:spiffe://acme.example/agent/reporter".
func (i Identity) Key() string {
	var b strings.Builder
	b.Grow(len(i.Method) + len(i.Issuer) + len(i.ID) + len(i.Tenant) + 3)
	escapeTo(&b, i.Method, ":")
	b.WriteByte(':')
	if i.Issuer != "" {
		escapeTo(&b, i.Issuer, "#")
		b.WriteByte('#')
	}
	escapeTo(&b, i.ID, "#@")
	if i.Tenant != "" {
		b.WriteByte('@')
		escapeTo(&b, i.Tenant, "#")
	}
	return b.String()
}

// escapeTo writes s to b with "%" and every byte of special written as
// "%" and two upper-case hex digits.
func escapeTo(b *strings.Builder, s, special string) {
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '%' || strings.IndexByte(special, c) >= 0 {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xF])
			continue
		}
		b.WriteByte(c)
	}
}
