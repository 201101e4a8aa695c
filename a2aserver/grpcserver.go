package a2aserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2agrpcv0 "github.com/a2aproject/a2a-go/v2/a2agrpc/v0"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/net/netutil"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	grpcstatus "google.golang.org/grpc/status"
	grpctap "google.golang.org/grpc/tap"

	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/telemetry"
)

// GRPCConfig is how orchd serves its A2A interface over gRPC too
// (agent.grpc). Zero fields but MaxMessageBytes take their defaults.
type GRPCConfig struct {
	// Listen is the address gRPC is served on, e.g. 127.0.0.1:9090.
	// Empty serves no gRPC.
	Listen string
	// MaxMessageBytes bounds one message a client sends; it must be
	// positive.
	MaxMessageBytes int
	// MaxConnections bounds the connections open at once; more wait to be
	// accepted. Default 1024.
	MaxConnections int
	// MaxConcurrentStreams bounds the calls in flight on one connection.
	// Default 256.
	MaxConcurrentStreams uint32
	// KeepaliveTime is how long a connection may be silent before orchd
	// pings it; KeepaliveTimeout how long the ping may go unanswered
	// before the connection is closed. Defaults 2m and 20s.
	KeepaliveTime, KeepaliveTimeout time.Duration
	// MaxConnectionIdle closes a connection with no call for that long.
	// Default 5m.
	MaxConnectionIdle time.Duration
	// TLS, when set, builds the TLS configuration gRPC is served with
	// once the address is bound (the HTTP listener's certificate, and
	// client certificates when callers present them); nil serves
	// plaintext.
	TLS func() (*tls.Config, error)
}

// The agent.grpc section's defaults, used for zero fields.
const (
	defaultGRPCMaxConnections    = 1024
	defaultGRPCMaxStreams        = 256
	defaultGRPCKeepaliveTime     = 2 * time.Minute
	defaultGRPCKeepaliveTimeout  = 20 * time.Second
	defaultGRPCMaxConnectionIdle = 5 * time.Minute
	// grpcMaxHeaderBytes bounds a call's metadata (credentials, trace
	// context, extensions).
	grpcMaxHeaderBytes = 64 << 10
	// grpcStopWait bounds the graceful stop; calls still running then are
	// cut.
	grpcStopWait = 10 * time.Second
	// grpcStreamWorkers is how many goroutines wait for calls; a call that
	// finds all of them busy gets a goroutine of its own, as it would
	// without them.
	grpcStreamWorkers = 64
)

// withDefaults returns c with its zero fields set.
func (c GRPCConfig) withDefaults() GRPCConfig {
	if c.MaxConnections <= 0 {
		c.MaxConnections = defaultGRPCMaxConnections
	}
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = defaultGRPCMaxStreams
	}
	if c.KeepaliveTime <= 0 {
		c.KeepaliveTime = defaultGRPCKeepaliveTime
	}
	if c.KeepaliveTimeout <= 0 {
		c.KeepaliveTimeout = defaultGRPCKeepaliveTimeout
	}
	if c.MaxConnectionIdle <= 0 {
		c.MaxConnectionIdle = defaultGRPCMaxConnectionIdle
	}
	return c
}

// grpcServer serves orchd's A2A request handler over gRPC: a2a-go's 1.0
// service (lf.a2a.v1.A2AService) and its 0.3 one (a2a.v1.A2AService) on
// one port, behind the same gate and call interceptors as the HTTP
// bindings. A nil *grpcServer serves nothing; its methods do nothing.
type grpcServer struct {
	cfg     GRPCConfig
	gate    *httpgate.Gate
	handler a2asrv.RequestHandler
	tel     *telemetry.Telemetry
	// access logs each call; nil when the access log is off.
	access *httpgate.AccessLog
	log    *slog.Logger

	// mu guards lis, which GRPCAddr reads while Run sets it.
	mu     sync.Mutex
	lis    net.Listener
	srv    *grpc.Server
	served chan struct{}
	once   sync.Once
}

