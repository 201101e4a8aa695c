package orchestrator

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2aext"
	a2agrpcv0 "github.com/a2aproject/a2a-go/v2/a2agrpc/v0"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"google.golang.org/grpc"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testca"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// grpcDaemon runs an orchd serving gRPC on an ephemeral loopback port,
// routing to agents, and returns its base URL and its card's gRPC URL.
func grpcDaemon(t testing.TB, cfg Config, agents ...registry.Spec) (string, string) {
	t.Helper()
	cfg.Agent.GRPC.Listen = "127.0.0.1:0"
	cfg.Delegation.PollInterval = Duration(20 * time.Millisecond)
	cfg.Agents = agents
	base := startDaemon(t, cfg)
	card, err := (&agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}).Resolve(t.Context(), base, askDual())
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, iface := range card.SupportedInterfaces {
		if iface.ProtocolBinding == a2a.TransportProtocolGRPC {
			urls = append(urls, string(iface.ProtocolVersion)+" "+iface.URL)
		}
	}
	if len(urls) != 2 || !strings.HasPrefix(urls[0], "1.0 127.0.0.1:") {
		t.Fatalf("card's gRPC interfaces = %v, want 1.0 on 127.0.0.1 and 0.3", urls)
	}
	if want := "0.3" + urls[0][3:]; urls[1] != want {
		t.Fatalf("card's 0.3 gRPC interface %q, want %q, on 1.0's port", urls[1], want)
	}
	return base, urls[0][4:]
}

// grpcClient is a real a2a-go client of orchd's card that can only speak
// gRPC at version ("1.0" or "0.3"), with dial options opts.
func grpcClient(t testing.TB, base, version string, opts ...grpc.DialOption) *a2aclient.Client {
	t.Helper()
	card, err := (&agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}).Resolve(t.Context(), base, askDual())
	if err != nil {
		t.Fatal(err)
	}
	opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	transport := a2agrpc.WithGRPCTransport(opts...)
	if version == "0.3" {
		transport = a2agrpcv0.WithGRPCTransport(opts...)
	}
	c, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithDefaultsDisabled(), transport,
		a2aclient.WithCallInterceptors(a2aext.NewActivator(steering.URI)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c
}

// TestGRPC_BothWays calls orchd over gRPC, in both A2A versions, for work
// orchd routes to a gRPC-only agent: the stream ends COMPLETED with the
// agent's artifact, and the agent was reached over gRPC only.
func TestGRPC_BothWays(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", Streaming: true, GRPCOnly: true}, testagent.Work(5*time.Millisecond))
	base, _ := grpcDaemon(t, loadDefaults(t), registry.Spec{ID: "writer", URL: agent.URL})
	for _, version := range []string{"1.0", "0.3"} {
		t.Run(version, func(t *testing.T) {
			c := grpcClient(t, base, version)
			msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("write a haiku"))
			var last a2a.TaskState
			var artifacts int
			for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}) {
				if err != nil {
					t.Fatalf("stream over gRPC %s: %v", version, err)
				}
				switch ev := ev.(type) {
				case *a2a.TaskStatusUpdateEvent:
					last = ev.Status.State
				case *a2a.Task:
					last = ev.Status.State
				case *a2a.TaskArtifactUpdateEvent:
					artifacts++
				}
			}
			if last != a2a.TaskStateCompleted || artifacts == 0 {
				t.Fatalf("stream ended %s with %d artifact events", last, artifacts)
			}
		})
	}
	if calls := agent.Calls(); !slices.Contains(calls, "SendStreamingMessage") {
		t.Errorf("agent calls %v", calls)
	}
}

// tokenCredentials sends a bearer token as gRPC metadata.
type tokenCredentials string

func (t tokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (tokenCredentials) RequireTransportSecurity() bool { return false }

// apiKeyCredentials sends a token as the x-api-key metadata.
type apiKeyCredentials string

func (k apiKeyCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"x-api-key": string(k)}, nil
}

