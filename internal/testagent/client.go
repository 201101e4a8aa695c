package testagent

import (
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
)

// Client resolves the card at base and returns a real a2a-go client built
// from it with opts, failing the test when either step fails.
func Client(t testing.TB, base string, opts ...a2aclient.FactoryOption) *a2aclient.Client {
	t.Helper()
	return ClientAt(t, base, "", opts...)
}

// ClientAt is Client with the card read at path under base, or at the
// resolver's well-known path when path is empty.
func ClientAt(t testing.TB, base, path string, opts ...a2aclient.FactoryOption) *a2aclient.Client {
	t.Helper()
	var ropts []agentcard.ResolveOption
	if path != "" {
		ropts = append(ropts, agentcard.WithPath(path))
	}
	card, err := agentcard.DefaultResolver.Resolve(t.Context(), base, ropts...)
	if err != nil {
		t.Fatalf("resolve card at %s%s: %v", base, path, err)
	}
	c, err := a2aclient.NewFromCard(t.Context(), card, opts...)
	if err != nil {
		t.Fatalf("client for %s: %v", base, err)
	}
	return c
}
