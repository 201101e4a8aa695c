package testca

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"testing"
)

// TestCA_Leaves checks each kind of leaf verifies against its CA, and only
// its CA, for its own use, and that the PEM and TLS forms agree.
func TestCA_Leaves(t *testing.T) {
	t.Parallel()
	ca, other := New(t, "test CA"), New(t, "other CA")
	tests := []struct {
		name  string
		leaf  Leaf
		usage x509.ExtKeyUsage
		check func(*x509.Certificate) bool
	}{
		{"client", ca.Client(t, "orchd", "spiffe://acme.example/agent/a"), x509.ExtKeyUsageClientAuth, func(c *x509.Certificate) bool {
			return c.Subject.CommonName == "orchd" && len(c.URIs) == 1 && c.URIs[0].String() == "spiffe://acme.example/agent/a"
		}},
		{"server", ca.Server(t, "agent"), x509.ExtKeyUsageServerAuth, func(c *x509.Certificate) bool {
			return c.Subject.CommonName == "agent" && len(c.IPAddresses) == 1 && c.IPAddresses[0].Equal(net.IPv4(127, 0, 0, 1))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			pair, err := tls.X509KeyPair(tt.leaf.CertPEM, tt.leaf.KeyPEM)
			if err != nil {
				t.Fatalf("X509KeyPair: %v", err)
			}
			cert := tt.leaf.TLS.Leaf
			if cert == nil || string(pair.Certificate[0]) != string(cert.Raw) {
				t.Fatal("the PEM and TLS forms hold different certificates")
			}
			if !tt.check(cert) {
				t.Errorf("certificate %+v has the wrong names", cert)
			}
			for _, c := range []struct {
				ca *CA
				ok bool
			}{{ca, true}, {other, false}} {
				roots := x509.NewCertPool()
				roots.AddCert(c.ca.Cert)
				_, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{tt.usage}})
				if (err == nil) != c.ok {
					t.Errorf("Verify against %s = %v, want ok %v", c.ca.Cert.Subject.CommonName, err, c.ok)
				}
			}
		})
	}
}

// TestCA_Serials checks no two certificates share a serial number.
func TestCA_Serials(t *testing.T) {
	t.Parallel()
	ca := New(t, "test CA")
	seen := map[string]bool{ca.Cert.SerialNumber.String(): true}
	for range 50 {
		s := ca.Client(t, "x").TLS.Leaf.SerialNumber
		if s.Sign() <= 0 || seen[s.String()] {
			t.Fatalf("serial %v is not positive or repeats", s)
		}
		seen[s.String()] = true
	}
}

// TestCA_WriteFile checks the file holds the CA certificate as PEM.
func TestCA_WriteFile(t *testing.T) {
	t.Parallel()
	ca := New(t, "test CA")
	b, err := os.ReadFile(ca.WriteFile(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	block, rest := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		t.Fatalf("ca.pem = %q, want a CERTIFICATE block", b)
	}
	if len(rest) != 0 || string(block.Bytes) != string(ca.Cert.Raw) {
		t.Fatalf("ca.pem = %q, want the CA certificate alone", b)
	}
	if string(ca.PEM()) != string(b) {
		t.Error("PEM and the file differ")
	}
}
