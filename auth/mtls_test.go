package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA is a certificate authority generated in the test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key}
}

// pemFile writes the CA certificate to a file in dir.
func (ca *testCA) pemFile(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: ca.cert.Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// client issues a client certificate with the given common name and URI SANs.
func (ca *testCA) client(t testing.TB, cn string, uris ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, s := range uris {
		u, err := url.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = append(tmpl.URIs, u)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// TestAuthenticator_MTLS serves HTTPS with ServerTLS and calls it with
// client certificates from the configured CA and from another.
func TestAuthenticator_MTLS(t *testing.T) {
	t.Parallel()
	ca, other := newTestCA(t, "orchd clients"), newTestCA(t, "someone else")
	a := started(t, Config{
		Tokens: []TokenConfig{{SHA256: sha256Hex("tok"), Principal: "alice"}},
		MTLS: &MTLSConfig{
			ClientCAFile: ca.pemFile(t, t.TempDir()),
			Tenants:      map[string]string{"spiffe://acme.example/agent/research": "acme"},
			Roles:        map[string][]string{"spiffe://acme.example/agent/research": {"peer"}},
		},
	}, Options{})

	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		switch {
		case err != nil:
			http.Error(w, err.Error(), http.StatusUnauthorized)
		case p == nil:
			w.WriteHeader(http.StatusNoContent)
		default:
			_ = json.NewEncoder(w).Encode(p)
		}
	}))
	srv.TLS = a.ServerTLS(nil)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	if srv.TLS.ClientAuth != tls.VerifyClientCertIfGiven {
		t.Errorf("ClientAuth = %v, want VerifyClientCertIfGiven", srv.TLS.ClientAuth)
	}

	clientWith := func(certs ...tls.Certificate) *http.Client {
		tr := srv.Client().Transport.(*http.Transport).Clone()
		tr.TLSClientConfig.Certificates = certs
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}

	cases := []struct {
		name    string
		certs   []tls.Certificate
		headers map[string]string
		status  int
		body    string
	}{
		{"SPIFFE ID", []tls.Certificate{ca.client(t, "research", "spiffe://acme.example/agent/research")}, nil, 200, `"id":"spiffe://acme.example/agent/research","tenant":"acme","roles":["peer"]`},
		{"common name", []tls.Certificate{ca.client(t, "billing-agent", "https://billing.example")}, nil, 200, `"id":"billing-agent"`},
		{"method", []tls.Certificate{ca.client(t, "x")}, nil, 200, `"method":"mtls"`},
		{"two SPIFFE IDs", []tls.Certificate{ca.client(t, "x", "spiffe://a.example/x", "spiffe://b.example/y")}, nil, 401, "2 SPIFFE IDs"},
		{"no name", []tls.Certificate{ca.client(t, "")}, nil, 401, "neither a SPIFFE ID nor a subject common name"},
		{"no certificate", nil, nil, 204, ""},
		{"token without certificate", nil, map[string]string{"Authorization": "Bearer tok"}, 200, `"id":"alice","method":"token"`},
		{"token over a certificate", []tls.Certificate{ca.client(t, "x")}, map[string]string{"Authorization": "Bearer tok"}, 200, `"id":"alice"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := call(t, clientWith(tc.certs...), srv.URL, tc.headers)
			if status != tc.status || !strings.Contains(body, tc.body) {
				t.Errorf("got %d %q, want %d containing %q", status, body, tc.status, tc.body)
			}
		})
	}

	t.Run("certificate from another CA", func(t *testing.T) {
		// Go's client would not send a certificate the server's list of
		// acceptable CAs does not cover; this one insists.
		forged := other.client(t, "mallory", "spiffe://acme.example/agent/research")
		c := clientWith()
		c.Transport.(*http.Transport).TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return &forged, nil
		}
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL, nil)
		resp, err := c.Do(req)
		if err == nil {
			resp.Body.Close()
			t.Fatalf("TLS accepted a certificate from another CA: status %d", resp.StatusCode)
		}
		if !strings.Contains(err.Error(), "tls") {
			t.Errorf("err = %v, want a TLS handshake failure", err)
		}
	})
}

// TestAuthenticator_AuthenticateTLS checks the chain again: a chain verified
// against some other pool (a server configured elsewhere) is refused.
func TestAuthenticator_AuthenticateTLS(t *testing.T) {
	t.Parallel()
	ca, other := newTestCA(t, "orchd clients"), newTestCA(t, "someone else")
	a, err := New(Config{MTLS: &MTLSConfig{ClientCAFile: ca.pemFile(t, t.TempDir())}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	good, bad := ca.client(t, "ok"), other.client(t, "mallory")
	cases := []struct {
		name   string
		cs     *tls.ConnectionState
		want   string
		reason string
	}{
		{"verified against the CA", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{good.Leaf}, VerifiedChains: [][]*x509.Certificate{{good.Leaf, ca.cert}}}, "ok", ""},
		{"verified against another pool", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{bad.Leaf}, VerifiedChains: [][]*x509.Certificate{{bad.Leaf, other.cert}}}, "", "not verified against the configured client CA"},
		{"not verified at all", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{good.Leaf}}, "", "not verified"},
		{"no certificate", &tls.ConnectionState{}, "", ""},
		{"no TLS", nil, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.AuthenticateTLS(tc.cs)
			switch {
			case tc.reason != "":
				refusal(t, p, err, ErrInvalidCredentials, tc.reason, "")
			case tc.want == "":
				if p != nil || err != nil {
					t.Errorf("got %v, %v; want no principal and no error", p, err)
				}
			case err != nil || p.ID != tc.want:
				t.Errorf("got %v, %v; want %s", p, err, tc.want)
			}
		})
	}
}

func TestAuthenticator_ServerTLS(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t, "c")
	a, err := New(Config{MTLS: &MTLSConfig{ClientCAFile: ca.pemFile(t, t.TempDir())}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: "orchd"}
	c := a.ServerTLS(base)
	if c == base || c.ClientCAs == nil || c.ClientAuth != tls.VerifyClientCertIfGiven || c.MinVersion != tls.VersionTLS13 || c.ServerName != "orchd" {
		t.Errorf("ServerTLS(base) = %+v", c)
	}
	if base.ClientCAs != nil {
		t.Error("ServerTLS changed base")
	}
	strict := a.ServerTLS(&tls.Config{ClientAuth: tls.RequireAndVerifyClientCert})
	if strict.ClientAuth != tls.RequireAndVerifyClientCert {
		t.Error("ServerTLS weakened RequireAndVerifyClientCert")
	}
	none, _ := New(Config{}, Options{})
	if c := none.ServerTLS(base); c.ClientCAs != nil || c.ClientAuth != tls.NoClientCert {
		t.Errorf("without mTLS ServerTLS changed client auth: %+v", c)
	}
}
