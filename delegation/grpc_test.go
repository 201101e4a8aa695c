package delegation

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testca"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

func TestParseGRPCTarget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		raw, cardURL string
		addr         string
		secure       bool
		err          string
	}{
		{raw: "127.0.0.1:5000", cardURL: "http://127.0.0.1:8000", addr: "127.0.0.1:5000"},
		{raw: "127.0.0.1:5000", cardURL: "https://agent.example.com", addr: "127.0.0.1:5000", secure: true},
		{raw: "grpc.agents.example.com:443", cardURL: "http://agent.example.com", addr: "grpc.agents.example.com:443", secure: true},
		{raw: "https://grpc.example.com", addr: "grpc.example.com:443", secure: true},
		{raw: "grpcs://grpc.example.com:8443", addr: "grpc.example.com:8443", secure: true},
		{raw: "http://127.0.0.1:9", cardURL: "https://agent.example.com", addr: "127.0.0.1:9"},
		{raw: "grpc://[::1]:9", addr: "[::1]:9"},
		{raw: "dns:///agent.example.com:50051", addr: "agent.example.com:50051"},
		{raw: "https://grpc.example.com/a2a", err: "has a path"},
		{raw: "ftp://grpc.example.com:21", err: `scheme "ftp"`},
		{raw: "agent.example.com", err: "missing port"},
		{raw: "", err: "no URL"},
		{raw: "https://user@grpc.example.com", err: "not host:port"},
		{raw: ":443", err: "names no host"},
		{raw: "0:", err: "is not a number"},
		{raw: "grpc.example.com:http", err: "is not a number"},
		{raw: "grpc\x00.example.com:443", err: "control characters"},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			t.Parallel()
			got, err := parseGRPCTarget(tt.raw, tt.cardURL)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("parseGRPCTarget(%q) = %+v, %v; want error with %q", tt.raw, got, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.addr != tt.addr || got.secure != tt.secure {
				t.Fatalf("parseGRPCTarget(%q) = %+v, want addr %s secure %v", tt.raw, got, tt.addr, tt.secure)
			}
		})
	}
}

// lastRequest returns the last request the agent received for method.
func lastRequest(t *testing.T, a *testagent.Agent, method string) testagent.Request {
	t.Helper()
	reqs := a.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		if reqs[i].Method == method {
			return reqs[i]
		}
	}
	t.Fatalf("agent got no %s call (calls %v)", method, a.Calls())
	return testagent.Request{}
}

// TestDelegate_GRPCOnlyAgent delegates to real a2a-go agents whose cards
// offer only gRPC, in both A2A versions, streaming and not: the registry
// finds them compatible and the work completes over gRPC, with the
// delegation chain and the A2A version in the call's metadata.
func TestDelegate_GRPCOnlyAgent(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		version   string
		streaming bool
		method    string
	}{
		{"1.0", true, "SendStreamingMessage"},
		{"1.0", false, "SendMessage"},
		{"0.3", true, "SendStreamingMessage"},
		{"0.3", false, "SendMessage"},
	} {
		t.Run(tt.version+"/"+tt.method, func(t *testing.T) {
			t.Parallel()
			agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", Version: tt.version, Streaming: tt.streaming, GRPCOnly: true, Extensions: chainReader}, testagent.Work(5*time.Millisecond))
			f := newFixture(t, Config{})
			a, err := f.reg.Add(t.Context(), registry.Spec{ID: "writer", URL: agent.URL})
			if err != nil {
				t.Fatal(err)
			}
			if !a.ClientCompatible {
				t.Fatalf("gRPC-only agent is incompatible: %s", a.IncompatibleReason)
			}
			d, err := f.engine.Delegate(t.Context(), Request{Text: "write a haiku", Agent: "writer"})
			if err != nil {
				t.Fatal(err)
			}
			r := waitState(t, d, a2a.TaskStateCompleted)
			if len(r.Artifacts) == 0 {
				t.Errorf("record has no artifacts: %+v", r)
			}
			req := lastRequest(t, agent, tt.method)
			if v := req.Header.Get("A2a-Version"); v != tt.version {
				t.Errorf("A2A-Version metadata = %q, want %q", v, tt.version)
			}
			msgs := agent.Messages()
			if len(msgs) == 0 {
				t.Fatal("agent got no message")
			}
			if _, ok := msgs[0].Metadata[ExtensionURI]; !ok {
				t.Errorf("message metadata %v lacks the delegation chain", msgs[0].Metadata)
			}
		})
	}
}

