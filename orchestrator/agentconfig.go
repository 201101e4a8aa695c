package orchestrator

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/orchd/orchd/a2aserver"
)

// The agent section's gRPC and push parts, as the config file writes
// them, and what they become for the A2A server (a2aserver), where the
// defaults are set.

// GRPCConfig is the agent.grpc section: orchd's A2A interface over gRPC,
// off unless Listen is set (a2aserver.GRPCConfig). It sits under agent,
// beside the card it adds interfaces to, because it is a binding of orchd
// the A2A agent: the HTTP listen address carries the API, the card and
// the HTTP bindings alike, while gRPC needs a port of its own. Zero fields
// take the defaults.
type GRPCConfig struct {
	// Listen is the address gRPC is served on, e.g. 127.0.0.1:9090. Empty
	// (the default) serves no gRPC. As for the HTTP listener, an address
	// beyond loopback needs authentication or --insecure-no-auth. With
	// http.tls set, gRPC is served over TLS with the same certificate, and
	// auth.mtls applies to it.
	Listen string `yaml:"listen"`
	// URL is the interface URL the card lists, host:port as gRPC clients
	// dial it. Empty means agent.url's host and the bound port, else the
	// bound address.
	URL string `yaml:"url"`
	// MaxMessageBytes bounds one message a client sends. Default
	// http.maxBodyBytes (8 MiB).
	MaxMessageBytes int `yaml:"maxMessageBytes"`
	// MaxConnections bounds the connections open at once; more wait to be
	// accepted. Default 1024.
	MaxConnections int `yaml:"maxConnections"`
	// MaxConcurrentStreams bounds the calls in flight on one connection.
	// Default 256.
	MaxConcurrentStreams uint32 `yaml:"maxConcurrentStreams"`
	// KeepaliveTime is how long a connection may be silent before orchd
	// pings it; KeepaliveTimeout how long the ping may go unanswered
	// before the connection is closed. Defaults 2m and 20s.
	KeepaliveTime    Duration `yaml:"keepaliveTime"`
	KeepaliveTimeout Duration `yaml:"keepaliveTimeout"`
	// MaxConnectionIdle closes a connection with no call for that long.
	// Default 5m.
	MaxConnectionIdle Duration `yaml:"maxConnectionIdle"`
}

// validate checks the section; it is called with the rest of the config.
func (c GRPCConfig) validate() error {
	if c.Listen == "" {
		if c.URL != "" {
			return errors.New("config: agent.grpc.url is set but agent.grpc.listen is not: gRPC is served only with a listen address")
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return fmt.Errorf("config: agent.grpc.listen %q: %w", c.Listen, err)
	}
	if c.URL != "" {
		host, _, err := net.SplitHostPort(c.URL)
		if err != nil || host == "" || strings.ContainsAny(c.URL, "/?#@") {
			return fmt.Errorf("config: agent.grpc.url %q is not host:port, the form gRPC clients dial", c.URL)
		}
	}
	if c.MaxMessageBytes < 0 || c.MaxConnections < 0 {
		return errors.New("config: agent.grpc.maxMessageBytes and maxConnections must not be negative")
	}
	return nil
}

// grpc is the section as the A2A server takes it: http is the http
// section, whose maxBodyBytes bounds a gRPC message too unless the
// section says otherwise, and whose certificate gRPC is served with;
// serverTLS adds client certificates to it when auth.mtls asks for them.
func (c GRPCConfig) grpc(http HTTPConfig, serverTLS func(*tls.Config) *tls.Config) a2aserver.GRPCConfig {
	g := a2aserver.GRPCConfig{Listen: c.Listen, MaxMessageBytes: c.MaxMessageBytes, MaxConnections: c.MaxConnections,
		MaxConcurrentStreams: c.MaxConcurrentStreams, KeepaliveTime: time.Duration(c.KeepaliveTime),
		KeepaliveTimeout: time.Duration(c.KeepaliveTimeout), MaxConnectionIdle: time.Duration(c.MaxConnectionIdle)}
	if g.MaxMessageBytes <= 0 {
		g.MaxMessageBytes = int(http.withDefaults().MaxBodyBytes)
	}
	if t := http.TLS; t != nil {
		g.TLS = func() (*tls.Config, error) {
			cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
			if err != nil {
				return nil, fmt.Errorf("http.tls certificate: %w", err)
			}
			tc := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
			if serverTLS != nil {
				tc = serverTLS(tc)
			}
			return tc, nil
		}
	}
	return g
}

// advertised is the card's gRPC interface URL for the bound address:
// agent.grpc.url, else agent.url's host (agentURL) with the bound port,
// else the bound address, unless it binds every interface.
func (c GRPCConfig) advertised(addr net.Addr, agentURL string) (string, error) {
	if c.URL != "" {
		return c.URL, nil
	}
	_, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "", fmt.Errorf("agent.grpc.listen: bound address %s: %w", addr, err)
	}
	if agentURL != "" {
		if u, err := url.Parse(agentURL); err == nil && !unspecifiedHost(u.Hostname()) {
			return net.JoinHostPort(u.Hostname(), port), nil
		}
	}
	host, _, _ := net.SplitHostPort(addr.String())
	if unspecifiedHost(host) {
		return "", fmt.Errorf("agent.grpc.listen %s binds every interface, so orchd's agent card has no gRPC address to advertise: set agent.grpc.url (host:port) or agent.url", c.Listen)
	}
	return addr.String(), nil
}

