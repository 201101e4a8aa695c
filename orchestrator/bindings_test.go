package orchestrator

import (
	"net/http"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/delegation"
)

// Where orchd serves A2A, as its card lists the HTTP interfaces: JSON-RPC
// and HTTP+JSON for A2A 1.0, and for 0.3 clients; pathA2A is the prefix
// of them all, and of the push webhook.
const (
	pathA2A       = "/a2a/"
	pathJSONRPC   = "/a2a/jsonrpc"
	pathREST      = "/a2a/rest"
	pathJSONRPC03 = "/a2a/v0.3/jsonrpc"
	pathREST03    = "/a2a/v0.3/rest"
	pathPush      = a2aserver.PathPush
)

// a2aBinding is one of the A2A interfaces orchd's card lists.
type a2aBinding struct {
	name     string
	version  a2a.ProtocolVersion
	protocol a2a.TransportProtocol
}

// orchdBindings are the interfaces orchd serves over HTTP.
var orchdBindings = []a2aBinding{
	{"jsonrpc-1.0", "1.0", a2a.TransportProtocolJSONRPC},
	{"rest-1.0", "1.0", a2a.TransportProtocolHTTPJSON},
	{"jsonrpc-0.3", "0.3", a2a.TransportProtocolJSONRPC},
	{"rest-0.3", "0.3", a2a.TransportProtocolHTTPJSON},
}

// bindingClient is a real a2a-go client of the agent at base speaking only
// b, built from the agent's card (read with the 0.3-aware parser), with
// hc as its HTTP client (nil for one without a timeout, for streams), and
// any extra options.
// askDual asks orchd for its dual 0.3/1.0 card, which a2a-go v2.4.0's
// card parsers read whether or not orchd declares security; they cannot
// read the security requirements of its 1.0 card (docs/a2a.md, "Card per
// version").
func askDual() agentcard.ResolveOption { return agentcard.WithRequestHeader("A2A-Version", "0.3") }

func bindingClient(t testing.TB, base string, b a2aBinding, hc *http.Client, extra ...a2aclient.FactoryOption) *a2aclient.Client {
	t.Helper()
	if hc == nil {
		hc = &http.Client{}
	}
	card, err := (&agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}).Resolve(t.Context(), base, askDual())
	if err != nil {
		t.Fatalf("resolve card at %s: %v", base, err)
	}
	var only []*a2a.AgentInterface
	for _, it := range card.SupportedInterfaces {
		if it.ProtocolVersion == b.version && it.ProtocolBinding == b.protocol {
			only = append(only, it)
		}
	}
	if len(only) == 0 {
		t.Fatalf("the card at %s has no %s interface: %+v", base, b.name, card.SupportedInterfaces)
	}
	card.SupportedInterfaces = only
	opts := []a2aclient.FactoryOption{a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
		a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}), a2av0.WithRESTTransport(a2av0.RESTTransportConfig{Client: hc})}
	opts = append(opts, extra...)
	c, err := a2aclient.NewFromCard(t.Context(), card, opts...)
	if err != nil {
		t.Fatalf("%s client of %s: %v", b.name, base, err)
	}
	return c
}

// userMessage is a user message with the given id and text.
func userMessage(id, text string) *a2a.Message {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	m.ID = id
	return m
}

// taskDelegation reads the id of the delegation behind one of orchd's A2A
// tasks, which the task's metadata names under the delegation extension's
// URI: {"delegation": id}.
func taskDelegation(task *a2a.Task) (string, bool) {
	m, _ := task.Metadata[delegation.ExtensionURI].(map[string]any)
	id, _ := m["delegation"].(string)
	return id, id != ""
}
