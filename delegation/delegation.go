package delegation

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"go.opentelemetry.io/otel/trace"

	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
	"github.com/orchd/orchd/telemetry"
)

// Event is one entry of a delegation's event log. Seq numbers start at 1
// and have no gaps, so a client that saw event N resumes after N.
type Event struct {
	// Seq is the event's position in the log.
	Seq int64 `json:"seq"`
	// At is when orchd saw the event.
	At time.Time `json:"at"`
	// Kind is state (the state changed), message (the agent or the caller
	// said something), artifact (the agent produced output), steer or
	// interrupt (the caller's signal was passed on), or contained (an
	// agent the work reaches was contained: KindContained).
	Kind string `json:"kind"`
	// State is the delegation's state after the event.
	State a2a.TaskState `json:"state"`
	// Message is the status or input message, for state and message
	// events.
	Message *a2a.Message `json:"message,omitempty"`
	// Artifact is the artifact the agent produced, for artifact events:
	// the whole artifact, or, when Append is set, the parts (and the
	// metadata) to add to the artifact with its id, as A2A's artifact
	// updates say. Folding a log's artifact events in order gives the
	// delegation's artifacts.
	Artifact *a2a.Artifact `json:"artifact,omitempty"`
	// Append is set on an artifact event that continues the artifact with
	// its id rather than replacing it.
	Append bool `json:"append,omitempty"`
	// LastChunk is set on an artifact event the agent marked as the last
	// chunk of its artifact.
	LastChunk bool `json:"lastChunk,omitempty"`
	// Error is set on the event that failed the delegation.
	Error string `json:"error,omitempty"`
	// Metadata is the downstream status's metadata, such as the steering
	// extension's interrupted flag.
	Metadata map[string]any `json:"metadata,omitempty"`
	// Receipt is set on steer and interrupt events: which hops accepted the
	// signal, and at which sequence number.
	Receipt *steering.Receipt `json:"receipt,omitempty"`
	// Containment is set on contained events: who contained which agent
	// the work reaches, when and why.
	Containment *registry.Containment `json:"containment,omitempty"`
	// Lineage is set on a state event that brought a new lineage from
	// the hop: the hops below it as they stand from this event on
	// (lineage.go).
	Lineage *Lineage `json:"lineage,omitempty"`
}

// KindContained is the kind of the event logged when an agent the work
// reaches is contained, before the work is interrupted or canceled.
const KindContained = "contained"

// Delegation is one piece of work handed to an agent. Its methods are safe
// for concurrent use, except those named …Locked, whose callers hold mu.
type Delegation struct {
	engine *Engine
	client *a2aclient.Client
	chain  Chain
	// span is the delegate span: later calls to the agent (the stream,
	// polls, input, steering) join its trace.
	span trace.SpanContext
	// callerTrace is the trace context the caller sent, kept when orchd
	// does not trace: the later calls made in the engine's context pass it
	// on unchanged, so they stay in the caller's trace.
	callerTrace telemetry.TraceHeaders

	// op serializes the operations on the downstream task (input, cancel,
	// a steering signal, the deadline's expiry) so two cannot act on it at
	// once. Lock order: op before mu.
	op sync.Mutex

	// mu guards what changes while the delegation runs: the record, the
	// log and the fields below. It is held while an event is stored
	// (emitLocked, persistLocked), so readers of the record wait for the
	// store.
	mu     sync.Mutex
	rec    Record
	events []Event
	first  int64 // Seq of events[0]
	// changed is closed at the next event; nil until someone waits for
	// one (changedLocked), as no one does for most delegations.
	changed chan struct{}
	// stopFollow ends the goroutine following the downstream task, if one
	// runs; followDone is closed when it has returned.
	stopFollow context.CancelFunc
	followDone chan struct{}
	// prog is how the hop is followed and what was signalled down it,
	// kept with the record so another process can carry on. Its
	// LastStatus is the id of the last status message applied: the same
	// status can arrive twice (an interrupt's acknowledgement and the
	// stream both carry it), and a late copy must not undo a resume. Its
	// receipts answer a retried signal, which is passed on once.
	prog Progress
	// statusAt is the latest timestamp of a status applied. A WORKING (or
	// SUBMITTED) stamped before it is a lagging stream's copy: of a status
	// before the INPUT_REQUIRED (or AUTH_REQUIRED) in force, once an
	// interrupt's acknowledgement was applied, which must not undo the
	// wait; or of progress a read of the task already showed, which must
	// not be logged twice. Only those are dropped, so a hop whose clock
	// moved back never loses a wait or an end.
	statusAt time.Time
	// settledAtOnce is set when the agent's first answer settled the
	// delegation, before Delegate returns (SettledAtOnce).
	settledAtOnce bool
	// life bounds the started delegation in time (deadline.go).
	life lifetime
	// listed is set once the ended delegation was handed to Engine.ended;
	// keeping while the engine writes an end the store did not keep
	// again (keepwrites.go), before.
	listed, keeping bool
	// lease is this process's lease on the delegation, nil when the
	// engine has no Leases.
	lease Lease
	// unsaved are events the store could not take yet, oldest first;
	// persistErr is why the last write of the record, or of an event
	// before it, failed, nil when the store holds both.
	unsaved    []Event
	persistErr error
	// chained is set when the hop's agent reads the chain context
	// (readsChain): the messages sent to it carry it.
	chained bool
	// keepUpstream is KeepEndedUpstream's keep, for a delegation the
	// agent's first answer ended (keepupstream.go).
	keepUpstream func(ctx context.Context, rec Record, evs []Event) error
	// deferred holds back the store writes (persistLocked) while the agent's
	// first answer is applied, when that answer ends the work: the events
	// and the record are then written once, ended (Engine.start).
	deferred bool
	// artifactBytes is about how many bytes rec.Artifacts holds
	// (artifactSize); restating is set while restateIfDueLocked logs them
	// (artifacts.go).
	artifactBytes int64
	restating     bool
	// slot is the delegation's place among the running ones (limits.go),
	// set before it is live and given back when it ends.
	slot *slot
}

