package credentials

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"
)

// maxPEMBytes bounds a certificate, key or CA file.
const maxPEMBytes = 1 << 20

// certSource loads a TLS client certificate and key, and reloads them when
// either file's modification time or size changes (checked at most once
// a second), so a renewed certificate is presented without a restart.
type certSource struct {
	certFile, keyFile string
	now               func() time.Time

	mu      sync.Mutex
	cert    *tls.Certificate
	stamp   [2]fileStamp
	checked time.Time
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// Format names the files and never shows the key.
func (c *certSource) Format(f fmt.State, _ rune) {
	_, _ = io.WriteString(f, "TLS client certificate "+c.certFile)
}

// get returns the current certificate, for tls.Config.GetClientCertificate.
func (c *certSource) get(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	if c.cert != nil && now.Sub(c.checked) < statEvery && !now.Before(c.checked) {
		return c.cert, nil
	}
	var stamp [2]fileStamp
	for i, name := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(name)
		if err != nil {
			return nil, fmt.Errorf("TLS client certificate: %w", err)
		}
		if fi.Size() > maxPEMBytes {
			return nil, fmt.Errorf("TLS client certificate: %s is %d bytes, more than the limit of %d", name, fi.Size(), maxPEMBytes)
		}
		stamp[i] = fileStamp{fi.ModTime(), fi.Size()}
	}
	c.checked = now
	if c.cert != nil && stamp == c.stamp {
		return c.cert, nil
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		// LoadX509KeyPair names what is wrong, never the key's content.
		return nil, fmt.Errorf("TLS client certificate %s: %w", c.certFile, err)
	}
	c.cert, c.stamp = &cert, stamp
	return c.cert, nil
}

// loadCAs reads a PEM CA bundle.
func loadCAs(file string) (*x509.CertPool, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("tls.caFile: %w", err)
	}
	if fi.Size() > maxPEMBytes {
		return nil, fmt.Errorf("tls.caFile: %s is %d bytes, more than the limit of %d", file, fi.Size(), maxPEMBytes)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls.caFile: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("tls.caFile: %s holds no PEM certificate", file)
	}
	return pool, nil
}

// tlsTransport clones base, which must be an *http.Transport (the guarded
// transport from registry.NewTransport, so its dialer and its SSRF rules
// carry over), with the TLS settings of t.
func tlsTransport(base http.RoundTripper, t *TLS, now func() time.Time) (*http.Transport, error) {
	ht, ok := base.(*http.Transport)
	if !ok {
		return nil, errors.New("tls: a client certificate or CA needs the base transport to be an *http.Transport, got another RoundTripper")
	}
	clone := ht.Clone()
	if clone.TLSClientConfig == nil {
		clone.TLSClientConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if t.CAFile != "" {
		pool, err := loadCAs(t.CAFile)
		if err != nil {
			return nil, err
		}
		clone.TLSClientConfig.RootCAs = pool
	}
	if t.CertFile != "" {
		cs := &certSource{certFile: t.CertFile, keyFile: t.KeyFile, now: now}
		if _, err := cs.get(nil); err != nil {
			return nil, err
		}
		clone.TLSClientConfig.GetClientCertificate = cs.get
	}
	return clone, nil
}
