package capability

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/hashicorp/go-version"
)

// SteeringURI identifies the steering extension; its card params
// "interruptible" and "steerable" give an agent's steering modes.
const SteeringURI = "https://a2a-protocol.org/extensions/steering/v1"

// Profile is what orchd knows about an agent from its card. A profile is
// immutable once built: share it freely, never modify it.
type Profile struct {
	// ID is the name orchd knows the agent by, assigned by the registry.
	ID string `json:"id"`
	// Name is the card's human-readable name.
	Name string `json:"name"`
	// URL is the base URL the card was discovered at.
	URL string `json:"url"`
	// CardVersion is the agent's own version, as its card states it.
	CardVersion string `json:"cardVersion"`
	// CardFormat is the A2A generation of the card's layout: "1.0" for
	// supportedInterfaces cards, "0.3", or "0.2" for cards served at the
	// legacy /.well-known/agent.json path.
	CardFormat string `json:"cardFormat"`
	// Digest is "sha256:" and the hex SHA-256 of the card's canonical JSON,
	// so a decision can pin exactly the card it validated.
	Digest string `json:"digest"`
	// Protocols lists every (version, binding, URL) the agent serves.
	Protocols []Protocol `json:"protocols"`
	// MinProtocolVersion and MaxProtocolVersion are the card's declared
	// version range (capability declaration contract §2), or "" when absent.
	MinProtocolVersion string `json:"minProtocolVersion,omitempty"`
	MaxProtocolVersion string `json:"maxProtocolVersion,omitempty"`
	// ClientCompatible is true when orchd's client speaks at least one of
	// Protocols.
	ClientCompatible bool `json:"compatible"`
	// IncompatibleReason says why ClientCompatible is false.
	IncompatibleReason string `json:"incompatibleReason,omitempty"`
	// Capabilities maps canonical capability names, and extension URIs, to
	// their tier. Only capabilities the agent has are present.
	Capabilities map[string]Capability `json:"capabilities"`
	// Extensions lists the extensions the card advertises.
	Extensions []Extension `json:"extensions"`
	// Steering holds the modes of the steering extension.
	Steering Steering `json:"steering"`
	// Skills lists the card's skills.
	Skills []Skill `json:"skills"`
	// Security is what the card declares about authenticating to the
	// agent; nil when it declares no schemes and no requirements.
	Security *Security `json:"security,omitempty"`
	// Warnings lists what is odd about the card but does not stop orchd
	// from using it: deprecated capabilities, versions outside the declared
	// range, unreadable extension params.
	Warnings []string `json:"warnings"`

	// card is the compacted card JSON that a2a-go's parser accepted.
	card []byte
	// versions holds the distinct versions of Protocols, for Satisfies.
	versions []*version.Version
	// compatible memoizes Compatible; copies of a profile share it, as
	// they share the versions it is computed from.
	compatible *compatCache
}

// compatCache remembers Compatible's answers per constraint string, up to
// a bound, since parsing and checking a constraint costs far more than a
// lookup and policies ask the same few questions of every profile.
type compatCache struct {
	m sync.Map // constraint string → bool
	n atomic.Int32
}

const maxCachedConstraints = 64

// Extension is an extension the card advertises.
type Extension struct {
	// URI identifies the extension.
	URI string `json:"uri"`
	// Required is true when clients must activate the extension.
	Required bool `json:"required"`
	// Params are the extension's card parameters, as the card gives them.
	Params map[string]any `json:"params,omitempty"`
}

// Steering holds the steering extension's modes; both are false when the
// card does not advertise the extension.
type Steering struct {
	// Interruptible is true when a WORKING task can be interrupted.
	Interruptible bool `json:"interruptible"`
	// Steerable is true when a WORKING task accepts steering messages.
	Steerable bool `json:"steerable"`
}

// Skill is a skill the card lists.
type Skill struct {
	// ID is the skill's identifier.
	ID string `json:"id"`
	// Name is the skill's human-readable name.
	Name string `json:"name"`
	// Tags are keywords describing the skill.
	Tags []string `json:"tags"`
}

// Supports reports whether the agent has the capability, named canonically,
// in any spelling [CanonicalName] accepts, or by extension URI.
func (p *Profile) Supports(name string) bool {
	_, ok := p.Capabilities[CanonicalName(name)]
	return ok
}

// Tier returns the tier of a capability the agent has, and false when the
// agent lacks it.
func (p *Profile) Tier(name string) (Tier, bool) {
	c, ok := p.Capabilities[CanonicalName(name)]
	return c.Tier, ok
}

// HasExtension reports whether the card advertises the extension uri.
func (p *Profile) HasExtension(uri string) bool {
	for i := range p.Extensions {
		if p.Extensions[i].URI == uri {
			return true
		}
	}
	return false
}

// AgentCard returns the card as a2a-go types, for building clients, with
// interface protocol versions normalized to Major.Minor. The profile keeps
// only the compacted card JSON, a fraction of the parsed form's memory, so
// each call parses it anew (tens of microseconds); callers that need the
// card often should keep the result. Build has already checked that the
// card parses, so an error here means the profile was not made by Build.
func (p *Profile) AgentCard() (*a2a.AgentCard, error) {
	if p.card == nil {
		return nil, fmt.Errorf("profile %q has no card", p.ID)
	}
	return sdkCard(p.card, p.Protocols)
}
