package delegation

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"go.opentelemetry.io/otel/trace"

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
	// said something), artifact (the agent produced output), or steer or
	// interrupt (the caller's signal was passed on).
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
}

// Delegation is one piece of work handed to an agent. Its methods are safe
// for concurrent use.
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

	// op serializes the caller's operations (input, cancel) so two cannot
	// act on the downstream task at once. Lock order: op before mu.
	op sync.Mutex

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
	// statusAt is the latest timestamp of a status applied. A WORKING the
	// hop recorded before the INPUT_REQUIRED (or AUTH_REQUIRED) in force,
	// arriving after it, as a lagging stream's does once an interrupt's
	// acknowledgement was applied, must not undo the wait. Only that is
	// dropped, so a hop whose clock moved back never loses an end.
	statusAt time.Time
	// settledAtOnce is set when the agent's first answer settled the
	// delegation, before Delegate returns (SettledAtOnce).
	settledAtOnce bool
	// life bounds the started delegation in time (deadline.go).
	life lifetime
	// listed is set once the ended delegation was handed to Engine.ended.
	listed bool
	// lease is this process's lease on the delegation, nil when the
	// engine has no Leases.
	lease Lease
	// unsaved are events the store could not take yet, oldest first;
	// persistErr is why the record's last write failed, nil when it
	// did not.
	unsaved    []Event
	persistErr error
	// chained is set when the hop's agent reads the chain context
	// (readsChain): the messages sent to it carry it.
	chained bool
	// keepUpstream is Request.KeepUpstream, for a delegation the agent's
	// first answer ended.
	keepUpstream func(ctx context.Context, rec Record, evs []Event) error
	// deferred holds back the store writes (persist) while the agent's
	// first answer is applied, when that answer ends the work: the events
	// and the record are then written once, ended (Engine.start).
	deferred bool
	// artifactBytes is about how many bytes rec.Artifacts holds
	// (artifactSize); restating is set while restateIfDue logs them
	// (artifacts.go).
	artifactBytes int64
	restating     bool
}

// ID returns the delegation's id.
func (d *Delegation) ID() string { return d.rec.ID }