func (apiKeyCredentials) RequireTransportSecurity() bool { return false }

// TestGRPC_Authenticated serves gRPC behind the same gate as HTTP: a call
// without credentials, or with a wrong token, is refused with A2A's
// unauthenticated error; alice's token is accepted, and ListTasks lists
// alice's task to alice; bob, with his token as an API key over 0.3, does
// not see it.
func TestGRPC_Authenticated(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", GRPCOnly: true}, testagent.Work(time.Millisecond))
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Auth.APIKeyHeader = "X-API-Key"
	base, _ := grpcDaemon(t, cfg, registry.Spec{ID: "writer", URL: agent.URL})
	msg := func() *a2a.SendMessageRequest {
		return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("write"))}
	}
	for name, opts := range map[string][]grpc.DialOption{
		"none":  nil,
		"wrong": {grpc.WithPerRPCCredentials(tokenCredentials("not-a-known-token-000"))},
	} {
		_, err := grpcClient(t, base, "1.0", opts...).SendMessage(t.Context(), msg())
		if !errors.Is(err, a2a.ErrUnauthenticated) {
			t.Errorf("%s credentials: err = %v, want unauthenticated", name, err)
		}
	}
	alice := grpcClient(t, base, "1.0", grpc.WithPerRPCCredentials(tokenCredentials(aliceToken)))
	res, err := alice.SendMessage(t.Context(), msg())
	if err != nil {
		t.Fatalf("alice over gRPC: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("result %T, want a task", res)
	}
	list, err := alice.ListTasks(t.Context(), &a2a.ListTasksRequest{})
	if err != nil || !slices.ContainsFunc(list.Tasks, func(x *a2a.Task) bool { return x.ID == task.ID }) {
		t.Fatalf("alice's ListTasks = %+v, %v; want her task %s", list, err, task.ID)
	}
	bob := grpcClient(t, base, "0.3", grpc.WithPerRPCCredentials(apiKeyCredentials(bobToken)))
	if _, err := bob.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("bob's GetTask of alice's task: err = %v, want task not found", err)
	}
	if list, err := bob.ListTasks(t.Context(), &a2a.ListTasksRequest{}); err != nil || slices.ContainsFunc(list.Tasks, func(x *a2a.Task) bool { return x.ID == task.ID }) {
		t.Errorf("bob's ListTasks = %+v, %v; want a list without alice's task", list, err)
	}
}

// TestGRPC_Steering steers orchd over gRPC while orchd works through a
// steerable agent it reaches over gRPC: the steer and the finish reach the
// agent, and the task completes with both.
func TestGRPC_Steering(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", Streaming: true, Steering: true, GRPCOnly: true}, testagent.Steerable())
	base, _ := grpcDaemon(t, loadDefaults(t), registry.Spec{ID: "writer", URL: agent.URL})
	c := grpcClient(t, base, "1.0")
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("write")),
		Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("result %T, want a task", res)
	}
	waitTask(t, c, task.ID, a2a.TaskStateWorking)
	for _, text := range []string{"shorter", "finish"} {
		m := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart(text))
		m.Metadata = map[string]any{steering.ControlKey: string(steering.Steer)}
		if _, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: m}); err != nil {
			t.Fatalf("steer %q over gRPC: %v", text, err)
		}
	}
	waitTask(t, c, task.ID, a2a.TaskStateCompleted)
	got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
	if err != nil {
		t.Fatal(err)
	}
	if s := testagent.Text(got.Status.Message); s != "finished: shorter, finish" {
		t.Errorf("final message %q", s)
	}
	if sigs := agent.Signals(); len(sigs) != 2 {
		t.Errorf("agent took %d signals, want 2", len(sigs))
	}
}

