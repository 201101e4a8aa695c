package auth

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/testca"
)

// TestAuthenticator_MTLS serves HTTPS with ServerTLS and calls it with
// client certificates from the configured CA and from another.
func TestAuthenticator_MTLS(t *testing.T) {
	t.Parallel()
	ca, other := testca.New(t, "orchd clients"), testca.New(t, "someone else")
	a := started(t, Config{
		Tokens: []TokenConfig{{SHA256: sha256Hex("tok"), Principal: "alice"}},
		MTLS: &MTLSConfig{
			ClientCAFile: ca.WriteFile(t, t.TempDir()),
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
		{"SPIFFE ID", []tls.Certificate{ca.Client(t, "research", "spiffe://acme.example/agent/research").TLS}, nil, 200, `"id":"spiffe://acme.example/agent/research","tenant":"acme","roles":["peer"]`},
		{"common name", []tls.Certificate{ca.Client(t, "billing-agent", "https://billing.example").TLS}, nil, 200, `"id":"billing-agent"`},
		{"method", []tls.Certificate{ca.Client(t, "x").TLS}, nil, 200, `"method":"mtls"`},
		{"two SPIFFE IDs", []tls.Certificate{ca.Client(t, "x", "spiffe://a.example/x", "spiffe://b.example/y").TLS}, nil, 401, "2 SPIFFE IDs"},
		{"no name", []tls.Certificate{ca.Client(t, "").TLS}, nil, 401, "neither a SPIFFE ID nor a subject common name"},
		{"no certificate", nil, nil, 204, ""},
		{"token without certificate", nil, map[string]string{"Authorization": "Bearer tok"}, 200, `"id":"alice","method":"token"`},
		{"token over a certificate", []tls.Certificate{ca.Client(t, "x").TLS}, map[string]string{"Authorization": "Bearer tok"}, 200, `"id":"alice"`},
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
		forged := other.Client(t, "mallory", "spiffe://acme.example/agent/research").TLS
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
	ca, other := testca.New(t, "orchd clients"), testca.New(t, "someone else")
	a, err := New(Config{MTLS: &MTLSConfig{ClientCAFile: ca.WriteFile(t, t.TempDir())}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	good, bad := ca.Client(t, "ok").TLS, other.Client(t, "mallory").TLS
	cases := []struct {
		name   string
		cs     *tls.ConnectionState
		want   string
		reason string
	}{
		{"verified against the CA", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{good.Leaf}, VerifiedChains: [][]*x509.Certificate{{good.Leaf, ca.Cert}}}, "ok", ""},
		{"verified against another pool", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{bad.Leaf}, VerifiedChains: [][]*x509.Certificate{{bad.Leaf, other.Cert}}}, "", "not verified against the configured client CA"},
		{"not verified at all", &tls.ConnectionState{PeerCertificates: []*x509.Certificate{good.Leaf}}, "", "not verified"},
		{"no certificate", &tls.ConnectionState{}, "", ""},
		{"no TLS", nil, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := a.AuthenticateTLS(tc.cs)
			switch {
			case tc.reason != "":
				_ = refusal(t, p, err, ErrInvalidCredentials, tc.reason, "")
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
	ca := testca.New(t, "c")
	a, err := New(Config{MTLS: &MTLSConfig{ClientCAFile: ca.WriteFile(t, t.TempDir())}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	base := &tls.Config{MinVersion: tls.VersionTLS13, ServerName: "orchd"}
	c := a.ServerTLS(base)
	if c == base {
		t.Fatal("ServerTLS(base) returned base itself, not a copy")
	}
	if c.ClientCAs == nil {
		t.Error("ServerTLS(base) has no client CAs")
	}
	type kept struct {
		ClientAuth tls.ClientAuthType
		MinVersion uint16
		ServerName string
	}
	if diff := cmp.Diff(kept{tls.VerifyClientCertIfGiven, tls.VersionTLS13, "orchd"}, kept{c.ClientAuth, c.MinVersion, c.ServerName}); diff != "" {
		t.Errorf("ServerTLS(base) (-want +got):\n%s", diff)
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
