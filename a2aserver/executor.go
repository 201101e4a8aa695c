package a2aserver

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/internal/outagelog"
	"github.com/orchd/orchd/steering"
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
	// gate says who the caller is and whether its chain context is
	// believed.
	gate *httpgate.Gate
	log  *slog.Logger
	// writes logs remirror's failed writes of tasks: an outage of the
	// store in a few lines, not a few per task.
	writes *outagelog.Log
	// stopping is closed when the daemon begins to stop: mirrors end then,
	// so their A2A streams end and the server can shut down. stoppingCtx
	// is done at the same time.
	stopping    <-chan struct{}
	stoppingCtx context.Context
	// wg counts the goroutines re-mirroring carried-on delegations
	// (remirror.go); they end when the daemon stops.
	wg sync.WaitGroup

	mu sync.Mutex
	// byTask maps an upstream task to its delegation and owner.
	byTask map[a2a.TaskID]taskRoute
	// mirroring marks upstream tasks whose execution is mirroring its
	// delegation: that execution reports a cancel's outcome itself.
	mirroring map[a2a.TaskID]bool
	// tasks is the handler's task store; parked, watches and canceling
	// track tasks waiting for input whose delegation may end meanwhile
	// (waiting.go).
	tasks  taskstore.Store
	parked map[a2a.TaskID]*delegation.Delegation
	// changes wakes the task's subscribers (subscribe.go) when an
	// execution or a cancel of it starts.
	changes   *taskChanges
	watches   map[a2a.TaskID]*watch
	canceling map[a2a.TaskID]bool
	// orphaned are the tasks whose execution ended as a2a-go could not
	// store an event (failGuard), while mirror still ran, with the write's
	// error when known: it takes them over as it returns.
	orphaned map[a2a.TaskID]error
	// failedWrites holds, by task, the error of a2a-go's latest write of
	// it that failed and was not followed by one that went through: what
	// a takeover that follows says the cause was (failGuard).
	failedWrites sync.Map
}

var _ a2asrv.AgentExecutor = (*executor)(nil)

func newExecutor(engine *delegation.Engine, tasks taskstore.Store, g *httpgate.Gate, stopping context.Context, log *slog.Logger) *executor {
	writes := outagelog.New(log, time.Now, slog.LevelWarn, "A2A tasks' writes", "each task is written again, after 1s doubling to 30s, with its delegation's events since", storeDown)
	return &executor{engine: engine, gate: g, log: log, writes: writes, stopping: stopping.Done(), stoppingCtx: stopping, byTask: map[a2a.TaskID]taskRoute{}, mirroring: map[a2a.TaskID]bool{},
		tasks: tasks, parked: map[a2a.TaskID]*delegation.Delegation{}, watches: map[a2a.TaskID]*watch{}, canceling: map[a2a.TaskID]bool{}, orphaned: map[a2a.TaskID]error{}, changes: newTaskChanges()}
}

// Execute delegates a new task, or hands the caller's message to the
// delegation of a task waiting for input, and mirrors events until the
// task ends or waits again.
func (x *executor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		x.unwatch(ec.TaskID)
		x.changes.notify(ec.TaskID)
		id, known := x.delegationOf(ec)
		if !known && ec.StoredTask == nil {
			x.delegateNew(ctx, ec, yield)
			return
		}
		if !known {
			// A task orchd did not delegate (its delegation was refused).
			yield(status(ec, a2a.TaskStateRejected, "this task has no delegation to continue"), nil)
			return
		}
		rec, err := x.engine.LookupHead(ctx, id)
		if err != nil {
			yield(status(ec, a2a.TaskStateFailed, "the delegation of this task is no longer kept: "+err.Error()), nil)
			return
		}
		after := rec.LastEvent
		if _, err := x.engine.Send(ctx, id, inputFrom(ec.Message)); err != nil {
			if rec, lerr := x.engine.LookupHead(ctx, id); lerr == nil && rec.State.Terminal() {
				// It ended while the task waited (its deadline passed).
				x.mu.Lock()
				delete(x.byTask, ec.TaskID)
				x.mu.Unlock()
				yield(a2a.NewStatusUpdateEvent(ec, rec.State, endMessage(ec, rec)), nil)
				return
			}
			yield(status(ec, a2a.TaskStateInputRequired, "orchd could not pass the input on: "+err.Error()), nil)
			return
		}
		x.mirror(ctx, ec, id, after, yield)
	}
}

