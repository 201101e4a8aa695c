package delegation

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	a2agrpcv0 "github.com/a2aproject/a2a-go/v2/a2agrpc/v0"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"go.opentelemetry.io/otel/propagation"
	"google.golang.org/grpc"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/internal/limitedfile"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/telemetry"
)

// Bounds of orchd's gRPC connections to agents.
const (
	// maxGRPCMessage bounds one message an agent sends orchd over gRPC
	// (a task with its history and artifacts, one stream event).
	maxGRPCMessage = 16 << 20
	// grpcIdleTimeout closes the connection of an agent orchd has not
	// called for that long; the next call dials again.
	grpcIdleTimeout = time.Minute
	// maxGRPCPEM bounds a CA or certificate file read for a gRPC agent.
	maxGRPCPEM = 1 << 20
)

// GRPCBase marks rt, the transport of Config.HTTPClient, with base, the
// *http.Transport under it (registry.NewTransport's), so connections to
// agents over gRPC dial with base's DialContext, and so keep its SSRF
// rules, and trust base's TLS roots. Without it gRPC connections dial with
// a plain net.Dialer and trust the system roots, as a nil HTTPClient
// trusts anything. The returned transport sends HTTP requests through rt
// unchanged.
func GRPCBase(rt http.RoundTripper, base *http.Transport) http.RoundTripper {
	return grpcBased{RoundTripper: rt, base: base}
}

// grpcBased is an HTTP transport carrying the base gRPC dials with.
type grpcBased struct {
	http.RoundTripper
	base *http.Transport
}

// CloseIdleConnections closes the idle connections of the transport
// underneath, as http.Client.CloseIdleConnections expects.
func (t grpcBased) CloseIdleConnections() { closeIdle(t.RoundTripper) }

// grpcTarget is where a card's gRPC interface is dialed.
type grpcTarget struct {
	// addr is host:port, as grpc.NewClient takes it ("passthrough:///"
	// is added when dialing, so the dialer sees the name).
	addr string
	// secure says whether to use TLS.
	secure bool
	// origin is the interface as an http(s) origin, for the credentials
	// transport to recognise as the agent's.
	origin string
}

// parseGRPCTarget reads a gRPC interface URL: https:// and grpcs:// mean
// TLS, http:// and grpc:// plain text, and a bare host:port (the form
// a2a-go's gRPC clients dial) means TLS when the agent's card was fetched
// over https or the port is 443, else plain text. gRPC has no paths, so a
// URL with one is refused rather than called somewhere else.
func parseGRPCTarget(raw, cardURL string) (grpcTarget, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return grpcTarget{}, errors.New("gRPC interface has no URL")
	}
	var secure, explicit bool
	if scheme, rest, ok := strings.Cut(s, "://"); ok {
		switch strings.ToLower(scheme) {
		case "https", "grpcs":
			secure, explicit = true, true
		case "http", "grpc":
			explicit = true
		case "dns":
			rest = strings.TrimPrefix(rest, "/") // dns:///host:port
		default:
			return grpcTarget{}, fmt.Errorf("gRPC interface URL %q: scheme %q is not one orchd dials (https, grpcs, http, grpc or host:port)", raw, scheme)
		}
		s = rest
	}
	hostport, path, _ := strings.Cut(s, "/")
	if path != "" {
		return grpcTarget{}, fmt.Errorf("gRPC interface URL %q has a path; gRPC calls go to the service's own paths, so orchd cannot call it there", raw)
	}
	if strings.ContainsAny(hostport, "?#@") {
		return grpcTarget{}, fmt.Errorf("gRPC interface URL %q is not host:port", raw)
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		if !explicit {
			return grpcTarget{}, fmt.Errorf("gRPC interface URL %q: %w", raw, err)
		}
		host, port = strings.Trim(hostport, "[]"), "80"
		if secure {
			port = "443"
		}
	}
	if host == "" {
		return grpcTarget{}, fmt.Errorf("gRPC interface URL %q names no host", raw)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return grpcTarget{}, fmt.Errorf("gRPC interface URL %q: port %q is not a number from 1 to 65535", raw, port)
	}
	if strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return grpcTarget{}, fmt.Errorf("gRPC interface URL %q: the host has spaces or control characters", raw)
	}
	if !explicit {
		secure = port == "443" || strings.HasPrefix(strings.ToLower(cardURL), "https://")
	}
	addr := net.JoinHostPort(host, port)
	origin := "http://" + addr
	if secure {
		origin = "https://" + addr
	}
	return grpcTarget{addr: addr, secure: secure, origin: origin}, nil
}

