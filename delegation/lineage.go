package delegation

import (
	"encoding/json"
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/registry"
)

// Lineage up the chain.
//
// An orchd that delegates work another orchd passed to it tells that
// orchd, on every status update of the upstream task, what it chose and
// how the work stands: its own hop (which agent, the card's digest, the
// agent's task, its delegation's state and timings) followed by the hops
// the orchd below it reported in turn. Each hop puts itself first and
// passes on what came from below, the way steering receipts list their
// hops (steer.go), so the root ends with every hop down to the leaf agent,
// top first. The list travels in the delegation extension's metadata
// under "lineage" and is kept on the record (Record.Lineage).
//
// A delegation believes the lineage its hop reports only when the hop's
// pinned card declares the delegation extension and the hop is trusted
// (Progress.Lineage, decided when the work is sent: Config.TrustLineage);
// otherwise it ignores it, and the hop is a leaf. The list is bounded by
// MaxLineageHops, MaxLineageText and MaxLineageBytes; what is past a
// bound is dropped from the bottom and Lineage.Truncated says so.

// Bounds on a lineage, as read from a hop and as passed on.
const (
	// MaxLineageHops is the most hops a lineage holds.
	MaxLineageHops = 16
	// MaxLineageText bounds each text field of a hop (ids, names, the
	// digest, the state), in bytes: a hop with a longer one ends the
	// list, truncated.
	MaxLineageText = 256
	// MaxLineageBytes bounds the hops' JSON together.
	MaxLineageBytes = 8 << 10
)

// lineageKey names the lineage in the delegation extension's metadata.
const lineageKey = "lineage"

// Lineage is the chain of hops below a delegation, as the hop it went to
// reported it: the hop's own delegation first, then each hop below it.
type Lineage struct {
	// Hops lists the hops top first; the last one's agent is the leaf.
	Hops []LineageHop `json:"hops"`
	// Truncated is set when hops past the bounds were dropped.
	Truncated bool `json:"truncated,omitempty"`
}

// LineageHop is one orchd's delegation of the work: which orchd, which
// agent it chose and that agent's task, and how the delegation stands.
type LineageHop struct {
	// Orchd is the identity of the orchd that delegated (its chain
	// identity), Name its display name.
	Orchd string `json:"orchd"`
	Name  string `json:"name,omitempty"`
	// Delegation is the id of the orchd's delegation.
	Delegation string `json:"delegation,omitempty"`
	// Agent is the registry id the orchd knows its agent by, AgentName
	// the agent card's name, CardDigest the card it pinned.
	Agent      string `json:"agent"`
	AgentName  string `json:"agentName,omitempty"`
	CardDigest string `json:"cardDigest,omitempty"`
	// TaskID is the agent's task, once named.
	TaskID a2a.TaskID `json:"taskId,omitempty"`
	// State is the delegation's state: its agent's task's, as the orchd
	// follows it.
	State a2a.TaskState `json:"state"`
	// CreatedAt is when the orchd delegated, UpdatedAt when the
	// delegation last changed.
	CreatedAt time.Time `json:"createdAt,omitzero"`
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
}

// clone returns a deep copy of l; nil stays nil.
func (l *Lineage) clone() *Lineage {
	if l == nil {
		return nil
	}
	c := *l
	c.Hops = slices.Clone(l.Hops)
	return &c
}

// equal reports whether l and o hold the same hops.
func (l *Lineage) equal(o *Lineage) bool {
	if l == nil || o == nil {
		return l == o
	}
	return l.Truncated == o.Truncated && slices.EqualFunc(l.Hops, o.Hops, func(a, b LineageHop) bool {
		return a.Orchd == b.Orchd && a.Name == b.Name && a.Delegation == b.Delegation && a.Agent == b.Agent &&
			a.AgentName == b.AgentName && a.CardDigest == b.CardDigest && a.TaskID == b.TaskID && a.State == b.State &&
			a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt)
	})
}

// bounded returns the lineage within the bounds: hops past
// MaxLineageHops, from the first with a text field over MaxLineageText,
// and past MaxLineageBytes of JSON are dropped, and Truncated is set.
func (l Lineage) bounded() Lineage {
	size := 0
	for i, h := range l.Hops {
		b, err := json.Marshal(h)
		if i == MaxLineageHops || err != nil || !h.fits() || size+len(b) > MaxLineageBytes {
			l.Hops, l.Truncated = l.Hops[:i:i], true
			break
		}
		size += len(b)
	}
	return l
}

// fits reports whether each text field of h is within MaxLineageText.
func (h LineageHop) fits() bool {
	for _, s := range []string{h.Orchd, h.Name, h.Delegation, h.Agent, h.AgentName, h.CardDigest, string(h.TaskID), string(h.State)} {
		if len(s) > MaxLineageText {
			return false
		}
	}
	return true
}

