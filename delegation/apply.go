package delegation

import (
	"fmt"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/steering"
)

// Folding what the agent says into the delegation.
//
// Every way of following a task (a stream, a poll, a push notification's
// read, a resume's catch-up, a cancel's or an interrupt's answer) hands
// what it got to apply, which turns it into the delegation's events
// (emitLocked, delegation.go) in the order a stream would have brought them,
// within the bounds on what an agent may send (fitsLocked; artifacts.go).

// apply folds one downstream event into the delegation. It reports whether
// the downstream task has settled for now (settles): ended, or waiting
// for input; a task waiting AUTH_REQUIRED is followed on.
func (d *Delegation) apply(ev a2a.Event) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.rec.State.Terminal() {
		return true
	}
	if d.foreignLocked(ev) {
		return false
	}
	switch e := ev.(type) {
	case *a2a.Message:
		if !d.fitsLocked(e) {
			return true
		}
		if d.rec.Downstream.TaskID == "" {
			d.rec.Result = e
			d.emitLocked(Event{Kind: "message", State: a2a.TaskStateCompleted, Message: e})
			return true
		}
		d.emitLocked(Event{Kind: "message", Message: e})
	case *a2a.Task:
		d.setTaskLocked(e.ID, e.ContextID)
		d.applyTaskLocked(e)
	case *a2a.TaskStatusUpdateEvent:
		d.setTaskLocked(e.TaskID, e.ContextID)
		d.setStatusLocked(e.Status, e.Metadata)
	case *a2a.TaskArtifactUpdateEvent:
		d.setTaskLocked(e.TaskID, e.ContextID)
		if e.Artifact == nil {
			break
		}
		if art, ok := d.takeArtifactLocked(e.Artifact, e.Append, e.LastChunk); ok {
			d.emitLocked(art)
		}
	}
	return settles(d.rec.State)
}

// foreignLocked reports whether an event names a task other than the one the
// delegation follows, once it follows one: an agent's event about another
// task, which must not move this delegation (end it, or fill it with
// another task's artifacts). It is dropped and logged. Callers hold mu.
func (d *Delegation) foreignLocked(ev a2a.Event) bool {
	own := d.rec.Downstream.TaskID
	if own == "" || ev == nil { // nil: a session with nothing read yet (an agent down at resume)
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

// applyTaskLocked folds a task read whole (a poll, a push notification's read,
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
func (d *Delegation) applyTaskLocked(t *a2a.Task) {
	for _, m := range d.missedStatusesLocked(t) {
		d.setStatusLocked(a2a.TaskStatus{State: a2a.TaskStateWorking, Message: m}, nil)
	}
	settles := t.Status.State.Terminal() || waiting(t.Status.State)
	if !settles {
		d.setStatusLocked(t.Status, t.Metadata)
	}
	for _, art := range t.Artifacts {
		if art == nil {
			continue
		}
		if ev, ok := d.taskArtifactLocked(art); ok {
			d.emitLocked(ev)
		}
		if d.rec.State.Terminal() {
			return // over a bound (artifacts.go)
		}
	}
	if settles {
		d.setStatusLocked(t.Status, t.Metadata)
	}
}

// missedStatusesLocked are the agent messages of a task's history that came
// after the last input it got and after the last status message applied,
// other than its current status message: the status messages of states
// the delegation did not see. Callers hold mu. There are none when the
// last status applied is still the task's (the history holds only older
// ones), when it is not in the history at all (nothing places the
// messages after it), or while the delegation waits for input (the task
// cannot move on before orchd sends the input). A steer or interrupt is
// no input: orchd sends one while the task works, whether or not it has
// read the statuses before it.
func (d *Delegation) missedStatusesLocked(t *a2a.Task) []*a2a.Message {
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
		case m.Role == a2a.MessageRoleUser && !isSignal(m):
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

// statusOf is the task status an event carries: a task's, or a status
// update's; ok is false for other events.
func statusOf(ev a2a.Event) (st a2a.TaskStatus, ok bool) {
	switch e := ev.(type) {
	case *a2a.Task:
		return e.Status, true
	case *a2a.TaskStatusUpdateEvent:
		return e.Status, true
	}
	return a2a.TaskStatus{}, false
}

// isSignal reports whether m is a steering signal (a steer or an
// interrupt), as the steering extension marks one.
func isSignal(m *a2a.Message) bool {
	_, ok := steering.ControlOf(m)
	return ok
}

// setTaskLocked records the agent's task when it is first named; callers hold
// mu. The record is written at once, before the event that named the task
// is logged: a process killed between logging an event and writing the
// record leaves the next one a task to follow.
func (d *Delegation) setTaskLocked(id a2a.TaskID, contextID string) {
	if d.rec.Downstream.TaskID == "" && id != "" {
		d.rec.Downstream.TaskID, d.rec.Downstream.ContextID = id, contextID
		d.persistLocked()
	}
}

// setStatusLocked records a downstream status; callers hold mu. Of the
// metadata only an interrupted flag is kept, and the lineage of a hop
// whose lineage is believed (lineage.go): the rest is the agent's own. A
// status that changes nothing but the lineage is logged as a state event
// carrying it, so the news travels up.
func (d *Delegation) setStatusLocked(st a2a.TaskStatus, metadata map[string]any) {
	if st.State == a2a.TaskStateUnspecified || !d.fitsLocked(st.Message) {
		return
	}
	if at := st.Timestamp; at != nil {
		if progress(st.State) && at.Before(d.statusAt) {
			// A lagging stream's copy of a status older than one applied:
			// a WORKING before the wait now in force, or progress a read
			// of the task (a silent stream's probe) already showed.
			return
		}
		if at.After(d.statusAt) {
			d.statusAt = *at
		}
	}
	interrupted := st.State == a2a.TaskStateInputRequired && metadata[steering.InterruptedKey] == true
	if st.Message != nil && st.Message.ID == d.prog.LastStatus {
		return // applied already: a late copy, whose lineage is no news either
	}
	lineage, news := d.lineageLocked(metadata)
	if st.State == d.rec.State && st.Message == nil && !interrupted && !news {
		return
	}
	if st.Message != nil {
		d.prog.LastStatus = st.Message.ID
	}
	ev := Event{Kind: "state", State: st.State, Message: st.Message}
	if interrupted {
		ev.Metadata = map[string]any{steering.InterruptedKey: true}
	}
	if news {
		d.rec.Lineage, ev.Lineage = lineage, lineage.clone()
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
	d.emitLocked(ev)
}

// progress reports whether s says the work is under way: a status a
// later one makes stale, unlike a wait or an end.
func progress(s a2a.TaskState) bool {
	return s == a2a.TaskStateWorking || s == a2a.TaskStateSubmitted
}

// fitsLocked reports whether a message of the agent's fits in an event; one
// that does not fails the delegation (overLimitLocked). Callers hold mu.
func (d *Delegation) fitsLocked(m *a2a.Message) bool {
	if n := MessageSize(m); n > d.engine.cfg.MaxEventBytes {
		d.overLimitLocked(fmt.Sprintf("the agent sent a message of about %d bytes, over the %d an event may hold (delegation.maxEventBytes)", n, d.engine.cfg.MaxEventBytes))
		return false
	}
	return true
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