// grpcOptions returns the a2aclient options that let orchd's client talk
// A2A 1.0 and 0.3 over gRPC to agent a, with its credentials (creds, may
// be nil) as per-RPC metadata and its TLS settings on the connection.
//
// a2a-go's gRPC transports replace a call's outgoing metadata with the
// request's service parameters (A2A-Version, A2A-Extensions), so nothing
// orchd adds to the context's metadata would reach the agent: the
// credentials are per-RPC credentials, added by the connection, and the
// trace context is added by a client interceptor, which runs after.
func (e *Engine) grpcOptions(a *registry.Agent, creds *credentials.Config) ([]a2aclient.FactoryOption, error) {
	d := &grpcDialer{engine: e, agent: a, creds: creds}
	if creds != nil {
		if err := d.prepareCredentials(); err != nil {
			return nil, err
		}
	}
	return []a2aclient.FactoryOption{
		a2aclient.WithTransport(a2a.TransportProtocolGRPC, a2aclient.TransportFactoryFn(
			func(ctx context.Context, _ *a2a.AgentCard, iface *a2a.AgentInterface) (a2aclient.Transport, error) {
				conn, err := d.dial(iface.URL)
				if err != nil {
					return nil, err
				}
				return a2agrpc.NewGRPCTransport(conn), nil
			})),
		a2aclient.WithCompatTransport("0.3", a2a.TransportProtocolGRPC, a2aclient.TransportFactoryFn(
			func(ctx context.Context, _ *a2a.AgentCard, iface *a2a.AgentInterface) (a2aclient.Transport, error) {
				conn, err := d.dial(iface.URL)
				if err != nil {
					return nil, err
				}
				return a2agrpcv0.NewGRPCTransport(conn), nil
			})),
	}, nil
}

// httpFirst returns ifaces with the gRPC interfaces moved after the
// others, each group in the card's order. a2a-go takes the newest A2A
// version a card offers and, within it, the first interface it can speak;
// so of an agent offering gRPC and an HTTP binding at the same version,
// orchd calls the HTTP one, whose credentials support is complete (a
// refused token is renewed and the call retried at once; API keys may go
// in a query or a cookie), and gRPC only when it is all the agent offers
// at that version.
func httpFirst(ifaces []*a2a.AgentInterface) []*a2a.AgentInterface {
	out := make([]*a2a.AgentInterface, 0, len(ifaces))
	for _, grpcPass := range []bool{false, true} {
		for _, iface := range ifaces {
			if (iface.ProtocolBinding == a2a.TransportProtocolGRPC) == grpcPass {
				out = append(out, iface)
			}
		}
	}
	return out
}

// grpcDialer dials one agent's gRPC interfaces.
type grpcDialer struct {
	engine *Engine
	agent  *registry.Agent
	creds  *credentials.Config
	// headers attaches the header credentials: a credentials transport
	// whose requests are captured, never sent (see capture).
	headers http.RoundTripper
}

// prepareCredentials builds the transport that computes the credential
// headers of each call. Credentials come from their own credentials.Clients
// over a capturing transport, so the secrets' sources, OAuth 2.0 tokens
// and the card's rules for where each credential goes are those of the
// HTTP bindings; its token requests go out through Config.HTTPClient. A
// TLS client certificate is set on the connection instead (tlsConfig), so
// that part of the configuration, and the card's mutualTLS requirements,
// are left out here.
func (d *grpcDialer) prepareCredentials() error {
	a, cfg := d.agent, d.creds
	var origins []string
	for _, p := range a.Protocols {
		if p.Binding == capability.BindingGRPC {
			if t, err := parseGRPCTarget(p.URL, a.URL); err == nil {
				origins = append(origins, t.origin)
			}
		}
	}
	if len(origins) == 0 {
		return nil // no gRPC interface orchd can dial
	}
	if st := credentials.Satisfy(a.ID, a.Security, cfg); !st.Satisfied {
		return fmt.Errorf("credentials for agent %s: %s: %w", a.ID, st.Reason, credentials.ErrUnavailable)
	}
	sec := a.Security
	if cfg.TLS != nil {
		stripped := *cfg
		stripped.TLS = nil
		cfg, sec = &stripped, withoutMutualTLS(sec)
	}
	clients := credentials.NewClients(credentials.ClientsConfig{Base: capture{next: d.engine.cfg.HTTPClient.Transport}, Log: d.engine.log})
	rt, err := clients.Transport(a.ID, cfg, sec, origins)
	if err != nil {
		return err
	}
	d.headers = rt
	return nil
}