// taskRoute is what this process knows of one of orchd's A2A tasks: the
// delegation behind it, and the task store's user the task belongs to,
// for the calls that reach the delegation without a2a-go reading the task
// through the owner-checked store first (steering, steer.go).
type taskRoute struct {
	delegation string
	owner      string
}

// delegationOf returns the id of the delegation behind an upstream task:
// known here, or named in the stored task's metadata (the task may have
// been delegated by another process sharing the store).
func (x *executor) delegationOf(ec *a2asrv.ExecutorContext) (string, bool) {
	x.mu.Lock()
	r, known := x.byTask[ec.TaskID]
	x.mu.Unlock()
	if known || ec.StoredTask == nil {
		return r.delegation, known
	}
	return taskDelegation(ec.StoredTask)
}

// taskDelegationKey is the metadata key under which orchd's A2A tasks
// name the delegation behind them: {"delegation": ID}, under the
// delegation extension's URI.
const taskDelegationKey = delegation.ExtensionURI

// taskDelegation reads the delegation id from a task's metadata.
func taskDelegation(t *a2a.Task) (string, bool) {
	m, _ := t.Metadata[taskDelegationKey].(map[string]any)
	id, _ := m["delegation"].(string)
	return id, id != ""
}

// delegateNew follows the delegation of a new message: the one
// earlyDelegation started, or a new one.
func (x *executor) delegateNew(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
	var d *delegation.Delegation
	var err error
	if p, ok := takeEarly(ctx); ok {
		d, err = p.d, p.err
	} else {
		var req delegation.Request
		if req, err = x.requestFrom(ctx, ec.Message); err == nil {
			d, err = x.engine.Delegate(ctx, req)
		}
	}
	if err != nil {
		x.log.InfoContext(ctx, "A2A task refused", "task", ec.TaskID, "error", err)
		if yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			yield(status(ec, a2a.TaskStateRejected, err.Error()), nil)
		}
		return
	}
	up := delegation.Upstream{TaskID: ec.TaskID, ContextID: ec.ContextID, User: steering.UserName(ec.User)}
	x.mu.Lock()
	x.byTask[ec.TaskID] = taskRoute{delegation: d.ID(), owner: up.User}
	x.mu.Unlock()
	if err := x.engine.SetUpstream(ctx, d.ID(), up); err != nil {
		// The delegation goes on; only a restart would lose the task.
		x.log.WarnContext(ctx, "keep the A2A task of a delegation", "task", ec.TaskID, "delegation", d.ID(), "error", err)
	}
	rep := newReporter(x.engine, d.Record(), 0)
	if !yield(rep.task(ec, ec.Message), nil) {
		return
	}
	x.mirror(ctx, ec, d.ID(), 0, yield)
}

// early is a delegation earlyDelegation started for a message, waiting
// for the executor. It travels in the context of the request that sent the
// message, which a2a-go hands on to the execution it starts, so it reaches
// that execution and no other: two requests carrying the same message id,
// from one caller or two, each get their own. Whichever of the executor and
// earlyDelegation.After takes it first owns it.
type early struct {
	d     *delegation.Delegation
	err   error
	taken atomic.Bool
}

type earlyKey struct{}

// takeEarly takes the delegation earlyDelegation started for the request
// of ctx, once.
func takeEarly(ctx context.Context) (*early, bool) {
	p, ok := ctx.Value(earlyKey{}).(*early)
	if !ok || !p.taken.CompareAndSwap(false, true) {
		return nil, false
	}
	return p, true
}

// earlyDelegation delegates a new message before a2a-go's task machinery
// runs. When the agent answers at once with a message, orchd answers with
// that message too, as the agent did, and no upstream task is created.
// When a blocking send's work ends quickly, orchd answers with the
// finished task, stored once (settledTask). Otherwise the started
// delegation (or its refusal) is handed to the executor, which creates the
// upstream task and follows it.
type earlyDelegation struct {
	a2asrv.PassthroughCallInterceptor
	x *executor
}