// newGRPCServer returns the gRPC server cfg describes, or nil when it
// sets no listen address.
func newGRPCServer(cfg GRPCConfig, g *httpgate.Gate, h a2asrv.RequestHandler, tel *telemetry.Telemetry, access *httpgate.AccessLog, log *slog.Logger) *grpcServer {
	if cfg.Listen == "" {
		return nil
	}
	return &grpcServer{cfg: cfg.withDefaults(), gate: g, handler: h, tel: tel, access: access, log: log}
}

// listen binds the listen address and returns the interface URL the card
// lists, which bound gives for the bound address, or refuses it (an
// address beyond loopback without authentication).
func (s *grpcServer) listen(bound func(net.Addr) (string, error)) (string, error) {
	if s == nil {
		return "", nil
	}
	ln, err := net.Listen("tcp", s.cfg.Listen)
	if err != nil {
		return "", fmt.Errorf("agent.grpc.listen %s: %w", s.cfg.Listen, err)
	}
	u, err := bound(ln.Addr())
	if err != nil {
		ln.Close()
		return "", err
	}
	opts, err := s.options()
	if err != nil {
		ln.Close()
		return "", err
	}
	s.mu.Lock()
	s.lis = netutil.LimitListener(ln, s.cfg.MaxConnections)
	s.mu.Unlock()
	s.srv = grpc.NewServer(opts...)
	a2agrpc.NewHandler(s.handler).RegisterWith(s.srv)
	a2agrpcv0.NewHandler(s.handler).RegisterWith(s.srv)
	return u, nil
}

// options are the server's bounds, TLS and interceptors.
func (s *grpcServer) options() ([]grpc.ServerOption, error) {
	c := s.cfg
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(c.MaxMessageBytes),
		grpc.MaxConcurrentStreams(c.MaxConcurrentStreams),
		grpc.MaxHeaderListSize(grpcMaxHeaderBytes),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: c.KeepaliveTime, Timeout: c.KeepaliveTimeout,
			MaxConnectionIdle: c.MaxConnectionIdle}),
		// Clients may ping as often as every 10s, with no call running.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		// Calls run on goroutines kept for them, whose stacks have grown to
		// what a delegation needs, instead of a new goroutine per call
		// growing its stack (copying it) two or three times.
		grpc.NumStreamWorkers(grpcStreamWorkers),
		grpc.ChainUnaryInterceptor(s.unary),
		grpc.ChainStreamInterceptor(s.stream),
	}
	if s.gate.Enabled() {
		opts = append(opts, grpc.InTapHandle(s.tap))
	}
	if s.cfg.TLS != nil {
		tc, err := s.cfg.TLS()
		if err != nil {
			return nil, fmt.Errorf("agent.grpc: %w", err)
		}
		opts = append(opts, grpc.Creds(grpccreds.NewTLS(tc)))
	}
	return opts, nil
}

// serve serves until stop; the channel returned gets the error that ended
// serving early. It is nil (never ready) for a nil server.
func (s *grpcServer) serve() <-chan error {
	if s == nil || s.srv == nil {
		return nil
	}
	errc := make(chan error, 1)
	s.served = make(chan struct{})
	go func() {
		defer close(s.served)
		if err := s.srv.Serve(s.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			errc <- err
		}
	}()
	s.log.Info("orchd serving A2A over gRPC", "addr", s.lis.Addr().String(), "tls", s.cfg.TLS != nil)
	return errc
}

// stop stops gracefully, waiting for running calls up to grpcStopWait and
// then cutting them; it closes the listener of a server never served.
func (s *grpcServer) stop() {
	if s == nil || s.srv == nil {
		return
	}
	s.once.Do(func() {
		if s.served == nil {
			s.srv.Stop() // its workers wait from the start
			s.lis.Close()
			return
		}
		done := make(chan struct{})
		go func() {
			s.srv.GracefulStop()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(grpcStopWait):
			s.log.Warn("gRPC calls still running after the graceful stop's wait; cutting them", "wait", grpcStopWait)
			s.srv.Stop()
			<-done
		}
		<-s.served
	})
}