// TestGRPC_RefusedBeyondLoopbackWithoutAuth refuses to serve gRPC on every
// interface with no authentication, as the HTTP listener does.
func TestGRPC_RefusedBeyondLoopbackWithoutAuth(t *testing.T) {
	t.Parallel()
	cfg := loadDefaults(t)
	cfg.Listen = "127.0.0.1:0"
	cfg.Agent.GRPC.Listen = "0.0.0.0:0"
	d, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	err = d.Run(t.Context())
	if err == nil {
		t.Fatal("Run with gRPC beyond loopback and no authentication: no error")
	}
	for _, want := range []string{"agent.grpc.listen", "beyond loopback"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Run = %v, want the gRPC listener refused, saying %q", err, want)
		}
	}
}

// TestGRPC_StopsWithStreamsOpen stops the daemon promptly while a gRPC
// client's stream through it is open on a task that never ends.
func TestGRPC_StopsWithStreamsOpen(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", Streaming: true, GRPCOnly: true}, testagent.Hang())
	cfg := loadDefaults(t)
	cfg.Listen = "127.0.0.1:0"
	cfg.Agent.GRPC.Listen = "127.0.0.1:0"
	cfg.Agents = []registry.Spec{{ID: "writer", URL: agent.URL}}
	d, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	testwait.Until(t, 10*time.Second, "the daemon starting, with its agent and gRPC", func() bool {
		return d.Addr() != nil && d.Registry().Len() > 0 && d.GRPCAddr() != nil
	})
	c := grpcClient(t, "http://"+d.Addr().String(), "1.0")
	opened := make(chan struct{})
	streamDone := make(chan struct{})
	go func() {
		defer close(streamDone)
		once := false
		for _, err := range c.SendStreamingMessage(context.Background(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hang"))}) {
			if !once {
				once = true
				close(opened)
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-opened:
	case <-time.After(10 * time.Second):
		t.Fatal("stream did not open")
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("daemon did not stop within 15s with a gRPC stream open")
	}
	// The streams ended with the daemon's stop, before the gRPC server's
	// graceful stop had to wait for them (up to 10s) and cut them.
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("stop took %s", took)
	}
	select {
	case <-streamDone:
	case <-time.After(5 * time.Second):
		t.Error("client stream did not end with the daemon")
	}
}

func TestGRPCConfig_Validate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		cfg GRPCConfig
		err string
	}{
		{cfg: GRPCConfig{}},
		{cfg: GRPCConfig{Listen: "127.0.0.1:9090", URL: "orchd.example.com:9090"}},
		{cfg: GRPCConfig{URL: "orchd.example.com:9090"}, err: "agent.grpc.listen is not"},
		{cfg: GRPCConfig{Listen: "9090"}, err: "agent.grpc.listen"},
		{cfg: GRPCConfig{Listen: ":9090", URL: "https://orchd.example.com/grpc"}, err: "not host:port"},
		{cfg: GRPCConfig{Listen: ":9090", MaxConnections: -1}, err: "negative"},
	} {
		err := tt.cfg.validate()
		if (tt.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%+v.validate() = %v, want %q", tt.cfg, err, tt.err)
		}
	}
}

