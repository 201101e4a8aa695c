package delegation

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// ExtensionURI identifies orchd's delegation extension, version 1. Its data
// travels in the message metadata under this key (see docs/delegation.md).
const ExtensionURI = "https://github.com/orchd/orchd/extensions/delegation/v1"

// DefaultMaxDepth is the chain depth limit when neither the request nor
// the configuration sets one.
const DefaultMaxDepth = 8

// Chain is the delegation chain context carried by the extension.
type Chain struct {
	// Path lists the ids of the orchestrators the work has passed
	// through, root first.
	Path []string `json:"path"`
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
	b, err := json.Marshal(raw)
	if err != nil {
		return Chain{}, true, fmt.Errorf("delegation extension metadata: %w", err)
	}
	var c Chain
	if err := json.Unmarshal(b, &c); err != nil {
		return Chain{}, true, fmt.Errorf("delegation extension metadata: %w", err)
	}
	if c.Depth < 0 || c.MaxDepth < 0 {
		return Chain{}, true, errors.New("delegation extension metadata: negative depth")
	}
	return c, true, nil
}

// Attach writes the chain context into a message's metadata.
func (c Chain) Attach(m *a2a.Message) {
	if m.Metadata == nil {
		m.Metadata = map[string]any{}
	}
	// Stored as a generic value so it marshals the same on every binding.
	var v map[string]any
	b, _ := json.Marshal(c)
	_ = json.Unmarshal(b, &v)
	m.Metadata[ExtensionURI] = v
}

// Enter checks that self may take part in the chain and returns the chain
// as self passes it on: self appended to the path and the depth of the
// next hop. It refuses a cycle (self already in the path) and a next hop
// beyond MaxDepth, naming the path.
func (c Chain) Enter(self string) (Chain, error) {
	if c.MaxDepth == 0 {
		c.MaxDepth = DefaultMaxDepth
	}
	if slices.Contains(c.Path, self) {
		return Chain{}, fmt.Errorf("%w: %s is already in the path %s", ErrCycle, self, c.pathString(self))
	}
	next := c
	next.Path = append(slices.Clone(c.Path), self)
	next.Depth = c.Depth + 1
	next.Requires = slices.Clone(c.Requires)
	if next.Depth > c.MaxDepth {
		return Chain{}, fmt.Errorf("%w: another hop from %s would be hop %d of at most %d (path %s)",
			ErrTooDeep, self, next.Depth, c.MaxDepth, strings.Join(next.Path, " → "))
	}
	return next, nil
}

func (c Chain) pathString(self string) string {
	return strings.Join(append(slices.Clone(c.Path), self), " → ")
}