// withoutMutualTLS returns sec without its mutualTLS requirements, which a
// gRPC connection's TLS meets.
func withoutMutualTLS(sec *capability.Security) *capability.Security {
	if sec == nil {
		return nil
	}
	out := &capability.Security{Schemes: sec.Schemes}
	for _, alt := range sec.Requirements {
		var kept []capability.Requirement
		for _, r := range alt {
			if sec.Schemes[r.Scheme].Type != capability.SchemeMutualTLS {
				kept = append(kept, r)
			}
		}
		out.Requirements = append(out.Requirements, kept)
	}
	return out
}

// dial opens a connection to the gRPC interface at raw. grpc.NewClient
// connects lazily, so an unreachable agent fails the first call.
func (d *grpcDialer) dial(raw string) (*grpc.ClientConn, error) {
	t, err := parseGRPCTarget(raw, d.agent.URL)
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", d.agent.ID, err)
	}
	var base *http.Transport
	if gb, ok := d.engine.cfg.HTTPClient.Transport.(grpcBased); ok {
		base = gb.base
	}
	tc := insecure.NewCredentials()
	if t.secure {
		cfg, err := d.tlsConfig(base)
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", d.agent.ID, err)
		}
		tc = grpccreds.NewTLS(cfg)
	} else if d.creds != nil && d.creds.TLS != nil && d.creds.TLS.CertFile != "" {
		return nil, fmt.Errorf("agent %s: its gRPC interface %s is plain text, so the TLS client certificate configured for it cannot be presented", d.agent.ID, raw)
	}
	dial := (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	if base != nil && base.DialContext != nil {
		dial = base.DialContext
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(tc),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) { return dial(ctx, "tcp", addr) }),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxGRPCMessage), grpc.MaxCallSendMsgSize(maxGRPCMessage)),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.WithIdleTimeout(grpcIdleTimeout),
		grpc.WithChainUnaryInterceptor(traceUnary),
		grpc.WithChainStreamInterceptor(traceStream),
	}
	if d.headers != nil {
		opts = append(opts, grpc.WithPerRPCCredentials(&rpcCredentials{agent: d.agent.ID, rt: d.headers, origin: t.origin, secure: t.secure}))
	}
	conn, err := grpc.NewClient("passthrough:///"+t.addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("agent %s: gRPC client for %s: %w", d.agent.ID, raw, err)
	}
	// The engine's clients are cached, not closed; the connection goes
	// idle (and closes its socket) when unused, and closes with the
	// engine.
	context.AfterFunc(d.engine.ctx, func() { _ = conn.Close() })
	return conn, nil
}