// ID returns the delegation's id.
func (d *Delegation) ID() string { return d.rec.ID }

// Record returns a snapshot of the delegation.
func (d *Delegation) Record() Record {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snapshotLocked()
}

// SettledAtOnce reports whether the agent's first answer settled the
// delegation (ended it, or made it wait for input), so nothing more came
// from the agent before Delegate returned: a caller streaming the work
// would have seen that one answer alone.
func (d *Delegation) SettledAtOnce() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.settledAtOnce
}

// snapshotLocked copies the record, without its Progress; callers hold mu.
func (d *Delegation) snapshotLocked() Record {
	r := d.rec
	r.Artifacts = slices.Clone(r.Artifacts)
	return r
}

// storedLocked is the record as the store keeps it: with its Progress, without
// its artifacts, which its log holds (artifacts.go). Callers hold mu.
func (d *Delegation) storedLocked() Record {
	r := d.rec
	r.Artifacts = nil
	p := d.prog
	p.Receipts = slices.Clone(p.Receipts)
	r.Progress = &p
	return r
}

// modes are the steering modes of the hop's pinned card.
func (d *Delegation) modes() steering.Modes {
	return steering.Modes{Steerable: d.prog.Steerable, Interruptible: d.prog.Interruptible}
}

// Events returns the events kept in memory after seq, a channel closed at
// the next change, and whether the delegation has ended (no events will
// follow the ones returned). Memory keeps the latest Config.LiveEvents
// (and those the store has not taken yet): when older ones follow seq,
// the first returned event has a Seq above seq+1, and [Engine.Events]
// reads them from the store.
func (d *Delegation) Events(after int64) ([]Event, <-chan struct{}, bool) {
	evs, changed, ended, _ := d.window(after)
	return evs, changed, ended
}

// Changed returns a channel closed at the delegation's next event.
func (d *Delegation) Changed() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.changedLocked()
}

// window returns the events kept in memory after seq, the channel closed
// at the next change, whether the delegation has ended, and the Seq the
// memory window starts at.
func (d *Delegation) window(after int64) ([]Event, <-chan struct{}, bool, int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	start := max(after+1-d.first, 0)
	var out []Event
	if start < int64(len(d.events)) {
		out = slices.Clone(d.events[start:])
	}
	return out, d.changedLocked(), d.rec.State.Terminal(), d.first
}

// changedLocked returns the channel closed at the next event, made for the
// first waiter; callers hold mu.
func (d *Delegation) changedLocked() <-chan struct{} {
	if d.changed == nil {
		d.changed = make(chan struct{})
	}
	return d.changed
}

// wakeLocked closes the channel changedLocked handed out, so its waiters
// look again; callers hold mu.
func (d *Delegation) wakeLocked() {
	if d.changed != nil {
		close(d.changed)
		d.changed = nil
	}
}

