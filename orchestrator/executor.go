package orchestrator

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/policies"
)

// SkillMetadataKey is the message metadata key naming the skill to route
// by, for callers that send no delegation chain context.
const SkillMetadataKey = "skill"

// executor is orchd's a2a-go AgentExecutor: an A2A message to orchd is
// delegated by the same engine as the HTTP API, and the downstream task's
// events become the upstream task's.
//
// Routing: the skill and requirements of an incoming delegation chain
// context win; else the skill named under SkillMetadataKey in the message
// metadata; else every registered agent is a candidate and the policies
// rank them.
type executor struct {
	engine *delegation.Engine
	log    *slog.Logger

	mu sync.Mutex
	// byTask maps an upstream task to its delegation.
	byTask map[a2a.TaskID]string
}

var _ a2asrv.AgentExecutor = (*executor)(nil)

func newExecutor(engine *delegation.Engine, log *slog.Logger) *executor {
	return &executor{engine: engine, log: log, byTask: map[a2a.TaskID]string{}}
}

// Execute delegates a new task, or hands the caller's message to the
// delegation of a task waiting for input, and mirrors events until the
// task ends or waits again.
func (x *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		x.mu.Lock()
		id, known := x.byTask[ec.TaskID]
		x.mu.Unlock()
		var d *delegation.Delegation
		var after int64
		if known {
			live, ok := x.engine.Get(id)
			if !ok {
				yield(status(ec, a2a.TaskStateFailed, "the delegation of this task is no longer followed"), nil)
				return
			}
			evs, _, _ := live.Events(0)
			if len(evs) > 0 {
				after = evs[len(evs)-1].Seq
			}
			var err error
			if d, err = x.engine.Send(ctx, id, inputFrom(ec.Message)); err != nil {
				yield(status(ec, a2a.TaskStateInputRequired, "orchd could not pass the input on: "+err.Error()), nil)
				return
			}
		} else {
			req, err := requestFrom(ec)
			if err == nil {
				d, err = x.engine.Delegate(ctx, req)
			}
			if err != nil {
				x.log.Info("A2A task refused", "task", ec.TaskID, "error", err)
				yield(status(ec, a2a.TaskStateRejected, err.Error()), nil)
				return
			}
			x.mu.Lock()
			x.byTask[ec.TaskID] = d.ID()
			x.mu.Unlock()
		}
		x.mirror(ctx, ec, d, after, yield)
	}
}

// mirror turns the delegation's events after seq into the upstream task's
// events until the delegation ends or waits for input.
func (x *executor) mirror(ctx context.Context, ec *a2asrv.ExecutorContext, d *delegation.Delegation, after int64, yield func(a2a.Event, error) bool) {
	for {
		evs, changed, _ := d.Events(after)
		for _, ev := range evs {
			after = ev.Seq
			switch {
			case ev.Kind == "artifact" && ev.Artifact != nil:
				art := *ev.Artifact
				if !yield(&a2a.TaskArtifactUpdateEvent{TaskID: ec.TaskID, ContextID: ec.ContextID, Artifact: &art}, nil) {
					return
				}
				continue
			case ev.Kind == "message" && ev.Message != nil && ev.Message.Role == a2a.MessageRoleUser:
				continue // the caller's own input, passed on
			}
			msg := upstreamMessage(ec, ev)
			if !yield(a2a.NewStatusUpdateEvent(ec, ev.State, msg), nil) {
				return
			}
			if ev.State.Terminal() || ev.State == a2a.TaskStateInputRequired || ev.State == a2a.TaskStateAuthRequired {
				return
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// Cancel cancels the task's delegation, which cancels the downstream task.
func (x *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		x.mu.Lock()
		id, known := x.byTask[ec.TaskID]
		x.mu.Unlock()
		if !known {
			yield(status(ec, a2a.TaskStateCanceled, "canceled before any agent took the work"), nil)
			return
		}
		rec, err := x.engine.Cancel(ctx, id)
		if err != nil && !rec.State.Terminal() {
			yield(status(ec, a2a.TaskStateFailed, "cancel failed: "+err.Error()), nil)
			return
		}
		msg := ""
		if rec.Error != "" {
			msg = rec.Error
		}
		yield(status(ec, rec.State, msg), nil)
	}
}

// requestFrom reads a delegation request from an incoming A2A message.
func requestFrom(ec *a2asrv.ExecutorContext) (delegation.Request, error) {
	if ec.Message == nil {
		return delegation.Request{}, fmt.Errorf("%w: no message", delegation.ErrBadRequest)
	}
	chain, hasChain, err := delegation.ChainFrom(ec.Message.Metadata)
	if err != nil {
		return delegation.Request{}, fmt.Errorf("%w: %v", delegation.ErrBadRequest, err)
	}
	m := *ec.Message
	m.ID, m.TaskID, m.ContextID = a2a.NewMessageID(), "", ""
	m.Metadata = maps.Clone(m.Metadata)
	delete(m.Metadata, delegation.ExtensionURI)
	req := delegation.Request{Message: &m, Metadata: m.Metadata}
	if s, ok := m.Metadata[SkillMetadataKey].(string); ok {
		req.Skill = s
	}
	if hasChain {
		req.Chain = &chain
	}
	if ec.User != nil {
		req.Caller = policies.Caller{Principal: ec.User.Name, Tenant: ec.Tenant, Claims: ec.User.Attributes}
	}
	return req, nil
}

// inputFrom is the caller's follow-up message as the delegation passes it
// on: its own id and no upstream task ids.
func inputFrom(m *a2a.Message) *a2a.Message {
	c := *m
	c.ID, c.TaskID, c.ContextID = a2a.NewMessageID(), "", ""
	c.Metadata = maps.Clone(c.Metadata)
	delete(c.Metadata, delegation.ExtensionURI)
	return &c
}

// upstreamMessage re-addresses an event's message to the upstream task, or
// words the event's error as one.
func upstreamMessage(ec *a2asrv.ExecutorContext, ev delegation.Event) *a2a.Message {
	if ev.Message != nil {
		m := *ev.Message
		m.TaskID, m.ContextID = ec.TaskID, ec.ContextID
		return &m
	}
	if ev.Error != "" {
		return a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(ev.Error))
	}
	return nil
}

// status is a status update with an optional text message.
func status(ec *a2asrv.ExecutorContext, state a2a.TaskState, text string) *a2a.TaskStatusUpdateEvent {
	var msg *a2a.Message
	if text != "" {
		msg = a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))
	}
	return a2a.NewStatusUpdateEvent(ec, state, msg)
}