// PushConfig is the agent section's push part: how orchd delivers A2A push
// notifications to its callers' webhooks (docs/push.md). The zero value
// is usable: every field has a default. Each field sets the
// a2aserver.PushConfig field of the same name.
type PushConfig struct {
	// AllowNetworks lists the CIDR prefixes (or addresses) webhooks may be
	// in although they are not public (loopback, private and the other
	// special-purpose ranges), as registry.allowNetworks does for card
	// fetches. Empty, the default, allows public addresses only: loopback
	// is an opt-in for development.
	AllowNetworks []string `yaml:"allowNetworks"`
	// AllowHosts lists webhook host names that may resolve anywhere, as
	// registry.allowHosts does for card fetches.
	AllowHosts []string `yaml:"allowHosts"`
	// MaxConfigsPerTask bounds the push configs of one task; default 10.
	MaxConfigsPerTask int `yaml:"maxConfigsPerTask"`
	// MaxURLBytes bounds a webhook URL; default 2048.
	MaxURLBytes int `yaml:"maxURLBytes"`
	// MaxTokenBytes bounds a config's token and its credentials, each;
	// default 4096.
	MaxTokenBytes int `yaml:"maxTokenBytes"`
	// Timeout bounds one delivery attempt, connection and response
	// headers included; default 10s.
	Timeout Duration `yaml:"timeout"`
	// MaxAttempts is how many times one notification is tried before it
	// is given up; default 8.
	MaxAttempts int `yaml:"maxAttempts"`
	// Backoff is the wait before the first retry, doubled for each next
	// one up to MaxBackoff, with jitter; default 500ms.
	Backoff Duration `yaml:"backoff"`
	// MaxBackoff caps the wait between attempts; default 30s.
	MaxBackoff Duration `yaml:"maxBackoff"`
	// QueueSize bounds the notifications waiting for delivery in all;
	// beyond it new ones are given up. Default 10000.
	QueueSize int `yaml:"queueSize"`
	// QueueBytes bounds the bytes of the notifications waiting; default
	// 64 MiB.
	QueueBytes int64 `yaml:"queueBytes"`
	// QueuePerConfig bounds the notifications waiting for one webhook
	// config, so one dead webhook cannot fill the queue; default 100.
	QueuePerConfig int `yaml:"queuePerConfig"`
	// QueuePerTenant bounds the notifications waiting for one tenant's
	// webhooks, so one tenant's cannot fill the queue; default 1000.
	QueuePerTenant int `yaml:"queuePerTenant"`
	// QueueBytesPerTenant bounds their bytes; default 16 MiB.
	QueueBytesPerTenant int64 `yaml:"queueBytesPerTenant"`
	// Concurrency bounds the deliveries in flight at once; default 64.
	Concurrency int `yaml:"concurrency"`
	// ConcurrencyPerTenant bounds the deliveries in flight to one
	// tenant's webhooks, so webhooks that hang hold no more; default 8.
	ConcurrencyPerTenant int `yaml:"concurrencyPerTenant"`
	// ConcurrencyPerHost bounds the deliveries in flight to one webhook
	// host (host and port); default 4.
	ConcurrencyPerHost int `yaml:"concurrencyPerHost"`
}

// push is the section as the A2A server's push sender takes it.
func (c PushConfig) push() a2aserver.PushConfig {
	return a2aserver.PushConfig{AllowNetworks: c.AllowNetworks, AllowHosts: c.AllowHosts, MaxConfigsPerTask: c.MaxConfigsPerTask,
		MaxURLBytes: c.MaxURLBytes, MaxTokenBytes: c.MaxTokenBytes, Timeout: time.Duration(c.Timeout), MaxAttempts: c.MaxAttempts,
		Backoff: time.Duration(c.Backoff), MaxBackoff: time.Duration(c.MaxBackoff), QueueSize: c.QueueSize, QueueBytes: c.QueueBytes,
		QueuePerConfig: c.QueuePerConfig, QueuePerTenant: c.QueuePerTenant, QueueBytesPerTenant: c.QueueBytesPerTenant,
		Concurrency: c.Concurrency, ConcurrencyPerTenant: c.ConcurrencyPerTenant, ConcurrencyPerHost: c.ConcurrencyPerHost}
}

// checkPushURL checks delegation.pushURL: empty, or an absolute http(s)
// URL.
func checkPushURL(s string) error {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q is not a base URL like https://orchd.example", s)
	}
	return nil
}