// waiting reports whether the downstream task waits for the caller.
func waiting(s a2a.TaskState) bool {
	return s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// settles reports whether following a task in state s stops: it ended,
// or it waits for input. A task waiting AUTH_REQUIRED is followed on,
// though it waits for the caller too: agents, a2a-go's among them, keep
// its execution running and may go on once authorized out of band; the
// caller's answer stops following it for the answer's session
// (sendLocal).
func settles(s a2a.TaskState) bool {
	return s.Terminal() || s == a2a.TaskStateInputRequired
}

// traced returns ctx carrying the delegation's trace, if it has one: its
// delegate span, or the caller's trace headers when orchd does not trace.
func (d *Delegation) traced(ctx context.Context) context.Context {
	ctx = telemetry.WithTraceHeaders(ctx, d.callerTrace)
	if !d.span.IsValid() {
		return ctx
	}
	return trace.ContextWithSpanContext(ctx, d.span)
}

// emitLocked appends an event, updates the record's state and persists it.
// Callers hold mu.
func (d *Delegation) emitLocked(ev Event) {
	now := d.engine.cfg.Now()
	ev.At = now
	if ev.State == "" {
		ev.State = d.rec.State
	}
	if ev.State.Terminal() && !d.rec.State.Terminal() {
		ins, ctx := d.engine.instruments, d.traced(d.engine.ctx)
		ins.inflight.Add(ctx, -1)
		ins.ended.Add(ctx, 1, ins.attr("state", string(ev.State)).add...)
		d.endLifeLocked()
		d.slot.release()
	}
	d.rec.State = ev.State
	d.rec.UpdatedAt = now
	ev.Seq = d.first + int64(len(d.events))
	d.rec.LastEvent = ev.Seq
	d.events = append(d.events, ev)
	d.wakeLocked()
	d.unsaved = append(d.unsaved, ev)
	if over := len(d.unsaved) - d.engine.cfg.MaxEvents; over > 0 {
		d.unsaved = d.unsaved[over:] // the log keeps no more than that either
	}
	d.persistLocked()
	d.forgetSavedLocked()
	d.restateIfDueLocked()
}

// forgetSavedLocked drops from memory the events older than the latest
// LiveEvents that the store holds: readers after them read the store
// (Engine.Events). The events the store has not taken yet stay, up to
// MaxEvents, so no reader meets a gap while it is down. Callers hold mu.
func (d *Delegation) forgetSavedLocked() {
	cfg := d.engine.cfg
	keep := min(max(cfg.LiveEvents, len(d.unsaved)), cfg.MaxEvents)
	over := len(d.events) - keep
	if over <= 0 {
		return
	}
	if cap(d.events) > 4*keep {
		// Grown while the store was down: let that memory go.
		d.events = slices.Clone(d.events[over:])
	} else {
		d.events = slices.Delete(d.events, 0, over)
	}
	d.first += int64(over)
}

// persistLocked writes the events not stored yet, then the record, to the
// store, logging a failure: the delegation goes on, and the next write
// tries the events again and carries the whole record again, as does
// the engine a moment later (keepwrites.go). A record is
// never written ahead of its log: a reader who finds the record says
// more events than the log holds waits for them, and an end whose event
// was not kept would be waited for by every follower forever. Callers
// hold mu.
func (d *Delegation) persistLocked() {
	if d.deferred {
		return
	}
	if ss, ok := d.engine.store.(StepStore); ok && len(d.unsaved) == 1 {
		d.persistErr = ss.PutStep(context.Background(), d.storedLocked(), d.unsaved[0])
		if d.persistErr != nil {
			d.engine.writes.Failed("store delegation event and record; both are tried again", d.persistErr, "delegation", d.rec.ID, "seq", d.unsaved[0].Seq)
			d.keepWriting()
			return
		}
		d.engine.writes.Succeeded()
		d.unsaved = nil
		return
	}
	// Events reach the store in order: one that could not be stored is
	// tried again, before the next, at the next write.
	for len(d.unsaved) > 0 {
		if d.persistErr = d.engine.store.Append(context.Background(), d.rec.ID, d.unsaved[0]); d.persistErr != nil {
			d.engine.writes.Failed("store delegation event; it and the record are tried again", d.persistErr, "delegation", d.rec.ID, "seq", d.unsaved[0].Seq)
			d.keepWriting()
			return
		}
		d.unsaved = d.unsaved[1:]
	}
	d.persistErr = d.engine.store.Put(context.Background(), d.storedLocked())
	if d.persistErr != nil {
		d.engine.writes.Failed("store delegation record; it is tried again", d.persistErr, "delegation", d.rec.ID, "seq", d.rec.LastEvent)
		d.keepWriting()
		return
	}
	d.engine.writes.Succeeded()
}

// persistEndedLocked writes a delegation that ended as it started, its whole
// log and its record: queued with the store's QueueEnded when it has one,
// so the caller's answer does not wait for the write; else with its
// PutEnded; else as persistLocked does. Callers hold mu.
func (d *Delegation) persistEndedLocked() {
	es, ok := d.engine.store.(EndedStore)
	if !ok || !d.rec.State.Terminal() || len(d.unsaved) == 0 || d.unsaved[0].Seq != 1 {
		d.persistLocked()
		return
	}
	if qs, ok := es.(QuickStore); ok {
		d.persistErr = qs.QueueEnded(context.Background(), d.storedLocked(), d.unsaved)
	} else {
		d.persistErr = es.PutEnded(context.Background(), d.storedLocked(), d.unsaved)
	}
	if d.persistErr != nil {
		d.engine.writes.Failed("store ended delegation", d.persistErr, "delegation", d.rec.ID, "seq", 1)
		return
	}
	d.engine.writes.Succeeded()
	d.unsaved = nil
}

// fail ends the delegation as FAILED with a reason naming the hop.
func (d *Delegation) fail(reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rec.State.Terminal() {
		return
	}
	d.rec.Error = fmt.Sprintf("hop %s: %s", d.rec.Downstream.Agent, reason)
	d.emitLocked(Event{Kind: "state", State: a2a.TaskStateFailed, Error: d.rec.Error})
}