// TestGRPC_MutualTLS serves gRPC over TLS with http.tls's certificate,
// where a verified client certificate authenticates as over HTTPS: its
// principal owns the task it starts, and a certificate from another CA is
// not accepted.
func TestGRPC_MutualTLS(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", GRPCOnly: true}, testagent.Work(time.Millisecond))
	dir := t.TempDir()
	serverCA, clientCA, otherCA := testca.New(t, "server CA"), testca.New(t, "client CA"), testca.New(t, "other CA")
	srv := serverCA.Server(t, "orchd")
	writeFile(t, dir+"/server.pem", string(srv.CertPEM))
	writeFile(t, dir+"/server.key", string(srv.KeyPEM))
	writeFile(t, dir+"/client-ca.pem", string(clientCA.PEM()))
	const spiffe = "spiffe://acme.example/agent/reporter"
	cfg := loadDefaults(t)
	cfg.HTTP.TLS = &TLSConfig{CertFile: dir + "/server.pem", KeyFile: dir + "/server.key"}
	cfg.Auth = authTokens()
	cfg.Auth.MTLS = &auth.MTLSConfig{ClientCAFile: dir + "/client-ca.pem", Tenants: map[string]string{spiffe: "acme"}}
	cfg.Agent.GRPC.Listen = "127.0.0.1:0"
	cfg.Agents = []registry.Spec{{ID: "writer", URL: agent.URL}}
	base := startTLSDaemon(t, cfg)

	roots := x509.NewCertPool()
	roots.AddCert(serverCA.Cert)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}}}
	t.Cleanup(hc.CloseIdleConnections)
	card, err := (&agentcard.Resolver{Client: hc, CardParser: a2av0.NewAgentCardParser()}).Resolve(t.Context(), base, askDual())
	if err != nil {
		t.Fatal(err)
	}
	client := func(ca *testca.CA) *a2aclient.Client {
		tc := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
		if ca != nil {
			tc.Certificates = []tls.Certificate{ca.Client(t, "reporter", spiffe).TLS}
		}
		c, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithDefaultsDisabled(),
			a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(grpccreds.NewTLS(tc))))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Destroy() })
		return c
	}
	send := &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("write"))}
	res, err := client(clientCA).SendMessage(t.Context(), send)
	if err != nil {
		t.Fatalf("with a client certificate: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("result %T, want a task", res)
	}
	list, err := client(clientCA).ListTasks(t.Context(), &a2a.ListTasksRequest{})
	if err != nil || !slices.ContainsFunc(list.Tasks, func(x *a2a.Task) bool { return x.ID == task.ID }) {
		t.Fatalf("ListTasks with the certificate = %+v, %v; want task %s", list, err, task.ID)
	}
	if _, err := client(nil).SendMessage(t.Context(), send); !errors.Is(err, a2a.ErrUnauthenticated) {
		t.Errorf("without credentials: err = %v, want unauthenticated", err)
	}
	if _, err := client(otherCA).SendMessage(t.Context(), send); err == nil {
		t.Error("a certificate from another CA was accepted")
	}
}

// countingConn counts the bytes written to a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// TestGRPC_RefusedBeforeTheMessageIsRead sends, without credentials and
// with a wrong token, a message of 4 MiB over gRPC: each call is refused
// with A2A's unauthenticated error before orchd reads the message, so the
// client sends little of it; alice's credentials get hers read and done.
func TestGRPC_RefusedBeforeTheMessageIsRead(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", GRPCOnly: true}, testagent.Work(time.Millisecond))
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	base, _ := grpcDaemon(t, cfg, registry.Spec{ID: "writer", URL: agent.URL})
	const size = 3 << 20
	msg := func() *a2a.SendMessageRequest {
		return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(strings.Repeat("x", size)))}
	}
	for _, tc := range []struct {
		name    string
		opts    []grpc.DialOption
		refused bool
	}{
		{"no credentials", nil, true},
		{"a wrong token", []grpc.DialOption{grpc.WithPerRPCCredentials(tokenCredentials("not-a-known-token-000"))}, true},
		{"alice", []grpc.DialOption{grpc.WithPerRPCCredentials(tokenCredentials(aliceToken))}, false},
	} {
		var sent atomic.Int64
		dial := grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
			return countingConn{Conn: c, n: &sent}, err
		})
		_, err := grpcClient(t, base, "1.0", append(tc.opts, dial)...).SendMessage(t.Context(), msg())
		switch {
		case tc.refused && (!errors.Is(err, a2a.ErrUnauthenticated) || sent.Load() >= size/2):
			t.Errorf("%s: err = %v after sending %d bytes; want unauthenticated before half the message was read", tc.name, err, sent.Load())
		case !tc.refused && (err != nil || sent.Load() < size):
			t.Errorf("%s: err = %v after sending %d bytes; want the message taken", tc.name, err, sent.Load())
		}
	}
}
