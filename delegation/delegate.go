package delegation

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"go.opentelemetry.io/otel/attribute"

	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/telemetry"
)

// One delegation, from the caller's request to the agent's last event, in
// the order it goes:
//
//   - Delegate checks the request (Request.validate, request.go), works
//     out the chain the work arrived with and the one it passes on
//     (chains), takes a running slot (running.take, limits.go: work over
//     MaxRunning or MaxRunningPerCaller is refused here, before anything
//     is sent), and chooses the candidates (choose, choose.go): the
//     registry's agents for the work, less those the chain, their
//     protocol, their health (health.go) or their credentials rule out,
//     ranked by the policies.
//   - It tries them in order, at most MaxAttempts. open builds the
//     agent's client (client.go), chooses how its task will be followed
//     (chooseFollow, follow.go) and asks the agent's circuit breaker
//     (registry.Registry.Admit); send hands the work over: with a webhook
//     for push notifications (sendPush, push.go), on a stream
//     (openStream, stream.go), or in one call that returns at once. An
//     agent that fails before accepting gives way to the next when its
//     error says so (retryable, classify.go).
//   - start keeps the first delegation an agent accepted: it stores it
//     (one the first answer ended is stored once, ended, queued when the
//     store is a QuickStore, alongside the task KeepEndedUpstream names,
//     keepupstream.go), arms its deadline
//     (arm, deadline.go), makes it live (register, engine.go) and
//     follows it.
//   - follow applies the first answer (apply, apply.go) and follows the
//     rest: by push, on the stream (follower, follow.go), or by polling
//     (poll.go). apply folds each event in, and emitLocked logs and
//     stores it (delegation.go).
//   - settled, once the task has ended, gives the lease up (lease.go) and
//     hands the delegation to Engine.ended, which keeps the latest
//     KeepFinished ended delegations in memory.
//
// Input and cancels for a running delegation are in control.go, steering
// signals in steer.go, carrying delegations on after a restart in
// resume.go.

