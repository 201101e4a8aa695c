package orchestrator

import (
	"context"
	"net"
	"net/http/httptest"
	"runtime"
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
// the hop's cost is the ratio of the two calls/s. Each path runs 16
// callers on 2 cores (parallelCalls), orchd with its delegation store
// filled first (fillDaemon); the paths take turns, grpcRounds of each, so what
// the machine does meanwhile weighs on both alike.
//
//	go test ./orchestrator -run '^$' -bench BenchmarkGRPCHop -benchtime 1s
func BenchmarkGRPCHop(b *testing.B) {
	agent := grpcNoopAgent(b)
	cfg := benchConfig(b)
	cfg.Agents = []registry.Spec{{ID: "noop", URL: agent}}
	cfg.Agent.GRPC.Listen = "127.0.0.1:0"
	d, base, _ := runBenchDaemon(b, cfg)
	paths := []struct {
		name string
		send func() error
	}{}
	for _, p := range []struct{ name, url string }{{"direct", agent}, {"orchd", base}} {
		c := grpcBenchClient(b, p.url)
		send := func() error {
			_, err := c.SendMessage(context.Background(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("ping"))})
			return err
		}
		if err := send(); err != nil { // warm the connections
			b.Fatal(err)
		}
		if p.name == "orchd" {
			// As in a daemon that has run for a while, every measured
			// delegation makes room by forgetting an old one (BenchmarkHop).
			fillDaemon(b, d, c)
		}
		paths = append(paths, struct {
			name string
			send func() error
		}{p.name, send})
	}
	for round := range grpcRounds {
		for i := range paths {
			p := paths[(round+i)%len(paths)]
			runtime.GC()
			b.Run(p.name, func(b *testing.B) {
				b.ReportAllocs()
				parallelCalls(b, p.send)
			})
		}
	}
}

// grpcRounds is how many turns each path of BenchmarkGRPCHop takes.
const grpcRounds = 5
