package delegation

import (
	"context"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2aext"

	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// client builds the a2a-go client for an agent's card: A2A 1.0 and 0.3
// over JSON-RPC, HTTP+JSON and gRPC, activating the delegation extension when
// the card declares it.
//
// An agent with credentials configured is called through a transport that
// attaches them as its card's security requirements say.
//
// Clients are kept per agent and card digest (and credentials): building
// one parses the card and selects a transport, which costs more than a
// small delegation.
func (e *Engine) client(ctx context.Context, a *registry.Agent) (*a2aclient.Client, *a2a.AgentCard, error) {
	key := a.ID + "@" + a.Digest
	creds := a.CredentialConfig()
	if c, ok := e.clients.Get(key); ok && c.creds == creds {
		return c.client, c.card, nil
	}
	card, err := a.AgentCard()
	if err != nil {
		return nil, nil, err
	}
	hc := e.cfg.HTTPClient
	if creds != nil {
		urls := make([]string, len(a.Protocols))
		for i, p := range a.Protocols {
			urls[i] = p.URL
		}
		rt, err := e.cfg.Credentials.Transport(a.ID, creds, a.Security, urls)
		if err != nil {
			return nil, nil, err
		}
		withCreds := *hc
		withCreds.Transport = rt
		hc = &withCreds
	}
	hc = boundedAnswers(typedErrors(staleConnResend(hc)), e.answerLimit)
	card.SupportedInterfaces = httpFirst(card.SupportedInterfaces)
	grpcOpts, err := e.grpcOptions(a, creds) // gRPC 1.0 and 0.3 (grpc.go)
	if err != nil {
		return nil, nil, err
	}
	c, err := a2aclient.NewFromCard(ctx, card, append([]a2aclient.FactoryOption{
		a2aclient.WithTransport(a2a.TransportProtocolJSONRPC, a2aclient.TransportFactoryFn(
			func(_ context.Context, _ *a2a.AgentCard, iface *a2a.AgentInterface) (a2aclient.Transport, error) {
				return newJSONRPCStreams(iface.URL, hc, e.stacks), nil // a2a-go's, reading streams itself (jsonrpcstream.go)
			})),
		a2aclient.WithRESTTransport(hc),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}),
		a2av0.WithRESTTransport(a2av0.RESTTransportConfig{Client: hc}),
		a2aclient.WithCallInterceptors(a2aext.NewActivator(ExtensionURI, steering.URI), replayable{}),
	}, grpcOpts...)...)
	if err != nil {
		return nil, nil, fmt.Errorf("build client for %s: %w", a.ID, err)
	}
	e.clients.Add(key, cachedClient{client: c, card: card, creds: creds})
	return c, card, nil
}

// cachedClient is an a2a-go client with the card it was built from.
type cachedClient struct {
	client *a2aclient.Client
	card   *a2a.AgentCard
	creds  *credentials.Config
}
