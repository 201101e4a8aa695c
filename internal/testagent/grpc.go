package testagent

import (
	"context"
	"net"
	"net/http"
	"path"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	a2agrpcv0 "github.com/a2aproject/a2a-go/v2/a2agrpc/v0"
	a2agrpc "github.com/a2aproject/a2a-go/v2/a2agrpc/v1"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// listenGRPC binds the agent's gRPC listener on 127.0.0.1 and lists its
// interface on the card: first, the agent's preferred, or in place of the
// JSON-RPC one for a gRPC-only agent. The card names it host:port, the form a2a-go's gRPC clients dial.
func listenGRPC(t testing.TB, card *a2a.AgentCard, o Options) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("gRPC listener: %v", err)
	}
	grpcIface := &a2a.AgentInterface{URL: lis.Addr().String(), ProtocolBinding: a2a.TransportProtocolGRPC, ProtocolVersion: a2a.ProtocolVersion(o.Version)}
	if o.GRPCOnly {
		card.SupportedInterfaces = []*a2a.AgentInterface{grpcIface}
	} else {
		card.SupportedInterfaces = append([]*a2a.AgentInterface{grpcIface}, card.SupportedInterfaces...)
	}
	return lis
}

// serveGRPC serves handler over gRPC on lis until the test ends: a2a-go's
// A2A 1.0 service, and its 0.3 service too when v03 is set. Each call is
// recorded as the JSON-RPC ones are, under its gRPC method name
// ("SendMessage", "GetTask"...), with its metadata as headers.
func serveGRPC(t testing.TB, a *Agent, handler a2asrv.RequestHandler, lis net.Listener, v03 bool) {
	t.Helper()
	gs := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if !a.recordGRPC(ctx, info.FullMethod) {
				return nil, status.Error(codes.Unavailable, "the agent is frozen")
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if !a.recordGRPC(ss.Context(), info.FullMethod) {
				return status.Error(codes.Unavailable, "the agent is frozen")
			}
			return h(srv, ss)
		}))
	a2agrpc.NewHandler(handler).RegisterWith(gs)
	if v03 {
		a2agrpcv0.NewHandler(handler).RegisterWith(gs)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(lis)
	}()
	t.Cleanup(func() {
		gs.Stop()
		<-done
	})
}

// recordGRPC notes a gRPC call; it reports false when the agent is frozen
// and the caller gave up or the agent stopped meanwhile.
func (a *Agent) recordGRPC(ctx context.Context, fullMethod string) bool {
	method := path.Base(fullMethod)
	h := http.Header{}
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		for k, vs := range md {
			h[http.CanonicalHeaderKey(k)] = append([]string(nil), vs...)
		}
	}
	a.requests.add(method, h)
	a.mu.Lock()
	a.methods = append(a.methods, method)
	close(a.called)
	a.called = make(chan struct{})
	a.mu.Unlock()
	if !a.frozen.Load() {
		return true
	}
	select {
	case <-ctx.Done():
	case <-a.stopped.Done():
	}
	return false
}