// Delegate chooses an agent for the work and hands it over. It returns once
// an agent has accepted the work; the delegation then runs on its own. It
// fails with a *RefusedError, before sending anything, when no candidate
// qualifies; with a *FailedError when every candidate tried failed before
// accepting; with ErrBadRequest, ErrUnknownAgent, ErrCycle, ErrTooDeep or
// ErrDeadline for requests that cannot be delegated; with a *LimitError
// (ErrResourceExhausted), before sending anything, when the engine runs
// as many delegations as it may, in all or for the caller, or when no
// file descriptor is left to reach the agent. No delegation exists after
// an error. Options are for fronts: keeping records of their own
// (KeepEndedUpstream), naming work by their callers' keys (WithID).
func (e *Engine) Delegate(ctx context.Context, req Request, opts ...DelegateOption) (d *Delegation, err error) {
	if e.ctx.Err() != nil {
		return nil, ErrClosed
	}
	opt, err := delegateOptions(opts)
	if err != nil {
		return nil, err
	}
	id := a2a.NewContextID()
	if opt.id != "" {
		id = opt.id
	}
	ctx, span := e.instruments.start(ctx, "orchd.delegate")
	var dec *Decision
	defer func() { e.instruments.outcome(ctx, span, dec, err) }()
	if err := req.validate(); err != nil {
		return nil, err
	}
	in, out, err := e.chains(req)
	if err != nil {
		return nil, err
	}
	if span.IsRecording() {
		span.SetAttributes(attribute.String("orchd.delegation.id", id), attribute.String("orchd.skill", out.Skill), attribute.Int("orchd.chain.depth", out.Depth))
	}
	if out.RootTask == "" {
		out.RootTask = id
	}
	// The slot is taken before anything else is spent on the work, and
	// given back unless a delegation is started with it (limits.go).
	s, err := e.running.take(req.owner().limitKey(), false)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.release()
		}
	}()
	dec, allowed, err := e.choose(ctx, &req, in, out)
	if err != nil {
		return nil, err
	}
	if len(allowed) == 0 {
		return nil, &RefusedError{Decision: dec, Skill: out.Skill}
	}
	now := e.cfg.Now()
	var last error // the last attempt's error
	for i, a := range allowed {
		if i == e.cfg.MaxAttempts {
			break
		}
		d := &Delegation{
			engine: e, chain: out, first: 1,
			span: span.SpanContext(), callerTrace: telemetry.TraceHeadersFrom(ctx),
			prog: Progress{Steerable: a.Steering.Steerable, Interruptible: a.Steering.Interruptible, Lineage: e.trustsLineage(a)},
			rec: Record{
				ID: id, State: a2a.TaskStateSubmitted, Chain: out, Decision: dec, CreatedAt: now, UpdatedAt: now,
				Downstream: Hop{Agent: a.ID, Name: a.Name, CardDigest: a.Digest}, Owner: req.owner(), ChainIgnored: req.ChainIgnored, Via: req.Via,
			},
			slot: s,
		}
		msg := req.message()
		if d.chained = readsChain(a); d.chained {
			out.Attach(msg)
		}
		first, err := d.open(ctx, a, msg)
		if err != nil {
			dec.Attempts = append(dec.Attempts, Attempt{Agent: a.ID, Error: err.Error()})
			e.log.WarnContext(ctx, "agent did not accept delegated work", "delegation", id, "agent", a.ID, "error", err)
			last = err
			if outOfFiles(err) {
				// No agent can be reached without a file descriptor: the
				// process's limit, not the agents, refuses the work.
				return nil, &LimitError{Setting: SettingOpenFiles}
			}
			if retryable(err) && ctx.Err() == nil {
				continue
			}
			return nil, &FailedError{Decision: dec, Err: err}
		}
		dec.Attempts = append(dec.Attempts, Attempt{Agent: a.ID})
		dec.Chosen = a.ID
		opt.endedAtOnce(d, first.first)
		if err := e.start(ctx, d, first); err != nil {
			return nil, err
		}
		if e.log.Enabled(ctx, slog.LevelDebug) {
			// At debug only: a delegation accepted is the usual case, and its
			// record and the orchd.delegations metric keep it.
			e.log.DebugContext(ctx, "work delegated", "delegation", id, "agent", a.ID, "skill", out.Skill, "depth", out.Depth)
		}
		return d, nil
	}
	return nil, &FailedError{Decision: dec, Err: last}
}

// Decide runs candidate selection without sending anything: what Delegate
// would choose for req, and why.
func (e *Engine) Decide(ctx context.Context, req Request) (*Decision, error) {
	if err := req.validate(); err != nil {
		return nil, err
	}
	in, out, err := e.chains(req)
	if err != nil {
		return nil, err
	}
	d, _, err := e.choose(ctx, &req, in, out)
	return d, err
}

// chains returns the incoming chain and the chain passed on.
func (e *Engine) chains(req Request) (Chain, Chain, error) {
	in := Chain{MaxDepth: e.cfg.MaxDepth}
	if req.Chain != nil {
		in = *req.Chain
		if req.Peer != "" {
			in = in.Received(req.Peer)
		}
	}
	out, err := in.Enter(e.cfg.Self, e.cfg.Name)
	if err != nil {
		return Chain{}, Chain{}, err
	}
	if !req.Deadline.IsZero() && (out.Deadline.IsZero() || req.Deadline.Before(out.Deadline)) {
		out.Deadline = req.Deadline
	}
	out.Deadline = e.capped(out.Deadline)
	if !out.Deadline.IsZero() && !e.cfg.Now().Before(out.Deadline) {
		return Chain{}, Chain{}, fmt.Errorf("%w: it was %s", ErrDeadline, stamp(out.Deadline))
	}
	if out.Skill == "" {
		out.Skill = req.Skill
	}
	if out.OnBehalfOf == nil && req.Caller.Principal != "" {
		out.OnBehalfOf = &Principal{ID: req.Caller.Principal, Tenant: req.Caller.Tenant}
	}
	for _, c := range req.Requires {
		if !containsFold(out.Requires, c) {
			out.Requires = append(out.Requires, c)
		}
	}
	return in, out, nil
}