// endpointVersionOf is the A2A version of the gRPC service a full method
// name belongs to: lf.a2a.v1.A2AService is 1.0, a2a.v1.A2AService 0.3.
func endpointVersionOf(fullMethod string) string {
	if strings.HasPrefix(fullMethod, "/lf.a2a.") {
		return "1.0"
	}
	return "0.3"
}

func (s *grpcServer) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	ctx, end := s.callContext(ctx, info.FullMethod)
	defer end()
	resp, err := h(ctx, req)
	s.access.GRPCCall(ctx, info.FullMethod, start, err)
	return resp, err
}

func (s *grpcServer) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	ctx, end := s.callContext(ss.Context(), info.FullMethod)
	defer end()
	err := h(srv, &contextStream{ServerStream: ss, ctx: ctx})
	s.access.GRPCCall(ctx, info.FullMethod, start, err)
	return err
}

// contextStream is a server stream with the call's context replaced.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (c *contextStream) Context() context.Context { return c.ctx }

// tap authenticates a call, by the bearer token or API key in its
// metadata or its peer's verified client certificate, before grpc-go reads
// its message (it reads a unary call's message before any interceptor): a
// caller the gate refuses is answered with A2A's unauthenticated error
// (gRPC's Unauthenticated) and none of its message is read. An accepted
// caller's principal travels in the call's context; callerInterceptor
// makes it the CallContext's user. It is installed only with
// authentication configured, and runs on the connection's reading
// goroutine, as grpc-go runs taps: checking a token or a certificate is
// quick, and a JWT naming a key not yet fetched holds only the calls of
// the connection that sent it.
func (s *grpcServer) tap(ctx context.Context, info *grpctap.Info) (context.Context, error) {
	ctx, refused := s.gate.GRPCCaller(ctx, grpcHTTPRequest(ctx, info.FullMethodName))
	if refused == "" {
		return ctx, nil
	}
	err := unauthenticatedStatus(refused)
	s.access.GRPCCall(ctx, info.FullMethodName, time.Now(), err)
	return nil, err
}

// unauthenticatedStatus is A2A's unauthenticated error as a2a-go's gRPC
// services write it, with msg: status Unauthenticated and an ErrorInfo
// with the UNAUTHENTICATED reason, which a2a-go's clients read as
// a2a.ErrUnauthenticated.
func unauthenticatedStatus(msg string) error {
	st := grpcstatus.New(codes.Unauthenticated, msg)
	if d, err := st.WithDetails(&errdetails.ErrorInfo{Reason: a2a.ErrorReason(a2a.ErrUnauthenticated), Domain: a2a.ProtocolDomain}); err == nil {
		st = d
	}
	return st.Err()
}

// callContext prepares a call's context as the HTTP bindings' middleware
// does: the version its service speaks, for versionCheck, and the trace
// the caller sent; tap has authenticated the caller. end ends the call's
// span.
//
// A call that nothing reads as a request, with tracing off and no trace
// metadata to pass on, gets only its version: the request and the
// middleware would leave its context as it is.
func (s *grpcServer) callContext(ctx context.Context, fullMethod string) (context.Context, func()) {
	ctx = context.WithValue(ctx, endpointVersionKey{}, endpointVersionOf(fullMethod))
	if !s.tel.Tracing() && !hasTraceMetadata(ctx) {
		return ctx, noEnd
	}
	return s.traced(ctx, grpcHTTPRequest(ctx, fullMethod), fullMethod)
}

// noEnd ends a call with no span.
func noEnd() {}