func (e earlyDelegation) Before(ctx context.Context, cc *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	if m := cc.Method(); m != "SendMessage" && m != "SendStreamingMessage" {
		return ctx, nil, nil
	}
	smr, ok := req.Payload.(*a2a.SendMessageRequest)
	if !ok || smr.Message == nil || smr.Message.TaskID != "" || smr.Message.ID == "" {
		return ctx, nil, nil
	}
	dreq, err := e.x.requestFrom(ctx, smr.Message)
	settle := settles(cc, smr)
	var along *alongside
	var keep delegation.DelegateOption // asks for nothing unless settle
	if settle != nil {
		along = &alongside{x: e.x, msg: smr.Message, up: *settle}
		keep = delegation.KeepEndedUpstream(*settle, along.keep)
	}
	var d *delegation.Delegation
	if err == nil {
		d, err = e.x.engine.Delegate(ctx, dreq, keep)
	}
	if errors.Is(err, delegation.ErrUnavailable) {
		// Nothing was accepted: say so, rather than make a task orchd
		// cannot keep either.
		return ctx, nil, a2a.NewError(a2a.ErrInternalError, err.Error())
	}
	if le := limitError(err); le != nil {
		return ctx, nil, le
	}
	if ae := agentError(err); ae != nil {
		return ctx, nil, ae
	}
	if err == nil {
		if rec := d.Record(); rec.State == a2a.TaskStateCompleted && rec.Downstream.TaskID == "" && rec.Result != nil {
			m := *rec.Result
			m.TaskID, m.ContextID = "", smr.Message.ContextID
			if m.ContextID == "" {
				m.ContextID = a2a.NewContextID()
			}
			return ctx, &m, nil
		}
		if t := e.x.settledTask(ctx, cc, smr, d, settle, along); t != nil {
			return ctx, t, nil
		}
	}
	return context.WithValue(ctx, earlyKey{}, &early{d: d, err: err}), nil, nil
}

// passedOn are the A2A errors an agent may refuse a message with that
// orchd answers its caller with in turn, as the agent did, so a client
// cannot tell orchd from the agent by them. The others stay orchd's own
// refusal (a REJECTED task): an agent refusing orchd's credentials or
// failing inside says nothing about the caller's request.
var passedOn = []error{
	a2a.ErrTaskNotFound, a2a.ErrTaskNotCancelable, a2a.ErrPushNotificationNotSupported,
	a2a.ErrUnsupportedOperation, a2a.ErrUnsupportedContentType, a2a.ErrInvalidAgentResponse,
	a2a.ErrExtendedCardNotConfigured, a2a.ErrExtensionSupportRequired, a2a.ErrVersionNotSupported,
	a2a.ErrInvalidParams, a2a.ErrInvalidRequest, a2a.ErrMethodNotFound,
}

// agentError returns the A2A error to answer with when the delegation
// failed because the last agent tried refused the message with one of the
// passedOn errors, or nil. Its message names the agent.
func agentError(err error) *a2a.Error {
	if err == nil {
		return nil // before the target errors.As needs, which escapes
	}
	var failed *delegation.FailedError
	if !errors.As(err, &failed) || failed.Err == nil {
		return nil
	}
	for _, sentinel := range passedOn {
		if errors.Is(failed.Err, sentinel) {
			return a2a.NewError(sentinel, err.Error())
		}
	}
	return nil
}

// limitError returns the A2A error to answer work refused as over a limit
// with (delegation.LimitError), or nil. a2a-go v2.4.0 has no resource
// exhausted error (A2A defines none), so it is the A2A server error,
// reserved for errors of the server's own (-32000; HTTP 500 on HTTP+JSON,
// INTERNAL over gRPC), as for a request body orchd has no room for now
// (bodies.go): its message names the limit, and its ErrorInfo's metadata
// carries "setting" and "limit", so a client can tell it from a failure
// and try again later. An orchd that delegated the work here counts it
// against this orchd's breaker and tries its next candidate, as for any
// server error.
func limitError(err error) *a2a.Error {
	var limit *delegation.LimitError
	if err == nil || !errors.As(err, &limit) {
		return nil
	}
	meta := map[string]string{"setting": limit.Setting}
	if limit.Limit > 0 {
		meta["limit"] = strconv.Itoa(limit.Limit)
	}
	return a2a.NewError(a2a.ErrServerError, err.Error()).WithErrorInfoMeta(meta)
}

// After drops a started delegation whose request a2a-go then refused, so
// no delegation runs without an upstream task.
func (e earlyDelegation) After(ctx context.Context, _ *a2asrv.CallContext, resp *a2asrv.Response) error {
	if resp.Err == nil {
		return nil
	}
	if p, ok := takeEarly(ctx); ok && p.d != nil {
		_, _ = e.x.engine.Cancel(context.WithoutCancel(ctx), p.d.ID())
	}
	return nil
}

