package a2aserver

import (
	"context"
	"errors"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/orchd/orchd/delegation"
)

// An upstream task waiting for input has no execution: a2a-go ends one at
// INPUT_REQUIRED. When its delegation ends meanwhile (its deadline passed,
// or it was canceled through the HTTP API), no execution is there to say
// so, and the task would wait for ever. The executor therefore watches
// such tasks and writes the delegation's end into the task store.

// waitingStoreTimeout bounds writing a watched task's end to the store.
const waitingStoreTimeout = 10 * time.Second

// watch is the arrangement to end one waiting task with its delegation.
type watch struct {
	stop func() bool
}

var _ a2asrv.AgentExecutionCleaner = (*executor)(nil)

// park notes that the execution mirroring ec's task ends with the task
// waiting on d; Cleanup watches it once a2a-go has stored that state.
func (x *executor) park(ec *a2asrv.ExecutorContext, d *delegation.Delegation) {
	x.mu.Lock()
	x.parked[ec.TaskID] = d
	x.mu.Unlock()
}

// Cleanup implements a2asrv.AgentExecutionCleaner. It runs once a2a-go has
// stored the execution's last event, so a watch started here cannot race
// a2a-go writing the waiting state. A cancel's cleanup ends the cancel.
func (x *executor) Cleanup(ctx context.Context, ec *a2asrv.ExecutorContext, _ a2a.SendMessageResult, _ error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if ec.Message == nil {
		delete(x.canceling, ec.TaskID)
		return
	}
	d, ok := x.parked[ec.TaskID]
	delete(x.parked, ec.TaskID)
	if !ok {
		return
	}
	ctx = context.WithoutCancel(ctx) // it carries the caller, who owns the task in the store
	// endWaiting runs in its own goroutine and takes x.mu, so it cannot
	// run before the watch is in place, even for a delegation that has
	// ended already.
	w := &watch{}
	w.stop = d.AfterEnd(func() { x.endWaiting(ctx, ec, d, w) })
	x.unwatchLocked(ec.TaskID)
	x.watches[ec.TaskID] = w
}

// unwatch stops watching a task: an execution or a cancel of it is
// starting, and reports the delegation's outcome itself.
func (x *executor) unwatch(id a2a.TaskID) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.unwatchLocked(id)
}

func (x *executor) unwatchLocked(id a2a.TaskID) {
	if w := x.watches[id]; w != nil {
		w.stop()
		delete(x.watches, id)
	}
}

// endWaiting writes the end of d into its waiting upstream task, unless
// the task moved on meanwhile (a new execution or a cancel of it began).
func (x *executor) endWaiting(ctx context.Context, ec a2a.TaskInfoProvider, d *delegation.Delegation, w *watch) {
	id := ec.TaskInfo().TaskID
	x.mu.Lock()
	if x.watches[id] == w {
		delete(x.watches, id)
	}
	busy := x.mirroring[id] || x.canceling[id]
	if !busy {
		delete(x.byTask, id)
	}
	x.mu.Unlock()
	if busy {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, waitingStoreTimeout)
	defer cancel()
	rec := d.Record()
	for range 3 { // retried only when the task changed under the write
		st, err := x.tasks.Get(ctx, id)
		if err != nil {
			x.log.Warn("read waiting task", "task", id, "error", err)
			return
		}
		if s := st.Task.Status.State; s != a2a.TaskStateInputRequired && s != a2a.TaskStateAuthRequired {
			return
		}
		ev := a2a.NewStatusUpdateEvent(ec, rec.State, endMessage(ec, rec))
		task := *st.Task
		task.Status = ev.Status
		_, err = x.tasks.Update(ctx, &taskstore.UpdateRequest{Task: &task, Event: ev, PrevTask: st.Task, PrevVersion: st.Version})
		if !errors.Is(err, taskstore.ErrConcurrentModification) {
			if err != nil {
				x.log.Warn("end waiting task", "task", id, "error", err)
			} else {
				x.log.Info("waiting A2A task ended with its delegation", "task", id, "delegation", rec.ID, "state", rec.State)
			}
			return
		}
	}
}

// endMessage is what an ended delegation tells the upstream task: the
// error of a failed one, else its result.
func endMessage(ec a2a.TaskInfoProvider, rec delegation.Record) *a2a.Message {
	switch {
	case rec.Error != "":
		return a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(rec.Error))
	case rec.Result != nil:
		m := *rec.Result
		info := ec.TaskInfo()
		m.TaskID, m.ContextID = info.TaskID, info.ContextID
		return &m
	}
	return nil
}
