package orchestrator

import (
	"context"
	"net"
	"net/http/httptest"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/orchd/orchd/registry"
)

// grpcNoopAgent serves the no-op agent over gRPC only, its card over
// HTTP, and returns the card's base URL.
func grpcNoopAgent(b *testing.B) string {
	b.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gs := grpc.NewServer()
	a2agrpc.NewHandler(a2asrv.NewHandler(noop{})).RegisterWith(gs)
	done := make(chan struct{})
	go func() { defer close(done); _ = gs.Serve(lis) }()
	b.Cleanup(func() { gs.Stop(); <-done })
	card := &a2a.AgentCard{Name: "Noop", Description: "answers pong", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: lis.Addr().String(), ProtocolBinding: a2a.TransportProtocolGRPC, ProtocolVersion: "1.0"}},
		Skills:              []a2a.AgentSkill{{ID: "noop", Name: "noop", Tags: []string{}}}}
	srv := httptest.NewServer(a2asrv.NewStaticAgentCardHandler(card))
	b.Cleanup(srv.Close)
	return srv.URL
}

// grpcBenchClient is an a2a-go client of the card at base speaking only
// gRPC 1.0.
func grpcBenchClient(b *testing.B, base string) *a2aclient.Client {
	b.Helper()
	card, err := agentcard.DefaultResolver.Resolve(b.Context(), base)
	if err != nil {
		b.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(b.Context(), card, a2aclient.WithDefaultsDisabled(),
		a2agrpc.WithGRPCTransport(grpc.WithTransportCredentials(insecure.NewCredentials())))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Destroy() })
	return c
}

// BenchmarkGRPCHop compares, in the same run, the throughput of a gRPC
// SendMessage answered by a no-op gRPC agent called directly with the same
// call made to orchd over gRPC, which delegates it to the agent over gRPC:
// the hop's cost is the ratio of the two ns/op. Calls run in parallel, as
// a loaded orchd sees them.
//
//	go test ./orchestrator -run '^$' -bench BenchmarkGRPCHop -benchtime 3s -count 5
func BenchmarkGRPCHop(b *testing.B) {
	agent := grpcNoopAgent(b)
	cfg := benchConfig(b)
	cfg.Agents = []registry.Spec{{ID: "noop", URL: agent}}
	cfg.Agent.GRPC.Listen = "127.0.0.1:0"
	_, base, _ := runBenchDaemon(b, cfg)
	for _, bench := range []struct {
		name string
		url  string
	}{{"direct", agent}, {"orchd", base}} {
		b.Run(bench.name, func(b *testing.B) {
			c := grpcBenchClient(b, bench.url)
			send := func() error {
				_, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("ping"))})
				return err
			}
			if err := send(); err != nil { // warm the connection
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := send(); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