// mirror turns the delegation's events after seq into the upstream task's
// events until the delegation ends or waits for input. The delegation may
// be followed here or by another process sharing the store: its events
// come through the engine either way. When a2a-go could not store one of
// them (failGuard), the task is taken over once mirror returns.
func (x *executor) mirror(ctx context.Context, ec *a2asrv.ExecutorContext, id string, after int64, yield func(a2a.Event, error) bool) {
	x.mu.Lock()
	x.mirroring[ec.TaskID] = true
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		delete(x.mirroring, ec.TaskID)
		cause, orphaned := x.orphaned[ec.TaskID]
		delete(x.orphaned, ec.TaskID)
		x.mu.Unlock()
		if orphaned {
			x.takeOver(ec.TaskID, id, cause)
		}
	}()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(x.stoppingCtx, cancel)()
	head, err := x.engine.LookupHead(ctx, id)
	if err != nil && ctx.Err() == nil {
		yield(nil, fmt.Errorf("read delegation %s: %w", id, err))
		return
	}
	rep := newReporter(x.engine, head, after)
	for {
		// A moment the store is out of reach is waited out, the
		// caller's stream kept open.
		evs, ended, err := x.engine.FollowEvents(ctx, id, after, 0)
		if err != nil && ctx.Err() == nil {
			yield(nil, fmt.Errorf("read the events of delegation %s: %w", id, err))
			return
		}
		if ended && len(evs) == 0 {
			// It ended in events before these: say how, once.
			if rec, err := x.engine.LookupHead(ctx, id); err == nil {
				yield(a2a.NewStatusUpdateEvent(ec, rec.State, endMessage(ec, rec)), nil)
			}
			return
		}
		for _, ev := range evs {
			after = ev.Seq
			up := rep.event(ec, ev)
			if up == nil {
				continue
			}
			settles := settling(ev)
			if settles && ev.State.Terminal() {
				x.mu.Lock()
				delete(x.byTask, ec.TaskID)
				x.mu.Unlock()
			}
			if !yield(up, nil) {
				return
			}
			if !settles {
				continue
			}
			if ev.State.Terminal() {
				return
			}
			if ev.State == a2a.TaskStateInputRequired {
				if d, ok := x.engine.Get(id); ok {
					x.park(ec, d)
				}
				return
			}
			// AUTH_REQUIRED does not end an a2a-go execution: this one
			// goes on mirroring, and the caller's answer reaches the
			// delegation through authInput.
		}
		if err := x.engine.WaitEvents(ctx, id, after); err == nil {
			continue
		}
		if x.stoppingCtx.Err() == nil {
			return // the caller went away
		}
		// The daemon no longer follows the delegation, so the task cannot
		// go on through it; the execution ends only on a final event.
		rec, _ := x.engine.LookupHead(context.WithoutCancel(ctx), id)
		if rec.State == a2a.TaskStateAuthRequired {
			// It waits for its caller, and is carried on after a restart
			// waiting: the task stays as stored, and the caller's answer
			// then starts a new execution.
			return
		}
		yield(status(ec, a2a.TaskStateFailed, fmt.Sprintf("orchd stopped while the task was in flight; task %s at %s was left as it was",
			rec.Downstream.TaskID, rec.Downstream.Agent)), nil)
		return
	}
}

