package auth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/orchd/orchd/internal/limitedfile"
)

// maxCAFileSize bounds the client CA file.
const maxCAFileSize = 1 << 20

// mtlsVerifier turns verified client certificates into principals.
type mtlsVerifier struct {
	pool    *x509.CertPool
	cas     []*x509.Certificate
	tenants map[string]string
	roles   map[string][]string
}

// newMTLSVerifier reads the client CA file of cfg.
func newMTLSVerifier(cfg MTLSConfig) (*mtlsVerifier, error) {
	data, err := limitedfile.Read(cfg.ClientCAFile, maxCAFileSize)
	if err != nil {
		return nil, fmt.Errorf("mtls.clientCAFile: %w", err)
	}
	m := &mtlsVerifier{pool: x509.NewCertPool(), tenants: cfg.Tenants, roles: cfg.Roles}
	for rest := data; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("mtls.clientCAFile %s: %w", cfg.ClientCAFile, err)
		}
		m.pool.AddCert(c)
		m.cas = append(m.cas, c)
	}
	if len(m.cas) == 0 {
		return nil, fmt.Errorf("mtls.clientCAFile %s holds no PEM CERTIFICATE", cfg.ClientCAFile)
	}
	return m, nil
}

// serverTLS returns base (or a new config) requesting client certificates
// and verifying those given against the client CAs.
func (m *mtlsVerifier) serverTLS(base *tls.Config) *tls.Config {
	var c *tls.Config
	if base != nil {
		c = base.Clone()
	} else {
		c = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	c.ClientCAs = m.pool
	if c.ClientAuth < tls.VerifyClientCertIfGiven {
		c.ClientAuth = tls.VerifyClientCertIfGiven
	}
	return c
}

// principal returns the principal of the connection's client certificate,
// or nil when none was presented.
func (m *mtlsVerifier) principal(cs *tls.ConnectionState) (*Principal, error) {
	if cs == nil || len(cs.PeerCertificates) == 0 {
		return nil, nil
	}
	if !m.trusted(cs.VerifiedChains) {
		return nil, refuse(MethodMTLS, "client certificate is not verified against the configured client CA")
	}
	leaf := cs.PeerCertificates[0]
	id, err := certificateID(leaf)
	if err != nil {
		return nil, err
	}
	p := &Principal{
		ID:     id,
		Tenant: m.tenants[id],
		Roles:  slices.Clone(m.roles[id]),
		Method: MethodMTLS,
		Claims: map[string]any{
			"sub":    leaf.Subject.String(),
			"iss":    leaf.Issuer.String(),
			"serial": leaf.SerialNumber.String(),
		},
	}
	return p, nil
}

// trusted reports whether one of chains ends at a configured client CA: the
// handshake verified the chain, and this checks it was against our pool and
// not one the server was given elsewhere.
func (m *mtlsVerifier) trusted(chains [][]*x509.Certificate) bool {
	for _, ch := range chains {
		if len(ch) == 0 {
			continue
		}
		root := ch[len(ch)-1]
		for _, ca := range m.cas {
			if root.Equal(ca) {
				return true
			}
		}
	}
	return false
}

// certificateID is the certificate's SPIFFE ID (its one spiffe:// URI SAN),
// else its subject common name.
func certificateID(c *x509.Certificate) (string, *Error) {
	var spiffe []*url.URL
	for _, u := range c.URIs {
		if strings.EqualFold(u.Scheme, "spiffe") {
			spiffe = append(spiffe, u)
		}
	}
	switch len(spiffe) {
	case 0:
	case 1:
		u := spiffe[0]
		if u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || len(u.String()) > 2048 {
			return "", refuse(MethodMTLS, "client certificate's SPIFFE ID is not valid")
		}
		return u.String(), nil
	default:
		return "", refuse(MethodMTLS, "client certificate has %d SPIFFE IDs, not one", len(spiffe))
	}
	if cn := c.Subject.CommonName; cn != "" {
		if len(cn) > maxClaimLen {
			return "", refuse(MethodMTLS, "client certificate's common name is longer than %d bytes", maxClaimLen)
		}
		return cn, nil
	}
	return "", refuse(MethodMTLS, "client certificate has neither a SPIFFE ID nor a subject common name")
}