// tlsConfig is the TLS of a connection to the agent: base's roots (the
// system's without base), the CA and client certificate of the agent's
// credentials.tls when configured.
func (d *grpcDialer) tlsConfig(base *http.Transport) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if base != nil && base.TLSClientConfig != nil {
		cfg.RootCAs = base.TLSClientConfig.RootCAs
	}
	if d.creds == nil || d.creds.TLS == nil {
		return cfg, nil
	}
	t := d.creds.TLS
	if t.CAFile != "" {
		b, err := limitedfile.Read(t.CAFile, maxGRPCPEM)
		if err != nil {
			return nil, fmt.Errorf("credentials tls.caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b) {
			return nil, fmt.Errorf("credentials tls.caFile: %s holds no PEM certificate", t.CAFile)
		}
		cfg.RootCAs = pool
	}
	if t.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
		if err != nil {
			// LoadX509KeyPair names what is wrong, never the key.
			return nil, fmt.Errorf("credentials TLS client certificate %s: %w", t.CertFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// rpcCredentials puts an agent's credentials on each gRPC call as
// metadata: what the credentials transport would set on an HTTP request
// to the interface's origin (Authorization, the API key header).
type rpcCredentials struct {
	agent  string
	rt     http.RoundTripper
	origin string
	secure bool
}

var _ grpccreds.PerRPCCredentials = (*rpcCredentials)(nil)

// GetRequestMetadata runs a request to the interface's origin through the
// credentials transport, which never sends it, and returns the
// credentials it set. ctx is the call's: it carries the caller's token
// for agents configured with forwardCaller. An API key placed in a query
// parameter or a cookie has no gRPC form and fails the call.
func (c *rpcCredentials) GetRequestMetadata(ctx context.Context, _ ...string) (map[string]string, error) {
	var got captured
	req, err := http.NewRequestWithContext(context.WithValue(ctx, captureKey{}, &got), http.MethodPost, c.origin+capturePath, http.NoBody)
	if err != nil {
		return nil, fmt.Errorf("credentials for agent %s: %w", c.agent, err)
	}
	resp, err := c.rt.RoundTrip(req)
	if err != nil {
		return nil, err // names the agent and the credential, never its value
	}
	_ = resp.Body.Close()
	if got.header == nil {
		return nil, fmt.Errorf("credentials for agent %s: none were attached", c.agent)
	}
	if got.query != "" {
		return nil, fmt.Errorf("credentials for agent %s: its card places the API key in a query parameter, which gRPC calls do not have", c.agent)
	}
	md := map[string]string{}
	for k, vs := range got.header {
		if len(vs) == 0 {
			continue
		}
		if strings.EqualFold(k, "Cookie") {
			return nil, fmt.Errorf("credentials for agent %s: its card places the API key in a cookie, which gRPC calls do not carry", c.agent)
		}
		md[strings.ToLower(k)] = vs[0]
	}
	return md, nil
}

// RequireTransportSecurity is false: as over HTTP, credentials may go to
// a plain-text interface, which the credentials transport logs when it is
// not on loopback.
func (c *rpcCredentials) RequireTransportSecurity() bool { return false }

// captureKey marks, with capturePath, a request whose credentials are
// captured: the context alone would not do, as the token requests made
// for the request share it.
type captureKey struct{}

// capturePath is the path of a captured request.
const capturePath = "/.orchd-grpc-metadata"

// captured is what the credentials transport set on a captured request.
type captured struct {
	header http.Header
	query  string
}

// capture is the base of the credentials transport for gRPC calls: it
// records the headers of requests marked with captureKey and answers them
// itself, and sends every other request (OAuth 2.0 token requests) on.
type capture struct {
	next http.RoundTripper
}

func (c capture) RoundTrip(r *http.Request) (*http.Response, error) {
	got, ok := r.Context().Value(captureKey{}).(*captured)
	if !ok || r.URL.Path != capturePath {
		next := c.next
		if next == nil {
			next = http.DefaultTransport
		}
		return next.RoundTrip(r)
	}
	got.header = http.Header{}
	for k, vs := range r.Header {
		got.header[k] = append([]string(nil), vs...)
	}
	got.query = r.URL.RawQuery
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// traceUnary and traceStream add the trace context of the call's context
// to its outgoing metadata, after a2a-go's transport replaced that
// metadata with the service parameters, so the agent joins the trace.
func traceUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	return invoker(withTraceMetadata(ctx), method, req, reply, cc, opts...)
}

func traceStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return streamer(withTraceMetadata(ctx), desc, cc, method, opts...)
}

// withTraceMetadata appends the W3C trace context and baggage of ctx to
// its outgoing metadata: orchd's span's when it traces, else the trace
// headers its caller sent, exactly as sent (telemetry.TraceHeaders), as
// the HTTP transport passes them on.
func withTraceMetadata(ctx context.Context) context.Context {
	carrier := propagation.MapCarrier{}
	propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}).Inject(ctx, carrier)
	kv := make([]string, 0, 2*len(carrier))
	for k, v := range carrier {
		kv = append(kv, k, v)
	}
	passed := telemetry.TraceHeadersFrom(ctx).Pairs()
	for i := 0; i < len(passed); i += 2 {
		if _, set := carrier[passed[i]]; !set {
			kv = append(kv, passed[i], passed[i+1])
		}
	}
	if len(kv) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}
