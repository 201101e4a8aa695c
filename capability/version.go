package capability

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/go-version"
)

// Bindings orchd knows by name. Any other binding string is carried through
// as written and counts as one orchd cannot speak.
const (
	BindingJSONRPC  = "JSONRPC"
	BindingHTTPJSON = "HTTP+JSON"
	BindingGRPC     = "GRPC"
)

// Protocol is one (version, binding, URL) combination an agent serves.
type Protocol struct {
	// Version is the A2A version in Major.Minor form, e.g. "1.0" or "0.3".
	Version string `json:"version"`
	// Binding is the protocol binding: JSONRPC, HTTP+JSON, GRPC or a custom URI.
	Binding string `json:"binding"`
	// URL is where the binding is served.
	URL string `json:"url"`
	// Tenant is the interface's tenant, which clients must copy into every
	// request, or "" when the interface has none.
	Tenant string `json:"tenant,omitempty"`

	v *version.Version
}

// ClientSupport says which A2A versions a client speaks over which binding,
// in Major.Minor form. It decides a profile's Compatible field.
type ClientSupport map[string][]string

// DefaultClient is what orchd's own client speaks: A2A 1.0 and 0.3 over
// JSON-RPC, HTTP+JSON and gRPC, the bindings its delegation client wires
// (gRPC through a2a-go's a2agrpc v1 and v0 transports).
func DefaultClient() ClientSupport {
	return ClientSupport{
		BindingJSONRPC:  {"0.3", "1.0"},
		BindingHTTPJSON: {"0.3", "1.0"},
		BindingGRPC:     {"0.3", "1.0"},
	}
}

// speaks reports whether the client can talk to p. Versions match when they
// share the major version and, below 1.0 where every minor version broke the
// wire, the minor version too; this is how a2a-go picks a transport.
func (cs ClientSupport) speaks(p Protocol) bool {
	if p.v == nil {
		return false
	}
	for _, s := range cs[p.Binding] {
		cv, err := version.NewVersion(s)
		if err != nil {
			continue
		}
		a, b := cv.Segments(), p.v.Segments()
		if a[0] != b[0] {
			continue
		}
		if a[0] == 0 && a[1] != b[1] {
			continue
		}
		return true
	}
	return false
}

// versions returns the client's versions over all bindings, sorted.
func (cs ClientSupport) versions() []string {
	var out []string
	for _, vs := range cs {
		for _, v := range vs {
			if !slices.Contains(out, v) {
				out = append(out, v)
			}
		}
	}
	sortVersions(out)
	return out
}

// normalizeVersion turns "0.3.0", "v1", "1.0" into Major.Minor. It reports
// false for strings that are not versions.
func normalizeVersion(s string) (string, *version.Version, bool) {
	v, err := version.NewVersion(strings.TrimSpace(s))
	if err != nil {
		return "", nil, false
	}
	seg := v.Segments()
	mm := fmt.Sprintf("%d.%d", seg[0], seg[1])
	v, err = version.NewVersion(mm)
	if err != nil {
		return "", nil, false
	}
	return mm, v, true
}

// sortVersions sorts Major.Minor strings numerically ("0.3" < "1.0" < "1.10").
func sortVersions(vs []string) {
	sort.Slice(vs, func(i, j int) bool {
		a, errA := version.NewVersion(vs[i])
		b, errB := version.NewVersion(vs[j])
		if errA != nil || errB != nil {
			return vs[i] < vs[j]
		}
		return a.LessThan(b)
	})
}

// Compatible reports whether the agent speaks at least one A2A version that
// satisfies constraint, over any binding. The constraint uses
// hashicorp/go-version syntax: ">= 0.3, < 2.0", "~> 1.0", "= 1.0".
func (p *Profile) Compatible(constraint string) (bool, error) {
	if p.compatible != nil {
		if ok, found := p.compatible.m.Load(constraint); found {
			return ok.(bool), nil
		}
	}
	c, err := version.NewConstraint(constraint)
	if err != nil {
		return false, fmt.Errorf("version constraint %q: %w", constraint, err)
	}
	ok := p.Satisfies(c)
	if p.compatible != nil && p.compatible.n.Add(1) <= maxCachedConstraints {
		p.compatible.m.Store(constraint, ok)
	}
	return ok, nil
}

// Satisfies is [Profile.Compatible] for a constraint parsed once by the
// caller, the form to use on hot paths.
func (p *Profile) Satisfies(c version.Constraints) bool {
	for _, v := range p.versions {
		if c.Check(v) {
			return true
		}
	}
	return false
}

// Versions returns the A2A versions the agent speaks over binding, sorted;
// with binding "" it returns the versions over every binding.
func (p *Profile) Versions(binding string) []string {
	var out []string
	for _, pr := range p.Protocols {
		if (binding == "" || pr.Binding == binding) && !slices.Contains(out, pr.Version) {
			out = append(out, pr.Version)
		}
	}
	sortVersions(out)
	return out
}

// incompatibleReason explains why no protocol of protos is one the client
// speaks, e.g. "speaks only 2.0 over JSONRPC; orchd speaks 0.3, 1.0".
func incompatibleReason(protos []Protocol, cs ClientSupport) string {
	if len(protos) == 0 {
		return "declares no interface orchd can reach"
	}
	byBinding := map[string][]string{}
	var bindings []string
	for _, p := range protos {
		if _, ok := byBinding[p.Binding]; !ok {
			bindings = append(bindings, p.Binding)
		}
		if !slices.Contains(byBinding[p.Binding], p.Version) {
			byBinding[p.Binding] = append(byBinding[p.Binding], p.Version)
		}
	}
	sort.Strings(bindings)
	parts := make([]string, 0, len(bindings))
	foreign := false
	for _, b := range bindings {
		vs := byBinding[b]
		sortVersions(vs)
		parts = append(parts, strings.Join(vs, ", ")+" over "+b)
		if _, ok := cs[b]; !ok {
			foreign = true
		}
	}
	reason := "speaks only " + strings.Join(parts, " and ") + "; orchd speaks " + strings.Join(cs.versions(), ", ")
	if foreign {
		known := make([]string, 0, len(cs))
		for b := range cs {
			known = append(known, b)
		}
		sort.Strings(known)
		reason += " over " + strings.Join(known, ", ")
	}
	return reason
}