func containsFold(ss []string, s string) bool {
	for _, x := range ss {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// open sends the first message to an agent and waits until it accepts the
// work (its first event) or fails. It streams only to agents whose card
// declares streaming.
func (d *Delegation) open(ctx context.Context, a *registry.Agent, msg *a2a.Message) (*session, error) {
	e := d.engine
	c, card, err := e.client(ctx, a)
	if err != nil {
		return nil, err
	}
	d.client = c
	d.chooseFollow(a, card)
	if err := e.refuseContained(a.ID); err != nil {
		return nil, err // contained since it was chosen: nothing is sent
	}
	if err := e.reg.Admit(a.ID); err != nil {
		return nil, err
	}
	s, err := d.send(ctx, msg)
	return s, credentials.Refusal(a.ID, err) // a 401 or 403 says so first
}

// send sends a message on the delegation's client: the first message, or
// the caller's input to a task waiting for it.
func (d *Delegation) send(ctx context.Context, msg *a2a.Message) (*session, error) {
	e := d.engine
	req := &a2a.SendMessageRequest{Message: msg}
	if !d.prog.Streaming {
		if s, ok, err := d.sendPush(ctx, req); ok {
			return s, err
		}
		callCtx, cancel := d.callContext(ctx)
		defer cancel()
		req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
		start := time.Now()
		res, err := d.client.SendMessage(callCtx, req)
		err = callErr(callCtx, err) // why callCtx ended: the chain's deadline is not the agent's fault
		e.instruments.called(ctx, d.rec.Downstream.Agent, "SendMessage", start, err)
		if err != nil {
			return nil, err
		}
		return &session{first: res}, nil
	}
	// The stream outlives the caller's request: it belongs to the engine.
	// Until the agent accepts, the caller may still give up, and the wait
	// is bounded as a unary call is.
	openCtx, opened := d.callContext(ctx)
	defer opened()
	streamCtx, cancel := context.WithCancel(d.traced(e.ctx))
	stopAfter := context.AfterFunc(openCtx, cancel)
	start := time.Now()
	st, first, ok, err := e.openStream(streamCtx, cancel, d.client.SendStreamingMessage(streamCtx, req))
	e.instruments.called(ctx, d.rec.Downstream.Agent, "SendStreamingMessage", start, callErr(openCtx, err))
	stopAfter()
	if !ok || err != nil || openCtx.Err() != nil {
		cancel()
		switch {
		case openCtx.Err() != nil:
			return nil, context.Cause(openCtx)
		case !ok:
			return nil, errors.New("stream ended before the agent answered")
		}
		return nil, err
	}
	return &session{first: first, stream: st}, nil
}

// start keeps an accepted delegation in the store, makes it live and
// follows it. When the store cannot keep it the agent's work is canceled
// and the error wraps ErrUnavailable: nothing is acknowledged that a
// restart would lose.
func (e *Engine) start(ctx context.Context, d *Delegation, s *session) error {
	var err error
	if endsAtOnce(s.first) {
		// The agent answered at once, with a message or a task it ended:
		// the delegation ends as it starts, and its one record, stored
		// ended, is all there is to keep. A QuickStore queues it, and the
		// caller has the answer without waiting for the write: a process
		// killed before the write loses the record of an exchange already
		// answered, and nothing running, as the agent's work is over.
		// Other stores write it before the caller has the answer.
		d.mu.Lock()
		d.deferred = true
		d.mu.Unlock()
		d.arm()
		e.register(d)
		d.follow(s)
		d.mu.Lock()
		d.deferred = false
		kept := d.keepUpstreamAlongsideLocked(ctx)
		d.persistEndedLocked()
		err = d.persistErr
		d.mu.Unlock()
		<-kept
		if err != nil {
			// Not kept, so it does not exist: the caller is told so.
			e.forget(d.rec.ID)
			return fmt.Errorf("%w: keep delegation %s: %v", ErrUnavailable, d.rec.ID, err)
		}
		return nil
	}
	if e.cfg.Leases != nil {
		// Taken before the record is stored as running, so no other
		// process adopts the delegation.
		d.lease, err = e.take(ctx, d.rec.ID)
	}
	if err == nil {
		d.mu.Lock()
		err = e.store.Put(ctx, d.storedLocked())
		d.mu.Unlock()
	}
	if err != nil {
		release(d.lease)
		s.drop()
		d.abandon(ctx, s.first)
		return fmt.Errorf("%w: keep delegation %s: %v", ErrUnavailable, d.rec.ID, err)
	}
	d.arm()
	e.register(d)
	e.checkContained(d)
	d.follow(s)
	return nil
}

// endsAtOnce reports whether an agent's first answer ends the work: a
// message, or a task (or a status of it) in a terminal state.
func endsAtOnce(first a2a.Event) bool {
	if _, ok := first.(*a2a.Message); ok {
		return true
	}
	st, ok := statusOf(first)
	return ok && st.State.Terminal()
}

// abandon cancels the task an agent created for work orchd could not
// keep, bounded by CallTimeout.
func (d *Delegation) abandon(ctx context.Context, first a2a.Event) {
	var id a2a.TaskID
	switch ev := first.(type) {
	case *a2a.Task:
		id = ev.ID
	case *a2a.TaskStatusUpdateEvent:
		id = ev.TaskID
	case *a2a.TaskArtifactUpdateEvent:
		id = ev.TaskID
	}
	if id == "" {
		return // the agent answered with a message: no work goes on
	}
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), d.engine.cfg.CallTimeout)
	defer cancel()
	if _, err := d.client.CancelTask(callCtx, &a2a.CancelTaskRequest{ID: id}); err != nil {
		d.engine.log.Warn("cancel the task of a delegation that could not be kept", "delegation", d.rec.ID, "task", id, "error", err)
	}
}

