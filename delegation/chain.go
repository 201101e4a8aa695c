package delegation

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/registry"
)

// ExtensionURI identifies orchd's delegation extension, version 1. Its data
// travels in the message metadata under this key (see docs/delegation.md).
const ExtensionURI = "https://github.com/orchd/orchd/extensions/delegation/v1"

// DefaultMaxDepth is the chain depth limit when neither the request nor
// the configuration sets one.
const DefaultMaxDepth = 8

// Chain is the delegation chain context carried by the extension.
type Chain struct {
	// Path lists the identities of the orchestrators the work has passed
	// through, root first. Cycles are found by comparing identities, which
	// are unique per orchd (see docs/delegation.md).
	Path []string `json:"path"`
	// Names are the display names (card names) of the orchestrators in
	// Path, index for index, for messages a person reads. It may be empty
	// or shorter when an orchestrator sent none; identities still decide.
	Names []string `json:"names,omitempty"`
	// Depth is how many hops the work has taken to reach the receiver:
	// 1 for an agent the root delegated to.
	Depth int `json:"depth"`
	// MaxDepth is the most hops the chain allows.
	MaxDepth int `json:"maxDepth"`
	// Deadline is when the root stops waiting for the work, if set.
	Deadline time.Time `json:"deadline,omitzero"`
	// Skill is the skill the root asked for.
	Skill string `json:"skill,omitempty"`
	// Requires lists capabilities every agent in the chain must have.
	Requires []string `json:"requires,omitempty"`
	// RootTask identifies the work at the root.
	RootTask string `json:"rootTask,omitempty"`
	// Verified lists, index for index with Path, the authenticated
	// identity under which the next hop received the work from that
	// orchestrator: entry i is the principal hop i+1 authenticated when
	// hop i called it. An entry is "" where the receiver authenticated no
	// one (a daemon with no authentication configured). The receiving
	// orchd fills in the last entry itself; it never takes it from the
	// caller.
	Verified []string `json:"verified,omitempty"`
	// OnBehalfOf is the authenticated caller at the root, the one the work
	// is for, so tenants stay apart along the whole chain. A receiver
	// believes it only from a peer it trusts (docs/security.md).
	OnBehalfOf *Principal `json:"onBehalfOf,omitempty"`
}

// Principal is an authenticated caller as a chain carries it and a
// record keeps it: who, and in which tenant. A record's owner also says
// how the caller was authenticated, so that the same id under another
// method or issuer is another owner; a chain's onBehalfOf carries only
// the principal and tenant, which the next orchd believes from a trusted
// peer alone.
type Principal struct {
	// ID identifies the principal within its tenant.
	ID string `json:"principal"`
	// Tenant is the principal's tenant; "" when it has none.
	Tenant string `json:"tenant,omitempty"`
	// Method is how the owner was authenticated (policies.Caller.Method):
	// "token", "jwt", "mtls", or "peer" for a root caller a trusted orchd
	// vouched for. Empty in chains, and in owners recorded before owners
	// carried it.
	Method string `json:"method,omitempty"`
	// Issuer is who vouched for the owner (policies.Caller.Issuer): a
	// JWT's issuer, or the trusted peer; empty otherwise.
	Issuer string `json:"issuer,omitempty"`
}

// Errors an orchestrator receiving delegated work decides on.
var (
	// ErrCycle means the receiver is already in the chain's path.
	ErrCycle = errors.New("delegation cycle")
	// ErrTooDeep means another hop would exceed the chain's max depth.
	ErrTooDeep = errors.New("delegation chain too deep")
	// ErrDeadline means the chain's deadline has passed.
	ErrDeadline = errors.New("delegation deadline passed")
)