// hasTraceMetadata reports whether a call's metadata carries any of the
// trace headers (traceparent, tracestate, baggage) that orchd passes on
// when it does not trace.
func hasTraceMetadata(ctx context.Context) bool {
	for _, k := range [...]string{"traceparent", "tracestate", "baggage"} {
		if len(metadata.ValueFromIncomingContext(ctx, k)) > 0 {
			return true
		}
	}
	return false
}

// grpcHTTPRequest is the call as the gate and the telemetry read requests:
// its metadata as headers, its peer's address and TLS state.
func grpcHTTPRequest(ctx context.Context, fullMethod string) *http.Request {
	r := &http.Request{Method: http.MethodPost, URL: &url.URL{Path: fullMethod}, Header: http.Header{}, Proto: "HTTP/2", ProtoMajor: 2}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for k, vs := range md {
			if strings.HasPrefix(k, ":") {
				continue
			}
			r.Header[http.CanonicalHeaderKey(k)] = vs
		}
	}
	if p, ok := peer.FromContext(ctx); ok {
		if p.Addr != nil {
			r.RemoteAddr = p.Addr.String()
		}
		if ti, ok := p.AuthInfo.(grpccreds.TLSInfo); ok {
			st := ti.State
			r.TLS = &st
		}
	}
	return r.WithContext(ctx)
}

// traced continues the caller's trace: with tracing, a server span for
// the call (spanNamer names it after the A2A method); without, the trace
// headers the caller sent, kept for the calls made on its behalf, as
// telemetry.Handler keeps them for HTTP.
func (s *grpcServer) traced(ctx context.Context, r *http.Request, fullMethod string) (context.Context, func()) {
	if !s.tel.Tracing() {
		kept := ctx
		s.tel.Handler(http.HandlerFunc(func(_ http.ResponseWriter, in *http.Request) { kept = in.Context() }), "A2A").ServeHTTP(discardWriter{}, r)
		return kept, func() {}
	}
	ctx = s.tel.Propagator().Extract(ctx, propagation.HeaderCarrier(r.Header))
	ctx, span := s.tel.TracerProvider().Tracer(instrumentationScope).Start(ctx, "A2A gRPC "+fullMethod,
		trace.WithSpanKind(trace.SpanKindServer))
	return ctx, func() { span.End() }
}

// discardWriter is the response writer of a request that only carries a
// gRPC call's headers through HTTP middleware.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}

// addr returns the bound address, or nil before listen and for a nil
// server.
func (s *grpcServer) addr() net.Addr {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lis == nil {
		return nil
	}
	return s.lis.Addr()
}

// ListenGRPC binds GRPCConfig.Listen, when set, and sets the gRPC
// interface the card lists to what bound says of the bound address; bound
// may refuse the address instead (one beyond loopback without
// authentication). Call it before SetCard; StopGRPC closes what it binds.
func (s *Server) ListenGRPC(bound func(net.Addr) (string, error)) error {
	u, err := s.grpc.listen(bound)
	if err != nil {
		return err
	}
	s.grpcURL = u
	return nil
}

// ServeGRPC serves gRPC on the address ListenGRPC bound, until StopGRPC;
// the channel gets the error that ended serving early. It is nil (never
// ready) when gRPC is not served.
func (s *Server) ServeGRPC() <-chan error { return s.grpc.serve() }

// StopGRPC stops serving gRPC gracefully, waiting for running calls up to
// a bound and then cutting them.
func (s *Server) StopGRPC() { s.grpc.stop() }

// GRPCAddr returns the address A2A is served on over gRPC once ListenGRPC
// has bound it, or nil before and when GRPCConfig.Listen is not set.
func (s *Server) GRPCAddr() net.Addr { return s.grpc.addr() }

// instrumentationScope names the spans and metrics of orchd as an A2A
// agent: the name they had when this package was part of orchestrator,
// kept so dashboards and alerts that select on it go on working.
const instrumentationScope = "github.com/orchd/orchd/orchestrator"