// follow applies the session's first event and, unless the task has
// settled, follows the rest: on the session's stream, by the stream's
// goroutine, or else in a goroutine of its own, both owned by the engine.
func (d *Delegation) follow(s *session) {
	e := d.engine
	if d.apply(s.first) {
		d.mu.Lock()
		d.settledAtOnce = true
		d.mu.Unlock()
		s.drop()
		d.settled()
		return
	}
	if d.followPush(s) {
		return // followed by push notifications, with no goroutine waiting
	}
	if s.stream == nil && d.followPoll() {
		return // polled, with no goroutine waiting
	}
	ctx, cancel := context.WithCancel(d.traced(e.ctx))
	f := &follower{d: d, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	d.mu.Lock()
	d.stopFollow, d.followDone = cancel, f.done
	d.mu.Unlock()
	if s.stream != nil {
		if !s.stream.carry(f) {
			// Closed meanwhile: nothing follows the task, as after Close.
			cancel()
			close(f.done)
		}
		return
	}
	if !e.track() {
		cancel()
		close(f.done)
		return
	}
	go func() {
		defer e.wg.Done()
		f.finish()
	}()
}

// settled runs when the downstream task ended or waits for input. Several
// paths may see the same end (the follower, a cancel, the silence probe);
// the first to see it ended hands the delegation to Engine.ended, once,
// and gives its lease up, once the store has kept the end: until then
// the engine writes it again (keepwrites.go).
func (d *Delegation) settled() {
	d.mu.Lock()
	first := d.rec.State.Terminal() && !d.listed && !d.keeping
	unkept := first && d.persistErr != nil
	var lease Lease
	switch {
	case unkept:
		d.keeping = true
	case first:
		d.listed = true
		lease, d.lease = d.lease, nil
	}
	d.mu.Unlock()
	switch {
	case unkept:
		d.keepWriting()
	case first:
		release(lease)
		d.engine.ended(d.rec.ID)
	}
}