// TestDelegate_GRPCTraceContext checks the caller's trace reaches a gRPC
// agent in the call's metadata, which a2a-go's transport would otherwise
// replace.
func TestDelegate_GRPCTraceContext(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", GRPCOnly: true}, testagent.Reply("ok"))
	f := newFixture(t, Config{})
	f.add(t, "writer", agent.URL)
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithRemoteSpanContext(t.Context(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	d, err := f.engine.Delegate(ctx, Request{Text: "hi", Agent: "writer"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateCompleted)
	got := lastRequest(t, agent, "SendMessage").Header.Get("Traceparent")
	if !strings.Contains(got, tid.String()) {
		t.Fatalf("traceparent metadata = %q, want trace %s", got, tid)
	}
}

// TestSteer_GRPCAgent steers and finishes a steerable agent reached only
// over gRPC: the signals travel with A2A-Extensions in the metadata.
func TestSteer_GRPCAgent(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", Streaming: true, Steering: true, GRPCOnly: true}, testagent.Steerable())
	f := newFixture(t, Config{})
	f.add(t, "writer", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "write", Agent: "writer"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	if _, err := f.engine.Steer(t.Context(), d.ID(), steering.Steer, textMessage("shorter")); err != nil {
		t.Fatalf("steer over gRPC: %v", err)
	}
	if _, err := f.engine.Steer(t.Context(), d.ID(), steering.Steer, textMessage("finish")); err != nil {
		t.Fatalf("steer over gRPC: %v", err)
	}
	r := waitState(t, d, a2a.TaskStateCompleted)
	if got := messageText(r.Result); got != "finished: shorter, finish" {
		t.Errorf("result %q", got)
	}
	if n := len(agent.Signals()); n != 2 {
		t.Errorf("agent took %d signals, want 2", n)
	}
	if ext := lastRequest(t, agent, "SendMessage").Header.Values("A2a-Extensions"); !slices.Contains(ext, steering.URI) {
		t.Errorf("steer's A2A-Extensions metadata = %v, want %s", ext, steering.URI)
	}
}

// grpcSecured is a real a2a-go agent served over gRPC only, whose card
// declares security and whose gRPC server serves only calls whose
// metadata the check accepts (Unauthenticated otherwise).
type grpcSecured struct {
	card            *httptest.Server
	served, refused atomic.Int32
}

func startGRPCSecured(t *testing.T, schemes a2a.NamedSecuritySchemes, reqs a2a.SecurityRequirementsOptions, check func(metadata.MD) bool) *grpcSecured {
	t.Helper()
	return startGRPCSecuredTLS(t, schemes, reqs, check, nil)
}

// startGRPCSecuredTLS is startGRPCSecured serving TLS with tc, when set,
// at a grpcs:// URL; a call must then come with a client certificate of
// common name orchd.
func startGRPCSecuredTLS(t *testing.T, schemes a2a.NamedSecuritySchemes, reqs a2a.SecurityRequirementsOptions, check func(metadata.MD) bool, tc *tls.Config) *grpcSecured {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &grpcSecured{}
	var opts []grpc.ServerOption
	url := lis.Addr().String()
	if tc != nil {
		opts, url = append(opts, grpc.Creds(grpccreds.NewTLS(tc))), "grpcs://"+url
	}
	opts = append(opts, grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		md, _ := metadata.FromIncomingContext(ctx)
		if !check(md) || tc != nil && !clientCertOf(ctx, "orchd") {
			g.refused.Add(1)
			return nil, status.Error(codes.Unauthenticated, "unauthenticated")
		}
		g.served.Add(1)
		return h(ctx, req)
	}))
	gs := grpc.NewServer(opts...)
	a2agrpc.NewHandler(a2asrv.NewHandler(replier{})).RegisterWith(gs)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(lis) }()
	t.Cleanup(func() { gs.Stop(); <-done })
	card := &a2a.AgentCard{
		Name: "Research", Description: "secured gRPC agent", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: url, ProtocolBinding: a2a.TransportProtocolGRPC, ProtocolVersion: "1.0"}},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills:          []a2a.AgentSkill{{ID: "research", Name: "research", Tags: []string{"research"}}},
		SecuritySchemes: schemes, SecurityRequirements: reqs,
	}
	g.card = httptest.NewServer(a2asrv.NewStaticAgentCardHandler(card))
	t.Cleanup(g.card.Close)
	return g
}