// Cancel cancels the task's delegation, which cancels the downstream task.
func (x *executor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		// Whether an execution mirrors the task is read before canceling:
		// that execution ends the task with the outcome, and by the time
		// the cancel returns it may have done so and closed the queue.
		x.changes.notify(ec.TaskID)
		x.mu.Lock()
		x.unwatchLocked(ec.TaskID)
		x.canceling[ec.TaskID] = true // until Cleanup
		r, known := x.byTask[ec.TaskID]
		id := r.delegation
		running := x.mirroring[ec.TaskID]
		x.mu.Unlock()
		if !known && ec.StoredTask != nil {
			id, known = taskDelegation(ec.StoredTask)
		}
		if !known {
			yield(status(ec, a2a.TaskStateCanceled, "canceled before any agent took the work"), nil)
			return
		}
		rec, err := x.engine.Cancel(ctx, id)
		if running {
			return // the running execution mirrors the outcome
		}
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

// requestFrom reads a delegation request from an incoming A2A message,
// called for by the caller of ctx. Its chain context is believed only
// from a trusted peer (trust.go).
func (x *executor) requestFrom(ctx context.Context, msg *a2a.Message) (delegation.Request, error) {
	if msg == nil {
		return delegation.Request{}, fmt.Errorf("%w: no message", delegation.ErrBadRequest)
	}
	chain, hasChain, err := delegation.ChainFrom(msg.Metadata)
	if err != nil {
		return delegation.Request{}, fmt.Errorf("%w: %v", delegation.ErrBadRequest, err)
	}
	m := *msg
	m.TaskID, m.ContextID = "", "" // the caller's message id goes on, as in inputFrom
	m.Metadata = maps.Clone(m.Metadata)
	delete(m.Metadata, delegation.ExtensionURI)
	req := delegation.Request{Message: &m, Metadata: m.Metadata, Via: &delegation.Via{Front: "a2a"}}
	if s, ok := m.Metadata[SkillMetadataKey].(string); ok {
		req.Skill = s
	}
	req.Caller = x.gate.CallerOf(ctx)
	if hasChain {
		x.believe(ctx, &req, chain)
	}
	return req, nil
}

// inputFrom is the caller's follow-up message as the delegation passes it
// on: the caller's message id and no upstream task ids.
//
// Message ids: orchd forwards the caller's messageId unchanged, on the
// first message and on every later input, so a caller, orchd and the agent
// name a message alike across any number of hops. A2A makes the id unique
// per sender, and orchd sends the message on the caller's behalf; a2a-go
// neither deduplicates nor refuses a repeated id on either side (each
// message to no task starts a new task), so keeping it changes nothing
// that runs, while replacing it would hide from agents and traces which
// message they are handling and defeat any deduplication an agent does.
func inputFrom(m *a2a.Message) *a2a.Message {
	c := *m
	c.TaskID, c.ContextID = "", ""
	c.Metadata = maps.Clone(c.Metadata)
	delete(c.Metadata, delegation.ExtensionURI)
	return &c
}

// upstreamEvent is a delegation event as the upstream task sees it, or
// nil for one it does not see: an artifact event for a produced artifact,
// a status update for the rest. The caller's own input, passed on, brings
// only the state it leads to (WORKING again); steering signals are
// acknowledged to the caller by steerRoute, not mirrored, and a contained
// event is orchd's own note (the interrupt or cancel after it is
// mirrored).
func upstreamEvent(task a2a.TaskInfoProvider, ev delegation.Event) a2a.Event {
	info := task.TaskInfo()
	switch {
	case ev.Kind == "artifact" && ev.Artifact != nil:
		art := *ev.Artifact
		return &a2a.TaskArtifactUpdateEvent{TaskID: info.TaskID, ContextID: info.ContextID, Artifact: &art, Append: ev.Append, LastChunk: ev.LastChunk}
	case callerInput(ev):
		return a2a.NewStatusUpdateEvent(task, ev.State, nil)
	case ev.Kind == "steer" || ev.Kind == "interrupt" || ev.Kind == delegation.KindContained:
		return nil
	}
	status := a2a.NewStatusUpdateEvent(task, ev.State, upstreamMessage(task, ev))
	status.Metadata = ev.Metadata // the interrupted flag, when a hop was interrupted
	return status
}

// callerInput reports whether the event is the caller's own input,
// passed on to the agent.
func callerInput(ev delegation.Event) bool {
	return ev.Kind == "message" && ev.Message != nil && ev.Message.Role == a2a.MessageRoleUser
}

// settling reports whether the event is a status of the agent's, which
// may end the upstream task or make it wait: a state event, or a message
// of the agent's.
func settling(ev delegation.Event) bool {
	return ev.Kind == "state" || ev.Kind == "message" && !callerInput(ev)
}

// upstreamMessage re-addresses an event's message to the upstream task, or
// words the event's error as one.
func upstreamMessage(task a2a.TaskInfoProvider, ev delegation.Event) *a2a.Message {
	if ev.Message != nil {
		m := *ev.Message
		info := task.TaskInfo()
		m.TaskID, m.ContextID = info.TaskID, info.ContextID
		return &m
	}
	if ev.Error != "" {
		return a2a.NewMessageForTask(a2a.MessageRoleAgent, task, a2a.NewTextPart(ev.Error))
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
