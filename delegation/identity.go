package delegation

import (
	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/registry"
)

// Card params of the delegation extension: an orchestrator advertises its
// identity, and its display name, so an orchestrator choosing it can tell
// whether it is already in a chain's path.
const (
	// IdentityParam holds the orchestrator's identity, as it appears in a
	// chain's path.
	IdentityParam = "id"
	// NameParam holds the orchestrator's display name.
	NameParam = "name"
)

// CardExtension returns the delegation extension as an orchestrator with
// identity self and display name name advertises it on its card.
func CardExtension(self, name string) a2a.AgentExtension {
	return a2a.AgentExtension{
		URI:         ExtensionURI,
		Description: "orchd delegation chain context: path, depth, deadline, skill and inherited requirements",
		Params:      map[string]any{IdentityParam: self, NameParam: name},
	}
}

// advertisedIdentity returns the identity and display name an agent's card
// advertises in the delegation extension's params: empty for agents that
// are not orchestrators, or that advertise none.
func advertisedIdentity(a *registry.Agent) (id, name string) {
	for i := range a.Extensions {
		x := &a.Extensions[i]
		if x.URI != ExtensionURI {
			continue
		}
		id, _ = x.Params[IdentityParam].(string)
		name, _ = x.Params[NameParam].(string)
		return id, name
	}
	return "", ""
}
