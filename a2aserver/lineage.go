package a2aserver

import (
	"maps"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
)

// reporter writes the delegation extension's entry of an upstream task's
// metadata: the delegation's id, and, for work an upstream orchd passed
// on with a chain this orchd believed, the lineage (what this orchd chose
// and the hops below it; delegation/lineage.go). The entry goes on the
// task's first event and on every status update, whole, since a2a-go
// merges status metadata into the task key by key.
type reporter struct {
	engine *delegation.Engine
	rec    delegation.Record
	// below is the latest lineage the delegation's hop reported, as of
	// the last event written.
	below *delegation.Lineage
	// state is the state of the last status written, when known.
	state a2a.TaskState
}

// newReporter reports for the delegation of rec, mirrored from the event
// after seq after: below starts as rec's lineage unless the events are
// replayed from the first.
func newReporter(e *delegation.Engine, rec delegation.Record, after int64) *reporter {
	r := &reporter{engine: e, rec: rec, state: a2a.TaskStateSubmitted}
	if after > 0 {
		r.below, r.state = rec.Lineage, ""
	}
	return r
}

// task is the first event of the upstream task, whose first message is
// msg: SUBMITTED, with the entry as the delegation stood when it was
// submitted. The events replayed after it bring the rest.
func (r *reporter) task(info a2a.TaskInfoProvider, msg *a2a.Message) *a2a.Task {
	t := a2a.NewSubmittedTask(info, msg)
	t.Metadata = map[string]any{taskDelegationKey: r.engine.Report(r.rec, nil, a2a.TaskStateSubmitted, r.rec.CreatedAt)}
	return t
}

// event is upstreamEvent of ev, a status update carrying the entry as of
// ev when the delegation reports its lineage. A state event that brings
// only a new lineage (the state as it was, nothing said) is nil when the
// delegation does not report its lineage: the caller would get a status
// update with nothing new.
func (r *reporter) event(info a2a.TaskInfoProvider, ev delegation.Event) a2a.Event {
	if ev.Lineage != nil {
		r.below = ev.Lineage
	}
	up := upstreamEvent(info, ev)
	st, ok := up.(*a2a.TaskStatusUpdateEvent)
	if !ok {
		return up
	}
	onlyLineage := ev.Kind == "state" && ev.Lineage != nil && ev.State == r.state && ev.Message == nil && ev.Error == "" && len(ev.Metadata) == 0
	r.state = ev.State
	if !r.rec.Reports() {
		if onlyLineage {
			return nil
		}
		return up
	}
	md := maps.Clone(st.Metadata) // the event's own, shared with the log
	if md == nil {
		md = map[string]any{}
	}
	md[taskDelegationKey] = r.engine.Report(r.rec, r.below, ev.State, ev.At)
	st.Metadata = md
	return st
}