func first(md metadata.MD, k string) string {
	if vs := md.Get(k); len(vs) == 1 {
		return vs[0]
	}
	return ""
}

// TestDelegate_GRPCCredentials delegates to gRPC agents that each demand
// one kind of credential where their card says: each reaches the call as
// metadata, and none shows in logs. An API key the card places in a query
// parameter has no gRPC form, and the delegation fails saying so.
func TestDelegate_GRPCCredentials(t *testing.T) {
	t.Parallel()
	idp := startTokenEndpoint(t, 300)
	tests := []struct {
		name    string
		schemes a2a.NamedSecuritySchemes
		reqs    a2a.SecurityRequirementsOptions
		creds   func(t *testing.T) *credentials.Config
		check   func(metadata.MD) bool
		err     string
	}{
		{
			name:    "bearer",
			schemes: a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer"}},
			reqs:    require("bearer"),
			creds: func(t *testing.T) *credentials.Config {
				return &credentials.Config{Bearer: &credentials.Bearer{TokenFile: secretFile(t, testBearer)}}
			},
			check: func(md metadata.MD) bool { return first(md, "authorization") == "Bearer "+testBearer },
		},
		{
			name:    "api key in header",
			schemes: a2a.NamedSecuritySchemes{"key": a2a.APIKeySecurityScheme{Location: a2a.APIKeySecuritySchemeLocationHeader, Name: "X-API-Key"}},
			reqs:    require("key"),
			creds: func(t *testing.T) *credentials.Config {
				return &credentials.Config{APIKey: &credentials.APIKey{ValueFile: secretFile(t, testAPIKey)}}
			},
			check: func(md metadata.MD) bool { return first(md, "x-api-key") == testAPIKey },
		},
		{
			name:    "basic",
			schemes: a2a.NamedSecuritySchemes{"basic": a2a.HTTPAuthSecurityScheme{Scheme: "Basic"}},
			reqs:    require("basic"),
			creds: func(t *testing.T) *credentials.Config {
				return &credentials.Config{Basic: &credentials.Basic{Username: "orchd", PasswordFile: secretFile(t, testBearer)}}
			},
			check: func(md metadata.MD) bool {
				return first(md, "authorization") == "Basic "+base64.StdEncoding.EncodeToString([]byte("orchd:"+testBearer))
			},
		},
		{
			name: "oauth2",
			schemes: a2a.NamedSecuritySchemes{"corp": a2a.OAuth2SecurityScheme{Flows: a2a.ClientCredentialsOAuthFlow{
				TokenURL: idp.URL + "/token", Scopes: map[string]string{"a2a": "call agents"}}}},
			reqs: a2a.SecurityRequirementsOptions{{"corp": {"a2a"}}},
			creds: func(t *testing.T) *credentials.Config {
				return &credentials.Config{OAuth2: &credentials.OAuth2{ClientID: "orchd", ClientSecretFile: secretFile(t, testClient), TokenURL: idp.URL + "/token"}}
			},
			check: func(md metadata.MD) bool {
				return idp.valid(&http.Request{Header: http.Header{"Authorization": md.Get("authorization")}})
			},
		},
		{
			name:    "api key in query",
			schemes: a2a.NamedSecuritySchemes{"key": a2a.APIKeySecurityScheme{Location: a2a.APIKeySecuritySchemeLocationQuery, Name: "api_key"}},
			reqs:    require("key"),
			creds: func(t *testing.T) *credentials.Config {
				return &credentials.Config{APIKey: &credentials.APIKey{ValueFile: secretFile(t, testAPIKey)}}
			},
			check: func(metadata.MD) bool { return false },
			err:   "query parameter",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			agent := startGRPCSecured(t, tt.schemes, tt.reqs, tt.check)
			f := newCredFixture(t, nil)
			a, err := f.reg.Add(t.Context(), registry.Spec{ID: "research", URL: agent.card.URL, Credentials: tt.creds(t)})
			if err != nil {
				t.Fatal(err)
			}
			if !a.ClientCompatible || !a.Credentials.Satisfied {
				t.Fatalf("agent compatible %v (%s), credentials %+v", a.ClientCompatible, a.IncompatibleReason, a.Credentials)
			}
			if tt.err != "" {
				_, err := f.engine.Delegate(t.Context(), Request{Text: "find papers", Agent: "research"})
				var fe *FailedError
				if !errors.As(err, &fe) || len(fe.Decision.Attempts) == 0 || !strings.Contains(fe.Decision.Attempts[0].Error, tt.err) {
					t.Fatalf("Delegate error %v, want a failed attempt saying %q", err, tt.err)
				}
				noSecret(t, "error", fe.Decision.Attempts[0].Error)
				if agent.served.Load() != 0 {
					t.Errorf("agent served %d calls", agent.served.Load())
				}
				return
			}
			for range 2 {
				if err := f.delegate(t, "research"); err != nil {
					t.Fatal(err)
				}
			}
			if agent.served.Load() != 2 || agent.refused.Load() != 0 {
				t.Fatalf("agent served %d and refused %d calls, want 2 and 0", agent.served.Load(), agent.refused.Load())
			}
			noSecret(t, "log", f.logs.String())
		})
	}
}

