package console

import (
	"slices"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// treeView is a delegation's tree page: the hops of its chain, as far as
// this orchd knows them, its events, receipts and decision.
type treeView struct {
	Rec    delegation.Record
	Hops   []hopView
	Events []delegation.Event
	// Last is the sequence number of the last event shown, which the
	// script follows on from: newer events, and those past the page's
	// limit, arrive live.
	Last int64
	// Ended is true when the event log is complete: nothing follows.
	Ended bool
	// Receipts are the steering receipts among the events, oldest first.
	Receipts []receiptView
	// BelowUnknown is set when the downstream agent is an orchd and no
	// receipt has named the hops below it yet.
	BelowUnknown bool
	// Flash is the outcome of the control just used, after a form post.
	Flash *flash
}

// hopView is one hop of a chain.
type hopView struct {
	// Depth is the hop's place: 0 for the root.
	Depth int
	// Name names the hop: an orchd's name or identity, an agent's id.
	Name string
	// Role is "upstream orchd", "this orchd", "agent", "orchd" or "agent
	// below".
	Role string
	// State is the hop's state where this orchd knows it: its own
	// delegation's, which mirrors every hop below.
	State a2a.TaskState
	// Task is the hop's task id at the agent, when known.
	Task a2a.TaskID
	// Source says how this orchd knows the hop.
	Source string
	// Seqs lists the signal numbers the hop gave, from the receipts.
	Seqs []int64
	// Lineage is set on a hop known from the lineage, whose state is its
	// own; Created and Updated are its delegation's timings there.
	Lineage          bool
	Created, Updated time.Time
}

type receiptView struct {
	Seq int64
	At  time.Time
	steering.Receipt
}

// newTree builds the tree of rec with its events; down is its downstream
// agent when the registry still has it.
func newTree(rec delegation.Record, evs []delegation.Event, ended bool, down *registry.Agent) treeView {
	v := treeView{Rec: rec, Events: evs, Ended: ended}
	if len(evs) > 0 {
		v.Last = evs[len(evs)-1].Seq
	}
	var last *steering.Receipt
	for _, ev := range evs {
		if ev.Receipt != nil {
			v.Receipts = append(v.Receipts, receiptView{Seq: ev.Seq, At: ev.At, Receipt: *ev.Receipt})
			last = ev.Receipt
		}
	}
	path := rec.Chain.Path
	for i, id := range path {
		h := hopView{Depth: i, Name: id, Role: "upstream orchd", Source: "chain context"}
		if i < len(rec.Chain.Names) && rec.Chain.Names[i] != "" {
			h.Name = rec.Chain.Names[i] + " (" + id + ")"
		}
		if i == len(path)-1 {
			h.Role, h.State, h.Source = "this orchd", rec.State, "its own record"
		}
		v.Hops = append(v.Hops, h)
	}
	if len(v.Hops) == 0 {
		v.Hops = append(v.Hops, hopView{Name: "this orchd", Role: "this orchd", State: rec.State, Source: "its own record"})
	}
	first := hopView{Depth: len(v.Hops), Name: rec.Downstream.Agent, Role: "agent", State: rec.State, Task: rec.Downstream.TaskID,
		Source: "the delegation's downstream hop"}
	orchd := down != nil && slices.ContainsFunc(down.Extensions, func(e capability.Extension) bool { return e.URI == delegation.ExtensionURI })
	if orchd {
		first.Role = "orchd"
	}
	v.Hops = append(v.Hops, first)
	self := len(v.Hops) - 2 // this orchd
	// The lineage the downstream orchd reports names every hop below it,
	// down to the leaf agent; without one, a receipt names them, as it
	// lists every hop that took a signal: this orchd first, then its
	// downstream agent, then each hop below it.
	if rec.Lineage != nil && len(rec.Lineage.Hops) > 0 {
		v.Hops = append(v.Hops, lineageHops(rec.Lineage, len(v.Hops))...)
	} else if last != nil && len(last.Hops) >= 2 {
		for i, h := range last.Hops[2:] {
			v.Hops = append(v.Hops, hopView{Depth: self + 2 + i, Name: h.Agent, Role: "agent below", State: rec.State,
				Source: "the latest steering receipt"})
		}
	} else if orchd && rec.Downstream.Agent != "" {
		v.BelowUnknown = true
	}
	if last != nil && len(last.Hops) >= 2 {
		for i := range last.Hops {
			if self+i < len(v.Hops) {
				v.Hops[self+i].Seqs = seqsOf(v.Receipts, i)
			}
		}
	}
	return v
}

// lineageHops are the hops below an orchd's downstream orchd, from the
// lineage it reported: the agent each orchd chose, with its state and
// timings; the last one is the leaf. depth is the first one's place.
func lineageHops(l *delegation.Lineage, depth int) []hopView {
	out := make([]hopView, 0, len(l.Hops)+1)
	for i, h := range l.Hops {
		name := h.Agent
		if h.AgentName != "" && h.AgentName != h.Agent {
			name = h.AgentName + " (" + h.Agent + ")"
		}
		role := "agent below" // the leaf
		if i < len(l.Hops)-1 || l.Truncated {
			role = "orchd below"
		}
		by := h.Orchd
		if h.Name != "" {
			by = h.Name
		}
		out = append(out, hopView{Depth: depth + i, Name: name, Role: role, State: h.State, Task: h.TaskID,
			Source: "the lineage " + by + " reported", Lineage: true, Created: h.CreatedAt, Updated: h.UpdatedAt})
	}
	if l.Truncated {
		out = append(out, hopView{Depth: depth + len(l.Hops), Name: "…", Role: "hops not shown", Lineage: true,
			Source: "the lineage was cut at its bounds"})
	}
	return out
}

// seqsOf returns the sequence numbers the hop at index i gave in each
// receipt that reached it.
func seqsOf(rs []receiptView, i int) []int64 {
	var out []int64
	for _, r := range rs {
		if i < len(r.Hops) {
			out = append(out, r.Hops[i].Seq)
		}
	}
	return out
}