// ChainFrom reads the extension's chain context from message metadata. It
// reports false when the message carries none; malformed data is an error.
func ChainFrom(metadata map[string]any) (Chain, bool, error) {
	raw, ok := metadata[ExtensionURI]
	if !ok {
		return Chain{}, false, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		// Not decoded JSON (a value set in process): take the slow path.
		b, err := json.Marshal(raw)
		if err != nil {
			return Chain{}, true, fmt.Errorf("delegation extension metadata: %w", err)
		}
		if err := json.Unmarshal(b, &m); err != nil {
			return Chain{}, true, fmt.Errorf("delegation extension metadata: want an object: %w", err)
		}
	}
	var c Chain
	var err error
	field := func(name string, read func(v any) error) {
		if v, ok := m[name]; ok && v != nil && err == nil {
			if e := read(v); e != nil {
				err = fmt.Errorf("delegation extension metadata: %s: %w", name, e)
			}
		}
	}
	field("path", func(v any) error { c.Path, err = stringList(v); return err })
	field("names", func(v any) error { c.Names, err = stringList(v); return err })
	field("requires", func(v any) error { c.Requires, err = stringList(v); return err })
	field("depth", func(v any) error { c.Depth, err = integer(v); return err })
	field("maxDepth", func(v any) error { c.MaxDepth, err = integer(v); return err })
	field("skill", func(v any) error { return str(v, &c.Skill) })
	field("rootTask", func(v any) error { return str(v, &c.RootTask) })
	field("verified", func(v any) error { c.Verified, err = stringList(v); return err })
	field("onBehalfOf", func(v any) error {
		p, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("want an object, got %T", v)
		}
		c.OnBehalfOf = &Principal{}
		if e := str(p["principal"], &c.OnBehalfOf.ID); e != nil || c.OnBehalfOf.ID == "" {
			return errors.New("principal: want a non-empty string")
		}
		if t, ok := p["tenant"]; ok && t != nil {
			return str(t, &c.OnBehalfOf.Tenant)
		}
		return nil
	})
	field("deadline", func(v any) error {
		var s string
		if e := str(v, &s); e != nil {
			return e
		}
		t, e := time.Parse(time.RFC3339Nano, s)
		c.Deadline = t
		return e
	})
	if err != nil {
		return Chain{}, true, err
	}
	if c.Depth < 0 || c.MaxDepth < 0 {
		return Chain{}, true, errors.New("delegation extension metadata: negative depth")
	}
	if len(c.Names) > len(c.Path) {
		return Chain{}, true, fmt.Errorf("delegation extension metadata: %d names for a path of %d", len(c.Names), len(c.Path))
	}
	if len(c.Verified) > len(c.Path) {
		return Chain{}, true, fmt.Errorf("delegation extension metadata: %d verified identities for a path of %d", len(c.Verified), len(c.Path))
	}
	return c, true, nil
}

func str(v any, out *string) error {
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("want a string, got %T", v)
	}
	*out = s
	return nil
}

func integer(v any) (int, error) {
	switch n := v.(type) {
	case float64:
		if n != float64(int(n)) {
			return 0, fmt.Errorf("want an integer, got %v", n)
		}
		return int(n), nil
	case int:
		return n, nil
	case json.Number:
		i, err := n.Int64()
		return int(i), err
	}
	return 0, fmt.Errorf("want a number, got %T", v)
}

func stringList(v any) ([]string, error) {
	switch l := v.(type) {
	case []string:
		return slices.Clone(l), nil
	case []any:
		out := make([]string, len(l))
		for i, x := range l {
			s, ok := x.(string)
			if !ok {
				return nil, fmt.Errorf("item %d: want a string, got %T", i, x)
			}
			out[i] = s
		}
		return out, nil
	}
	return nil, fmt.Errorf("want a list of strings, got %T", v)
}