// TestDelegate_GRPCRefused reports an agent that refuses orchd's
// credentials over gRPC as a refusal, naming the agent.
func TestDelegate_GRPCRefused(t *testing.T) {
	t.Parallel()
	agent := startGRPCSecured(t, a2a.NamedSecuritySchemes{"bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer"}}, require("bearer"),
		func(metadata.MD) bool { return false })
	f := newCredFixture(t, nil)
	creds := &credentials.Config{Bearer: &credentials.Bearer{TokenFile: secretFile(t, testBearer)}}
	if _, err := f.reg.Add(t.Context(), registry.Spec{ID: "research", URL: agent.card.URL, Credentials: creds}); err != nil {
		t.Fatal(err)
	}
	_, err := f.engine.Delegate(t.Context(), Request{Text: "find papers", Agent: "research"})
	var fe *FailedError
	if !errors.As(err, &fe) || len(fe.Decision.Attempts) == 0 || !strings.Contains(fe.Decision.Attempts[0].Error, "research") {
		t.Fatalf("Delegate error %v, want the refusal of agent research", err)
	}
	noSecret(t, "error", fe.Decision.Attempts[0].Error)
	if agent.refused.Load() == 0 {
		t.Error("agent refused no call")
	}
}

// clientCertOf reports whether the call's peer presented a verified
// client certificate of common name cn.
func clientCertOf(ctx context.Context, cn string) bool {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return false
	}
	ti, ok := p.AuthInfo.(grpccreds.TLSInfo)
	return ok && len(ti.State.VerifiedChains) > 0 && ti.State.PeerCertificates[0].Subject.CommonName == cn
}