// Record returns a snapshot of the delegation.
func (d *Delegation) Record() Record {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.snapshot()
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

// snapshot copies the record, without its Progress; callers hold mu.
func (d *Delegation) snapshot() Record {
	r := d.rec
	r.Artifacts = slices.Clone(r.Artifacts)
	return r
}

// stored is the record as the store keeps it: with its Progress, without
// its artifacts, which its log holds (artifacts.go). Callers hold mu.
func (d *Delegation) stored() Record {
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
// follow the ones returned). Events before the memory window are gone from
// here; the first returned event then has a Seq above seq+1, and
// [Engine.Events] reads them from the store.
func (d *Delegation) Events(after int64) ([]Event, <-chan struct{}, bool) {
	evs, changed, ended, _ := d.window(after)
	return evs, changed, ended
}

// changedLocked returns the channel closed at the next event, made for the
// first waiter; callers hold mu.
func (d *Delegation) changedLocked() <-chan struct{} {
	if d.changed == nil {
		d.changed = make(chan struct{})
	}
	return d.changed
}

// waiting reports whether the downstream task waits for the caller.
func waiting(s a2a.TaskState) bool {
	return s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
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

// emit appends an event, updates the record's state and persists it.
// Callers hold mu.
func (d *Delegation) emit(ev Event) {
	now := d.engine.cfg.Now()
	ev.At = now
	if ev.State == "" {
		ev.State = d.rec.State
	}
	if ev.State.Terminal() && !d.rec.State.Terminal() {
		in, ctx := d.engine.in, d.traced(d.engine.ctx)
		in.inflight.Add(ctx, -1)
		in.ended.Add(ctx, 1, in.attr("state", string(ev.State)).add...)
		d.endLife()
	}
	d.rec.State = ev.State
	d.rec.UpdatedAt = now
	ev.Seq = d.first + int64(len(d.events))
	d.rec.LastEvent = ev.Seq
	d.events = append(d.events, ev)
	if over := len(d.events) - d.engine.cfg.MaxEvents; over > 0 {
		d.events = slices.Delete(d.events, 0, over)
		d.first += int64(over)
	}
	if d.changed != nil {
		close(d.changed)
		d.changed = nil
	}
	d.unsaved = append(d.unsaved, ev)
	if over := len(d.unsaved) - d.engine.cfg.MaxEvents; over > 0 {
		d.unsaved = d.unsaved[over:] // the log keeps no more than that either
	}
	d.persist()
	d.restateIfDue()
}

// persist writes the events not stored yet, then the record, to the
// store, logging a failure: the delegation goes on, and the next write
// tries the events again and carries the whole record again. Callers
// hold mu.
func (d *Delegation) persist() {
	if d.deferred {
		return
	}
	if ss, ok := d.engine.store.(StepStore); ok && len(d.unsaved) == 1 {
		d.persistErr = ss.PutStep(context.Background(), d.stored(), d.unsaved[0])
		if d.persistErr != nil {
			d.engine.log.Error("store delegation event and record; both are tried again with the next write", "delegation", d.rec.ID, "seq", d.unsaved[0].Seq, "error", d.persistErr)
			return
		}
		d.unsaved = nil
		return
	}
	// Events reach the store in order: one that could not be stored is
	// tried again, before the next, at the next write.
	for len(d.unsaved) > 0 {
		if err := d.engine.store.Append(context.Background(), d.rec.ID, d.unsaved[0]); err != nil {
			d.engine.log.Error("store delegation event; it is tried again with the next", "delegation", d.rec.ID, "seq", d.unsaved[0].Seq, "unsaved", len(d.unsaved), "error", err)
			break
		}
		d.unsaved = d.unsaved[1:]
	}
	d.persistErr = d.engine.store.Put(context.Background(), d.stored())
	if d.persistErr != nil {
		d.engine.log.Error("store delegation", "delegation", d.rec.ID, "error", d.persistErr)
	}
}

// persistEnded writes a delegation that ended as it started, its whole
// log and its record, with the store's PutEnded when it has one; else as
// persist does. Callers hold mu.
func (d *Delegation) persistEnded() {
	es, ok := d.engine.store.(EndedStore)
	if !ok || !d.rec.State.Terminal() || len(d.unsaved) == 0 || d.unsaved[0].Seq != 1 {
		d.persist()
		return
	}
	d.persistErr = es.PutEnded(context.Background(), d.stored(), d.unsaved)
	if d.persistErr != nil {
		d.engine.log.Error("store delegation", "delegation", d.rec.ID, "error", d.persistErr)
		return
	}
	d.unsaved = nil
}

// apply folds one downstream event into the delegation. It reports whether
// the downstream task has settled for now: ended, or waiting for input.
func (d *Delegation) apply(ev a2a.Event) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rec.State.Terminal() {
		return true
	}
	if d.foreign(ev) {
		return false
	}
	switch e := ev.(type) {
	case *a2a.Message:
		if !d.fits(e) {
			return true
		}
		if d.rec.Downstream.TaskID == "" {
			d.rec.Result = e
			d.emit(Event{Kind: "message", State: a2a.TaskStateCompleted, Message: e})
			return true
		}
		d.emit(Event{Kind: "message", Message: e})
	case *a2a.Task:
		d.setTask(e.ID, e.ContextID)
		d.applyTask(e)
	case *a2a.TaskStatusUpdateEvent:
		d.setTask(e.TaskID, e.ContextID)
		d.setStatus(e.Status, e.Metadata)
	case *a2a.TaskArtifactUpdateEvent:
		d.setTask(e.TaskID, e.ContextID)
		if e.Artifact == nil {
			break
		}
		if art, ok := d.takeArtifact(e.Artifact, e.Append, e.LastChunk); ok {
			d.emit(art)
		}
	}
	return d.rec.State.Terminal() || waiting(d.rec.State)
}

// foreign reports whether an event names a task other than the one the
// delegation follows, once it follows one: an agent's event about another
// task, which must not move this delegation (end it, or fill it with
// another task's artifacts). It is dropped and logged. Callers hold mu.
func (d *Delegation) foreign(ev a2a.Event) bool {
	own := d.rec.Downstream.TaskID
	if own == "" {
		return false
	}
	named := ev.TaskInfo().TaskID
	if named == "" || named == own {
		return false
	}
	d.engine.log.Warn("an event of the agent's names another task than the delegation's; dropped",
		"delegation", d.rec.ID, "agent", d.rec.Downstream.Agent, "task", own, "named", named)
	return true
}

// applyTask folds a task read whole (a poll, a push notification's read,
// a resumed delegation catching up) into the delegation, in the order a
// stream would have brought it; callers hold mu. The read shows only where
// the task is now, so:
//   - the status messages it passed through since the last one applied
//     are applied first, as the WORKING they were: a2a-go (as the A2A
//     task model does) moves a status message into the history when the
//     next status replaces it, so they are the agent messages after the
//     last input and the last status applied;
//   - a task still working is applied before its artifacts, which it
//     produces while working; a task that settled (ended, or waits for
//     input) after them, as the status that ends a stream comes last.
//
// Each artifact that is new or changed comes as one event.
func (d *Delegation) applyTask(t *a2a.Task) {
	for _, m := range d.missedStatuses(t) {
		d.setStatus(a2a.TaskStatus{State: a2a.TaskStateWorking, Message: m}, nil)
	}
	settles := t.Status.State.Terminal() || waiting(t.Status.State)
	if !settles {
		d.setStatus(t.Status, t.Metadata)
	}
	for _, art := range t.Artifacts {
		if art == nil {
			continue
		}
		if ev, ok := d.taskArtifact(art); ok {
			d.emit(ev)
		}
		if d.rec.State.Terminal() {
			return // over a bound (artifacts.go)
		}
	}
	if settles {
		d.setStatus(t.Status, t.Metadata)
	}
}

// missedStatuses are the agent messages of a task's history that came
// after the last input it got and after the last status message applied,
// other than its current status message: the status messages of states
// the delegation did not see. Callers hold mu. There are none when the
// last status applied is still the task's (the history holds only older
// ones), when it is not in the history at all (nothing places the
// messages after it), or while the delegation waits for input (the task
// cannot move on before orchd sends the input).
func (d *Delegation) missedStatuses(t *a2a.Task) []*a2a.Message {
	last := d.prog.LastStatus
	if waiting(d.rec.State) || t.Status.Message != nil && t.Status.Message.ID == last {
		return nil
	}
	start, found := 0, last == ""
	for i, m := range t.History {
		switch {
		case m == nil:
		case last != "" && m.ID == last:
			start, found = i+1, true
		case m.Role == a2a.MessageRoleUser:
			start = i + 1
		}
	}
	if !found {
		return nil
	}
	var out []*a2a.Message
	for _, m := range t.History[start:] {
		if m == nil || m.Role != a2a.MessageRoleAgent || m.ID == "" || t.Status.Message != nil && m.ID == t.Status.Message.ID {
			continue
		}
		out = append(out, m)
	}
	return out
}

// setTask records the agent's task when it is first named; callers hold
// mu. The record is written at once, before the event that named the task
// is logged: a process killed between logging an event and writing the
// record leaves the next one a task to follow.
func (d *Delegation) setTask(id a2a.TaskID, contextID string) {
	if d.rec.Downstream.TaskID == "" && id != "" {
		d.rec.Downstream.TaskID, d.rec.Downstream.ContextID = id, contextID
		d.persist()
	}
}

// setStatus records a downstream status; callers hold mu. Only an
// interrupted flag is kept of the metadata: the rest is the agent's own.
func (d *Delegation) setStatus(st a2a.TaskStatus, metadata map[string]any) {
	if st.State == a2a.TaskStateUnspecified || !d.fits(st.Message) {
		return
	}
	if at := st.Timestamp; at != nil {
		if st.State == a2a.TaskStateWorking && waiting(d.rec.State) && at.Before(d.statusAt) {
			return // a WORKING the hop recorded before the wait now in force
		}
		if at.After(d.statusAt) {
			d.statusAt = *at
		}
	}
	interrupted := st.State == a2a.TaskStateInputRequired && metadata[steering.InterruptedKey] == true
	if st.State == d.rec.State && st.Message == nil && !interrupted {
		return
	}
	if st.Message != nil {
		if st.Message.ID == d.prog.LastStatus {
			return
		}
		d.prog.LastStatus = st.Message.ID
	}
	ev := Event{Kind: "state", State: st.State, Message: st.Message}
	if interrupted {
		ev.Metadata = map[string]any{steering.InterruptedKey: true}
	}
	if st.State.Terminal() && st.Message != nil {
		d.rec.Result = st.Message
	}
	if st.State == a2a.TaskStateFailed || st.State == a2a.TaskStateRejected {
		why := "no reason given"
		if st.Message != nil {
			why = messageText(st.Message)
		}
		d.rec.Error = fmt.Sprintf("hop %s (task %s) ended %s: %s", d.rec.Downstream.Agent, d.rec.Downstream.TaskID, st.State, why)
		if dl := d.chain.Deadline; st.State == a2a.TaskStateFailed && !dl.IsZero() && !d.engine.cfg.Now().Before(dl) {
			// Every hop keeps the same deadline: a hop below that ends the
			// work as it passes was only quicker to say so than this one.
			d.rec.Error = fmt.Sprintf("deadline %s passed while agent %s was %s; %s", stamp(dl), d.rec.Downstream.Agent, shortState(d.rec.State), d.rec.Error)
		}
		ev.Error = d.rec.Error
	}
	d.emit(ev)
}

// fits reports whether a message of the agent's fits in an event; one
// that does not fails the delegation (overLimit). Callers hold mu.
func (d *Delegation) fits(m *a2a.Message) bool {
	if n := MessageSize(m); n > d.engine.cfg.MaxEventBytes {
		d.overLimit(fmt.Sprintf("the agent sent a message of about %d bytes, over the %d an event may hold (delegation.maxEventBytes)", n, d.engine.cfg.MaxEventBytes))
		return false
	}
	return true
}

// fail ends the delegation as FAILED with a reason naming the hop.
func (d *Delegation) fail(reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rec.State.Terminal() {
		return
	}
	d.rec.Error = fmt.Sprintf("hop %s: %s", d.rec.Downstream.Agent, reason)
	d.emit(Event{Kind: "state", State: a2a.TaskStateFailed, Error: d.rec.Error})
}

// messageText joins a message's text parts.
func messageText(m *a2a.Message) string {
	var parts []string
	for _, p := range m.Parts {
		if t, ok := p.Content.(a2a.Text); ok {
			parts = append(parts, string(t))
		}
	}
	if len(parts) == 0 {
		return "(no text)"
	}
	return strings.Join(parts, " ")
}