// Attach writes the chain context into a message's metadata, as plain JSON
// values so it encodes the same on every binding.
func (c Chain) Attach(m *a2a.Message) {
	if m.Metadata == nil {
		m.Metadata = map[string]any{}
	}
	v := map[string]any{"path": anyList(c.Path), "depth": c.Depth, "maxDepth": c.MaxDepth}
	if len(c.Names) > 0 {
		v["names"] = anyList(c.Names)
	}
	if !c.Deadline.IsZero() {
		v["deadline"] = c.Deadline.Format(time.RFC3339Nano)
	}
	if c.Skill != "" {
		v["skill"] = c.Skill
	}
	if len(c.Requires) > 0 {
		v["requires"] = anyList(c.Requires)
	}
	if c.RootTask != "" {
		v["rootTask"] = c.RootTask
	}
	if len(c.Verified) > 0 {
		v["verified"] = anyList(c.Verified)
	}
	if c.OnBehalfOf != nil {
		p := map[string]any{"principal": c.OnBehalfOf.ID}
		if c.OnBehalfOf.Tenant != "" {
			p["tenant"] = c.OnBehalfOf.Tenant
		}
		v["onBehalfOf"] = p
	}
	m.Metadata[ExtensionURI] = v
}

func anyList(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// readsChain reports whether an agent's card declares the delegation
// extension, so messages to it carry the chain context. Other agents get
// none: the extension's data, whom the work is for among it, goes only to
// agents that say they read it, as its activation header does
// (a2aext.NewActivator sends only the extensions the card declares).
func readsChain(a *registry.Agent) bool {
	for i := range a.Extensions {
		if a.Extensions[i].URI == ExtensionURI {
			return true
		}
	}
	return false
}

// Enter checks that the orchestrator with identity self (and display name
// name) may take part in the chain and returns the chain as it passes it
// on: self appended to the path, name to the names, and the depth of the
// next hop. It refuses a cycle (self already in the path) and a next hop
// beyond MaxDepth, naming the path.
func (c Chain) Enter(self, name string) (Chain, error) {
	if c.MaxDepth == 0 {
		c.MaxDepth = DefaultMaxDepth
	}
	next := c
	next.Path = append(slices.Clone(c.Path), self)
	next.Names = append(c.paddedNames(), name)
	if len(c.Verified) > 0 {
		next.Verified = append(padded(c.Verified, len(c.Path)), "")
	}
	next.Depth = c.Depth + 1
	next.Requires = slices.Clone(c.Requires)
	if slices.Contains(c.Path, self) {
		return Chain{}, fmt.Errorf("%w: %s is already in the path %s", ErrCycle, hopName(self, name), next.PathString())
	}
	if next.Depth > c.MaxDepth {
		return Chain{}, fmt.Errorf("%w: another hop from %s would be hop %d of at most %d (path %s)",
			ErrTooDeep, hopName(self, name), next.Depth, c.MaxDepth, next.PathString())
	}
	return next, nil
}

// paddedNames returns a copy of Names as long as Path, "" where a hop sent
// no name.
func (c Chain) paddedNames() []string { return padded(c.Names, len(c.Path)) }

// padded returns a copy of ss n long (with room for one more), "" where
// ss is shorter.
func padded(ss []string, n int) []string {
	out := make([]string, n, n+1)
	copy(out, ss)
	return out
}

// Received returns the chain as a receiver that authenticated its caller
// as peer sees it: the last path entry, the caller's own, verified as
// peer. Whatever the caller claimed for that entry is replaced.
func (c Chain) Received(peer string) Chain {
	if len(c.Path) == 0 {
		return c
	}
	c.Verified = padded(c.Verified, len(c.Path))
	c.Verified[len(c.Path)-1] = peer
	return c
}

// PathString writes the path for people: each hop's name with its
// identity ("gateway (orchd-1f2e…) → research (orchd-9a8b…)").
func (c Chain) PathString() string {
	var b strings.Builder
	for i, id := range c.Path {
		if i > 0 {
			b.WriteString(" → ")
		}
		name := ""
		if i < len(c.Names) {
			name = c.Names[i]
		}
		b.WriteString(hopName(id, name))
	}
	return b.String()
}

// hopName writes an orchestrator of a chain for people: its display name
// with its identity, or the identity alone when the two are the same or
// there is no name.
func hopName(id, name string) string {
	if name == "" || name == id {
		return id
	}
	return name + " (" + id + ")"
}