// TestDelegate_GRPCMutualTLS delegates to a gRPC agent over TLS whose card
// requires a client certificate and a bearer token together: the
// connection presents the certificate from credentials.tls, trusting the
// CA configured there, and the token goes as metadata.
func TestDelegate_GRPCMutualTLS(t *testing.T) {
	t.Parallel()
	serverCA, clientCA := testca.New(t, "server CA"), testca.New(t, "client CA")
	dir := t.TempDir()
	server, client := serverCA.Server(t, "agent"), clientCA.Client(t, "orchd")
	for name, b := range map[string][]byte{"client.pem": client.CertPEM, "client-key.pem": client.KeyPEM, "ca.pem": serverCA.PEM()} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	clientPool := x509.NewCertPool()
	clientPool.AddCert(clientCA.Cert)
	tc := &tls.Config{Certificates: []tls.Certificate{server.TLS}, ClientCAs: clientPool, ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12}
	schemes := a2a.NamedSecuritySchemes{"mtls": a2a.MutualTLSSecurityScheme{}, "bearer": a2a.HTTPAuthSecurityScheme{Scheme: "Bearer"}}
	reqs := a2a.SecurityRequirementsOptions{{"mtls": {}, "bearer": {}}}
	agent := startGRPCSecuredTLS(t, schemes, reqs, func(md metadata.MD) bool { return first(md, "authorization") == "Bearer "+testBearer }, tc)
	tlsCreds := &credentials.TLS{CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client-key.pem"), CAFile: filepath.Join(dir, "ca.pem")}
	for _, tt := range []struct {
		name  string
		creds *credentials.Config
		ok    bool
	}{
		{"certificate and token", &credentials.Config{TLS: tlsCreds, Bearer: &credentials.Bearer{TokenFile: secretFile(t, testBearer)}}, true},
		{"CA only, no certificate", &credentials.Config{TLS: &credentials.TLS{CAFile: tlsCreds.CAFile}, Bearer: &credentials.Bearer{TokenFile: secretFile(t, testBearer)}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newCredFixture(t, nil)
			if _, err := f.reg.Add(t.Context(), registry.Spec{ID: "research", URL: agent.card.URL, Credentials: tt.creds}); err != nil {
				t.Fatal(err)
			}
			err := f.delegate(t, "research")
			if tt.ok && err != nil {
				t.Fatal(err)
			}
			if !tt.ok && err == nil {
				t.Fatal("delegated without the client certificate the card requires")
			}
		})
	}
	if agent.served.Load() != 1 {
		t.Errorf("agent served %d calls, want 1", agent.served.Load())
	}
}

// TestDelegate_GRPCOrHTTP checks which binding orchd calls an agent
// serving both gRPC (listed first) and JSON-RPC at one version over: the
// HTTP one.
func TestDelegate_GRPCOrHTTP(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", GRPC: true}, testagent.Reply("ok"))
	f := newFixture(t, Config{})
	f.add(t, "writer", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "hi", Agent: "writer"})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateCompleted)
	// JSON-RPC 1.0 and gRPC both name the method SendMessage; only gRPC
	// calls carry gRPC's content type.
	req := lastRequest(t, agent, "SendMessage")
	if ct := req.Header.Get("Content-Type"); strings.HasPrefix(ct, "application/grpc") {
		t.Errorf("orchd called over gRPC (content-type %q), want JSON-RPC", ct)
	}
}

func TestHTTPFirst(t *testing.T) {
	t.Parallel()
	in := []*a2a.AgentInterface{
		{URL: "g1", ProtocolBinding: a2a.TransportProtocolGRPC},
		{URL: "r", ProtocolBinding: a2a.TransportProtocolHTTPJSON},
		{URL: "g2", ProtocolBinding: a2a.TransportProtocolGRPC},
		{URL: "j", ProtocolBinding: a2a.TransportProtocolJSONRPC},
	}
	var got []string
	for _, iface := range httpFirst(in) {
		got = append(got, iface.URL)
	}
	if want := []string{"r", "j", "g1", "g2"}; !slices.Equal(got, want) {
		t.Fatalf("httpFirst = %v, want %v", got, want)
	}
}

// FuzzParseGRPCTarget checks that any interface URL is refused or read as
// a host:port to dial, with an origin of the same host and port whose
// scheme says whether the call uses TLS.
func FuzzParseGRPCTarget(f *testing.F) {
	f.Add("127.0.0.1:5000", "http://127.0.0.1:8000")
	f.Add("https://grpc.example.com", "")
	f.Add("grpc://[::1]:9", "https://agent.example.com")
	f.Add("https://grpc.example.com/a2a", "")
	f.Fuzz(func(t *testing.T, raw, cardURL string) {
		got, err := parseGRPCTarget(raw, cardURL)
		if err != nil {
			return
		}
		host, port, err := net.SplitHostPort(got.addr)
		if err != nil || host == "" || port == "" {
			t.Fatalf("parseGRPCTarget(%q) dials %q, not host:port", raw, got.addr)
		}
		scheme := "http://"
		if got.secure {
			scheme = "https://"
		}
		if got.origin != scheme+got.addr {
			t.Fatalf("parseGRPCTarget(%q): origin %q for %s (secure %v)", raw, got.origin, got.addr, got.secure)
		}
	})
}
