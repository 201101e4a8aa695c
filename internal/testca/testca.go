// Package testca is a certificate authority made in a test, for tests of
// mutual TLS: it issues ECDSA P-256 server certificates for 127.0.0.1 and
// client certificates with URI SANs, valid for an hour either side of
// now, so a test runs real TLS handshakes on loopback without fixtures on
// disk that expire.
package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a self-signed certificate authority whose key lives only in
// memory for the test that made it. It is safe for concurrent use: it is
// never changed after New.
type CA struct {
	// Cert is the CA's certificate, for a test's x509.CertPool or a
	// verified chain.
	Cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

// Leaf is a certificate the CA issued, with its private key, both as PEM
// (for files a config names) and as a tls.Certificate with Leaf parsed
// (for a tls.Config).
type Leaf struct {
	// CertPEM is the certificate as a PEM CERTIFICATE block.
	CertPEM []byte
	// KeyPEM is the private key as a PEM PKCS #8 PRIVATE KEY block.
	KeyPEM []byte
	// TLS is the certificate and key ready for tls.Config.Certificates.
	TLS tls.Certificate
}

// New returns a CA whose subject common name is name. It fails the test
// if the key or the certificate cannot be made.
func New(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testca: CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testca: CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testca: CA certificate: %v", err)
	}
	return &CA{Cert: cert, key: key}
}

// PEM returns the CA certificate as a PEM CERTIFICATE block, what a
// config's CA file holds.
func (ca *CA) PEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.Cert.Raw})
}

// WriteFile writes the CA certificate as PEM to ca.pem in dir, replacing
// any file of that name, and returns its path. It fails the test if the
// file cannot be written.
func (ca *CA) WriteFile(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(path, ca.PEM(), 0o600); err != nil {
		t.Fatalf("testca: %v", err)
	}
	return path
}

// Client issues a client certificate (extended key usage client auth)
// with common name cn, which may be empty, and a URI SAN for each of
// uris. It fails the test if a URI does not parse.
func (ca *CA) Client(t testing.TB, cn string, uris ...string) Leaf {
	t.Helper()
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatalf("testca: URI SAN: %v", err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	return ca.issue(t, tmpl)
}

// Server issues a server certificate (extended key usage server auth)
// with common name cn and the IP SAN 127.0.0.1, for an httptest server
// on loopback.
func (ca *CA) Server(t testing.TB, cn string) Leaf {
	t.Helper()
	return ca.issue(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
}

// issue signs tmpl, with a random serial number and an hour's validity
// either side of now filled in, for a new P-256 key.
func (ca *CA) issue(t testing.TB, tmpl *x509.Certificate) Leaf {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testca: key: %v", err)
	}
	tmpl.SerialNumber = serial(t)
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("testca: certificate: %v", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testca: certificate: %v", err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testca: key: %v", err)
	}
	return Leaf{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb}),
		TLS:     tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf},
	}
}

// serial returns a random serial number from 1 to 2^127, so no two
// certificates a test makes share one.
func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("testca: serial number: %v", err)
	}
	return n.Add(n, big.NewInt(1))
}
