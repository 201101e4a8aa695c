package orchestrator

import (
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/orchd/orchd/httpgate"
)

// HTTPConfig is the config file's http section: the limits on what a
// client may send to any of orchd's endpoints, the A2A interfaces and the
// HTTP API alike. A zero field means its default; docs/api.md lists them.
type HTTPConfig struct {
	// MaxBodyBytes bounds an A2A request body (every A2A interface). A
	// larger one is refused before it is read. Default 8 MiB.
	MaxBodyBytes int64 `yaml:"maxBodyBytes"`
	// MaxAPIBodyBytes bounds an HTTP API request body (/v1/...). Default
	// 64 KiB.
	MaxAPIBodyBytes int64 `yaml:"maxAPIBodyBytes"`
	// MaxJSONDepth bounds how deeply a request body's JSON objects and
	// arrays nest, checked before the body is decoded. Default 64.
	MaxJSONDepth int `yaml:"maxJSONDepth"`
	// MaxBufferedBodyBytes bounds the request body bytes orchd holds at
	// once, across every request of every endpoint: a body waits for room
	// before it is read, up to ReadTimeout, and is refused as busy (503)
	// past that. Default 32 MiB.
	MaxBufferedBodyBytes int64 `yaml:"maxBufferedBodyBytes"`
	// ReadTimeout bounds reading one request, headers and body, from its
	// first byte. It does not bound the answer: event streams stay open.
	// Headers alone must arrive within 10s of their first byte. Default 30s.
	ReadTimeout Duration `yaml:"readTimeout"`
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request, and a new connection for its first. Default 60s.
	IdleTimeout Duration `yaml:"idleTimeout"`
	// StreamWriteTimeout bounds one write of an event stream (the API's
	// /events, A2A streaming): a client that reads nothing for that long
	// is cut off (httpgate.StreamDeadlines). Default 30s.
	StreamWriteTimeout Duration `yaml:"streamWriteTimeout"`
	// TLS serves HTTPS with this certificate instead of HTTP; auth.mtls
	// needs it.
	TLS *TLSConfig `yaml:"tls"`
	// AllowedHosts lists host names callers reach orchd by, besides IP
	// addresses, localhost and the hosts of listen, agent.url and
	// delegation.pushURL. Requests a browser could send on its own must
	// name one in Host (httpgate.BrowserGuard).
	AllowedHosts []string `yaml:"allowedHosts"`
}

// TLSConfig is the certificate orchd serves HTTPS with.
type TLSConfig struct {
	// CertFile and KeyFile are PEM files: the certificate chain and its
	// private key.
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

// The http section's defaults, used for zero fields.
const (
	defaultMaxBodyBytes    = 8 << 20
	defaultMaxAPIBodyBytes = 64 << 10
	defaultMaxJSONDepth    = 64
	// defaultMaxBufferedBodyBytes holds four bodies of the largest A2A
	// size at once, or thousands of ordinary ones.
	defaultMaxBufferedBodyBytes = 32 << 20
	defaultReadTimeout          = 30 * time.Second
	defaultIdleTimeout          = 60 * time.Second
	defaultStreamWriteTimeout   = 30 * time.Second
	// readHeaderTimeout bounds the arrival of a request's headers, from
	// their first byte.
	readHeaderTimeout = 10 * time.Second
)

// withDefaults returns c with every zero field set to its default.
func (c HTTPConfig) withDefaults() HTTPConfig {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = defaultMaxBodyBytes
	}
	if c.MaxAPIBodyBytes == 0 {
		c.MaxAPIBodyBytes = defaultMaxAPIBodyBytes
	}
	if c.MaxJSONDepth == 0 {
		c.MaxJSONDepth = defaultMaxJSONDepth
	}
	if c.MaxBufferedBodyBytes == 0 {
		c.MaxBufferedBodyBytes = defaultMaxBufferedBodyBytes
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = Duration(defaultReadTimeout)
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = Duration(defaultIdleTimeout)
	}
	if c.StreamWriteTimeout == 0 {
		c.StreamWriteTimeout = Duration(defaultStreamWriteTimeout)
	}
	return c
}

// validate refuses negative limits: every input has one.
func (c HTTPConfig) validate() error {
	switch {
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("config: http.maxBodyBytes %d: want a positive size in bytes", c.MaxBodyBytes)
	case c.MaxAPIBodyBytes < 0:
		return fmt.Errorf("config: http.maxAPIBodyBytes %d: want a positive size in bytes", c.MaxAPIBodyBytes)
	case c.MaxJSONDepth < 0:
		return fmt.Errorf("config: http.maxJSONDepth %d: want a positive depth", c.MaxJSONDepth)
	case c.StreamWriteTimeout < 0:
		return fmt.Errorf("config: http.streamWriteTimeout %s: want a positive duration", time.Duration(c.StreamWriteTimeout))
	case c.MaxBufferedBodyBytes < 0:
		return fmt.Errorf("config: http.maxBufferedBodyBytes %d: want a positive size in bytes", c.MaxBufferedBodyBytes)
	case c.MaxBufferedBodyBytes > 0 && c.MaxBufferedBodyBytes <= max(c.withDefaults().MaxBodyBytes, c.withDefaults().MaxAPIBodyBytes):
		return fmt.Errorf("config: http.maxBufferedBodyBytes %d is not more than one body may hold (http.maxBodyBytes, http.maxAPIBodyBytes): the largest body could never be read",
			c.MaxBufferedBodyBytes)
	case c.TLS != nil && (c.TLS.CertFile == "" || c.TLS.KeyFile == ""):
		return fmt.Errorf("config: http.tls needs certFile and keyFile")
	}
	for i, h := range c.AllowedHosts {
		if h == "" || strings.ContainsAny(h, ":/*@ ") {
			return fmt.Errorf("config: http.allowedHosts[%d] %q: want a host name, without scheme, port or wildcard", i, h)
		}
	}
	return nil
}

// bodyLimits is the section's bounds on request bodies, its defaults set.
func (c HTTPConfig) bodyLimits() httpgate.Limits {
	c = c.withDefaults()
	return httpgate.Limits{MaxBodyBytes: c.MaxBodyBytes, MaxAPIBodyBytes: c.MaxAPIBodyBytes, MaxJSONDepth: c.MaxJSONDepth,
		MaxBufferedBodyBytes: c.MaxBufferedBodyBytes, ReadTimeout: time.Duration(c.ReadTimeout)}
}

// listener returns ln as the HTTP server is to accept from: a new
// connection is handed over once its first byte arrives, within
// IdleTimeout, so it waits for its first request as long as a kept-alive
// connection waits for its next one (httpgate.AwaitFirstByte), not the
// 10 s the server gives a request's headers.
func (c HTTPConfig) listener(ln net.Listener) net.Listener {
	return httpgate.AwaitFirstByte(ln, time.Duration(c.withDefaults().IdleTimeout))
}

// server returns an HTTP server for handler with the section's timeouts.
// Reading a request is bounded by ReadTimeout, but not its answer: once a
// body has been read to its end, net/http clears the read deadline while
// it watches the connection, so long event streams keep streaming.
func (c HTTPConfig) server(handler http.Handler, log *slog.Logger) *http.Server {
	c = c.withDefaults()
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: min(readHeaderTimeout, time.Duration(c.ReadTimeout)),
		ReadTimeout:       time.Duration(c.ReadTimeout),
		IdleTimeout:       time.Duration(c.IdleTimeout),
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}
