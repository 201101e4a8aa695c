package capability

import (
	"slices"
	"sort"
)

// Drift is what changed between two cards of the same agent. The
// capability declaration contract (§5) lets a capability be deprecated but
// never removed without deprecation first; such a removal is listed in
// Violations.
type Drift struct {
	// From and To are the digests of the old and new cards.
	From string `json:"from"`
	To   string `json:"to"`
	// Added lists capabilities the new card has and the old one lacked.
	Added []string `json:"added,omitempty"`
	// Removed lists capabilities the old card had and the new one lacks.
	Removed []string `json:"removed,omitempty"`
	// Deprecated lists capabilities that became Tier 3.
	Deprecated []string `json:"deprecated,omitempty"`
	// Versions lists, per binding, the A2A versions gained and lost.
	Versions []VersionChange `json:"versions,omitempty"`
	// Range is set when the card's declared version range changed.
	Range *RangeChange `json:"range,omitempty"`
	// Violations names each removal of a capability that was not deprecated
	// in the old card.
	Violations []string `json:"violations,omitempty"`
	// Signature is set when the card's signature stopped verifying, and
	// says why ("signature no longer verifies: ..."). Diff never sets it:
	// whoever verifies signatures does.
	Signature string `json:"signature,omitempty"`
}

// VersionChange is the change in the versions an agent speaks over one
// binding.
type VersionChange struct {
	// Binding is the protocol binding, e.g. JSONRPC.
	Binding string `json:"binding"`
	// Added lists versions the agent now speaks over Binding.
	Added []string `json:"added,omitempty"`
	// Removed lists versions it no longer speaks over Binding.
	Removed []string `json:"removed,omitempty"`
}

// RangeChange is a change of the card's minProtocolVersion and
// maxProtocolVersion; "" means the bound was absent.
type RangeChange struct {
	// OldMin and OldMax are the old card's bounds.
	OldMin string `json:"oldMin"`
	OldMax string `json:"oldMax"`
	// NewMin and NewMax are the new card's bounds.
	NewMin string `json:"newMin"`
	NewMax string `json:"newMax"`
}

// Empty reports whether nothing orchd decides on changed. Cosmetic card
// edits (description, skill wording) change the digest but give an empty
// drift.
func (d *Drift) Empty() bool {
	return len(d.Added) == 0 && len(d.Removed) == 0 && len(d.Deprecated) == 0 &&
		len(d.Versions) == 0 && d.Range == nil && d.Signature == ""
}

// Diff compares an agent's old profile with its new one.
func Diff(old, cur *Profile) Drift {
	d := Drift{From: old.Digest, To: cur.Digest}
	for name, c := range cur.Capabilities {
		oc, ok := old.Capabilities[name]
		switch {
		case !ok:
			d.Added = append(d.Added, name)
		case c.Deprecated && !oc.Deprecated:
			d.Deprecated = append(d.Deprecated, name)
		}
	}
	for name, oc := range old.Capabilities {
		if _, ok := cur.Capabilities[name]; ok {
			continue
		}
		d.Removed = append(d.Removed, name)
		if !oc.Deprecated {
			d.Violations = append(d.Violations, name+" was removed without being deprecated first")
		}
	}
	sort.Strings(d.Added)
	sort.Strings(d.Removed)
	sort.Strings(d.Deprecated)
	sort.Strings(d.Violations)

	oldV, curV := versionsByBinding(old), versionsByBinding(cur)
	bindings := make([]string, 0, len(oldV)+len(curV))
	for b := range oldV {
		bindings = append(bindings, b)
	}
	for b := range curV {
		if _, ok := oldV[b]; !ok {
			bindings = append(bindings, b)
		}
	}
	sort.Strings(bindings)
	for _, b := range bindings {
		vc := VersionChange{Binding: b, Added: missing(curV[b], oldV[b]), Removed: missing(oldV[b], curV[b])}
		if len(vc.Added) > 0 || len(vc.Removed) > 0 {
			d.Versions = append(d.Versions, vc)
		}
	}
	if old.MinProtocolVersion != cur.MinProtocolVersion || old.MaxProtocolVersion != cur.MaxProtocolVersion {
		d.Range = &RangeChange{OldMin: old.MinProtocolVersion, OldMax: old.MaxProtocolVersion, NewMin: cur.MinProtocolVersion, NewMax: cur.MaxProtocolVersion}
	}
	return d
}

func versionsByBinding(p *Profile) map[string][]string {
	out := map[string][]string{}
	for _, pr := range p.Protocols {
		if !slices.Contains(out[pr.Binding], pr.Version) {
			out[pr.Binding] = append(out[pr.Binding], pr.Version)
		}
	}
	return out
}

// missing returns the elements of a not in b, sorted as versions.
func missing(a, b []string) []string {
	var out []string
	for _, v := range a {
		if !slices.Contains(b, v) {
			out = append(out, v)
		}
	}
	sortVersions(out)
	return out
}