// LineageFrom reads the lineage from the delegation extension's entry of
// a task's or a status update's metadata, within the bounds. It reports
// false when there is none, or when it is malformed: a hop that sends a
// lineage it cannot read is a leaf.
func LineageFrom(metadata map[string]any) (Lineage, bool) {
	ext, ok := metadata[ExtensionURI].(map[string]any)
	if !ok {
		return Lineage{}, false
	}
	raw, ok := ext[lineageKey].(map[string]any)
	if !ok {
		return Lineage{}, false
	}
	hops, ok := raw["hops"].([]any)
	if !ok {
		return Lineage{}, false
	}
	var l Lineage
	l.Truncated, _ = raw["truncated"].(bool)
	for i, v := range hops {
		m, ok := v.(map[string]any)
		if !ok {
			return Lineage{}, false
		}
		if i == MaxLineageHops {
			l.Truncated = true
			break
		}
		h, ok := lineageHopFrom(m)
		if !ok {
			return Lineage{}, false
		}
		l.Hops = append(l.Hops, h)
	}
	return l.bounded(), true
}

// lineageHopFrom reads one hop of a lineage; an orchd and an agent are
// required, the rest optional.
func lineageHopFrom(m map[string]any) (LineageHop, bool) {
	var h LineageHop
	ok := true
	text := func(key string, out *string) {
		switch v := m[key].(type) {
		case nil:
		case string:
			*out = v
		default:
			ok = false
		}
	}
	var task, state, created, updated string
	text("orchd", &h.Orchd)
	text("name", &h.Name)
	text("delegation", &h.Delegation)
	text("agent", &h.Agent)
	text("agentName", &h.AgentName)
	text("cardDigest", &h.CardDigest)
	text("taskId", &task)
	text("state", &state)
	text("createdAt", &created)
	text("updatedAt", &updated)
	h.TaskID, h.State = a2a.TaskID(task), a2a.TaskState(state)
	h.CreatedAt, _ = time.Parse(time.RFC3339Nano, created)
	h.UpdatedAt, _ = time.Parse(time.RFC3339Nano, updated)
	return h, ok && h.Orchd != "" && h.Agent != ""
}

// metadata writes the lineage as plain JSON values, so it encodes the
// same on every binding.
func (l Lineage) metadata() map[string]any {
	hops := make([]any, len(l.Hops))
	for i, h := range l.Hops {
		m := map[string]any{"orchd": h.Orchd, "agent": h.Agent, "state": string(h.State)}
		for k, v := range map[string]string{"name": h.Name, "delegation": h.Delegation, "agentName": h.AgentName,
			"cardDigest": h.CardDigest, "taskId": string(h.TaskID)} {
			if v != "" {
				m[k] = v
			}
		}
		if !h.CreatedAt.IsZero() {
			m["createdAt"] = h.CreatedAt.UTC().Format(time.RFC3339Nano)
		}
		if !h.UpdatedAt.IsZero() {
			m["updatedAt"] = h.UpdatedAt.UTC().Format(time.RFC3339Nano)
		}
		hops[i] = m
	}
	out := map[string]any{"hops": hops}
	if l.Truncated {
		out["truncated"] = true
	}
	return out
}

// Reports reports whether the delegation of rec tells its caller its
// lineage: only when the work came with a chain context this orchd
// believed (from a trusted peer, or any caller when no authentication is
// configured), so the agents and tasks below go only to orchds the chain
// trusts.
func (rec Record) Reports() bool {
	return len(rec.Chain.Path) > 1 && rec.ChainIgnored == ""
}

// Report is the delegation extension's metadata entry an upstream task
// carries for the delegation of rec on an event whose state is state at
// at: the delegation's id, why a chain context was ignored, and, when
// rec.Reports, the lineage: this orchd's hop first, then below (the
// latest lineage its hop reported, rec.Lineage unless an event since
// carried a newer one), within the bounds.
func (e *Engine) Report(rec Record, below *Lineage, state a2a.TaskState, at time.Time) map[string]any {
	md := map[string]any{"delegation": rec.ID}
	if rec.ChainIgnored != "" {
		md["chainIgnored"] = rec.ChainIgnored
	}
	if !rec.Reports() || rec.Downstream.Agent == "" {
		return md
	}
	l := Lineage{Hops: []LineageHop{{Orchd: e.cfg.Self, Name: e.cfg.Name, Delegation: rec.ID, Agent: rec.Downstream.Agent,
		AgentName: rec.Downstream.Name, CardDigest: rec.Downstream.CardDigest, TaskID: rec.Downstream.TaskID,
		State: state, CreatedAt: rec.CreatedAt, UpdatedAt: at}}}
	if below != nil {
		l.Hops = append(l.Hops, below.Hops...)
		l.Truncated = below.Truncated
	}
	md[lineageKey] = l.bounded().metadata()
	return md
}

// lineageLocked reads the lineage a downstream status or task carries,
// when the delegation believes its hop's (Progress.Lineage), and reports
// whether it differs from the one the record holds. Callers hold mu.
func (d *Delegation) lineageLocked(metadata map[string]any) (*Lineage, bool) {
	if !d.prog.Lineage || metadata == nil {
		return nil, false
	}
	l, ok := LineageFrom(metadata)
	if !ok || d.rec.Lineage.equal(&l) {
		return nil, false
	}
	return &l, true
}

// trustsLineage reports whether the lineage agent a reports is believed:
// its card declares the delegation extension, and Config.TrustLineage
// trusts it.
func (e *Engine) trustsLineage(a *registry.Agent) bool {
	return readsChain(a) && e.cfg.TrustLineage != nil && e.cfg.TrustLineage(a.ID)
}
