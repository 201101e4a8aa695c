package delegation

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	lru "github.com/hashicorp/golang-lru/v2"

	"go.opentelemetry.io/otel/attribute"

	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/telemetry"
)

// PolicySource gives the policies in force; *policies.Engine is one.
type PolicySource interface {
	Set() *policies.Set
}

// ErrClosed means the engine was closed.
var ErrClosed = errors.New("delegation engine closed")

// Engine delegates work and owns every delegation it starts: the
// goroutines following downstream tasks end when their tasks end or when
// the engine is closed.
type Engine struct {
	cfg      Config
	reg      *registry.Registry
	policies PolicySource
	store    Store
	log      *slog.Logger
	in       *instruments
	// answerLimit bounds an agent's answer read whole (bounded.go):
	// maxAgentAnswer, smaller in tests.
	answerLimit int64

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.RWMutex
	live     map[string]*Delegation
	finished []string // ended delegations still live, oldest first
	// takingOver marks the delegations this engine is taking over from
	// the store now (resume.go, lockTakeOver); each channel closes when
	// that is done.
	takingOver map[string]chan struct{}

	clients *lru.Cache[string, cachedClient]
	// onResume runs for each delegation carried on from the store.
	onResume func(*Delegation)
	// stopRelay stops answering operations other processes pass here.
	stopRelay func()
	// push holds the webhooks of delegations followed by push (push.go).
	push pushHub
	// early bounds the polls all delegations make before PollInterval
	// (poll.go).
	early pollBudget
}

// NewEngine returns an engine delegating to agents in reg under the
// policies of pol, recording delegations in store. A nil logger discards
// logs.
func NewEngine(reg *registry.Registry, pol PolicySource, store Store, cfg Config, log *slog.Logger) *Engine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	clients, _ := lru.New[string, cachedClient](1024) // only a non-positive size fails
	e := &Engine{cfg: cfg.withDefaults(), reg: reg, policies: pol, store: store, log: log,
		in:  newInstruments(cfg.TracerProvider, cfg.MeterProvider),
		ctx: ctx, cancel: cancel, live: map[string]*Delegation{}, takingOver: map[string]chan struct{}{}, clients: clients, answerLimit: maxAgentAnswer}
	e.in.observe = e.observe // every call's outcome feeds the agent's breaker
	return e
}

// Close stops following every delegation and waits for the goroutines to
// end. Downstream tasks are left as they are; their records stay in the
// store with their last known state.
func (e *Engine) Close() {
	e.mu.Lock() // no timer starts an owned goroutine past this point
	e.cancel()
	stop := e.stopRelay
	e.mu.Unlock()
	if stop != nil {
		stop()
	}
	e.wg.Wait()
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

// Delegate chooses an agent for the work and hands it over. It returns once
// an agent has accepted the work; the delegation then runs on its own. It
// fails with a *RefusedError, before sending anything, when no candidate
// qualifies; with a *FailedError when every candidate tried failed before
// accepting; with ErrBadRequest, ErrUnknownAgent, ErrCycle, ErrTooDeep or
// ErrDeadline for requests that cannot be delegated. No delegation exists after an
// error.
func (e *Engine) Delegate(ctx context.Context, req Request) (d *Delegation, err error) {
	if e.ctx.Err() != nil {
		return nil, ErrClosed
	}
	id := a2a.NewContextID()
	ctx, span := e.in.start(ctx, "orchd.delegate")
	var dec *Decision
	defer func() { e.in.outcome(ctx, span, dec, err) }()
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
		d := &Delegation{engine: e, chain: out, first: 1, span: span.SpanContext(), callerTrace: telemetry.TraceHeadersFrom(ctx),
			prog: Progress{Steerable: a.Steering.Steerable, Interruptible: a.Steering.Interruptible},
			rec: Record{ID: id, State: a2a.TaskStateSubmitted, Chain: out, Decision: dec, CreatedAt: now, UpdatedAt: now,
				Downstream: Hop{Agent: a.ID, CardDigest: a.Digest}, Owner: req.owner(), ChainIgnored: req.ChainIgnored}}
		msg := req.message()
		if d.chained = readsChain(a); d.chained {
			out.Attach(msg)
		}
		first, err := d.open(ctx, a, msg)
		if err != nil {
			dec.Attempts = append(dec.Attempts, Attempt{Agent: a.ID, Error: err.Error()})
			e.log.WarnContext(ctx, "agent did not accept delegated work", "delegation", id, "agent", a.ID, "error", err)
			last = err
			if retryable(err) && ctx.Err() == nil {
				continue
			}
			return nil, &FailedError{Decision: dec, Err: err}
		}
		dec.Attempts = append(dec.Attempts, Attempt{Agent: a.ID})
		dec.Chosen = a.ID
		if _, isMsg := first.first.(*a2a.Message); req.EndedUpstream != nil && !isMsg && endsAtOnce(first.first) {
			up := *req.EndedUpstream
			d.rec.Upstream = &up
			d.keepUpstream = req.KeepUpstream
		}
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

// Get returns a live delegation.
func (e *Engine) Get(id string) (*Delegation, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	d, ok := e.live[id]
	return d, ok
}

// Lookup returns a delegation's record, live or stored, with its
// artifacts: a stored one's are folded from its log (artifacts.go).
func (e *Engine) Lookup(ctx context.Context, id string) (Record, error) {
	return e.lookup(ctx, id, true)
}

// LookupHead returns a delegation's record as Lookup does, but without
// reading the artifacts of one that is not live here (a live one's are at
// hand): what deciding whether a caller may act on it needs, before
// reading more.
func (e *Engine) LookupHead(ctx context.Context, id string) (Record, error) {
	return e.lookup(ctx, id, false)
}

func (e *Engine) lookup(ctx context.Context, id string, artifacts bool) (Record, error) {
	if d, ok := e.Get(id); ok {
		return d.Record(), nil
	}
	r, err := e.store.Get(ctx, id)
	if err != nil {
		return Record{}, fmt.Errorf("%w: %q", err, id)
	}
	if artifacts {
		if r.Artifacts, _, err = e.rebuildArtifacts(ctx, r); err != nil {
			return Record{}, err
		}
	}
	r.Progress = nil
	return r, nil
}

// List returns a page of records, newest first, without their artifacts,
// which Lookup reads (artifacts.go).
func (e *Engine) List(ctx context.Context, q Query) (Page, error) {
	p, err := e.store.List(ctx, q)
	for i := range p.Records {
		p.Records[i].Progress = nil
	}
	return p, err
}

// register makes a delegation live.
func (e *Engine) register(d *Delegation) {
	e.in.inflight.Add(e.ctx, 1)
	e.mu.Lock()
	e.live[d.rec.ID] = d
	e.mu.Unlock()
}

// ended forgets the event logs of the oldest ended delegations beyond
// KeepFinished.
func (e *Engine) ended(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.finished = append(e.finished, id)
	for len(e.finished) > e.cfg.KeepFinished {
		delete(e.live, e.finished[0])
		e.finished = e.finished[1:]
	}
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
		e.in.called(ctx, d.rec.Downstream.Agent, "SendMessage", start, err)
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
	st, first, err, ok := e.openStream(streamCtx, cancel, d.client.SendStreamingMessage(streamCtx, req))
	e.in.called(ctx, d.rec.Downstream.Agent, "SendStreamingMessage", start, callErr(openCtx, err))
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
		// ended, is all there is to keep. Until that write, the caller
		// has no answer; a process killed before it leaves nothing
		// running to carry on, as the agent's work is over.
		d.mu.Lock()
		d.deferred = true
		d.mu.Unlock()
		d.arm()
		e.register(d)
		d.follow(s)
		d.mu.Lock()
		d.deferred = false
		kept := d.keepUpstreamAlongside(ctx)
		d.persistEnded()
		err = d.persistErr
		d.mu.Unlock()
		<-kept
		if err != nil {
			return fmt.Errorf("%w: keep delegation %s: %v", ErrUnavailable, d.rec.ID, err)
		}
		return nil
	}
	if l := e.cfg.Leases; l != nil {
		// Taken before the record is stored as running, so no other
		// process adopts the delegation.
		d.lease, err = l.Take(ctx, d.rec.ID, e.cfg.Instance)
	}
	if err == nil {
		d.mu.Lock()
		err = e.store.Put(ctx, d.stored())
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
	d.follow(s)
	return nil
}

// keepUpstreamAlongside starts keeping the upstream task of a delegation
// that ended at once (Request.KeepUpstream), with copies of its record
// and events, while the caller stores them; the channel is closed once it
// is done (at once when there is nothing to keep). The caller holds mu
// and waits on the channel, so the goroutine is owned by the call.
func (d *Delegation) keepUpstreamAlongside(ctx context.Context) <-chan struct{} {
	kept := make(chan struct{})
	keep := d.keepUpstream
	if keep == nil || !d.rec.State.Terminal() {
		close(kept)
		return kept
	}
	rec, evs := d.snapshot(), slices.Clone(d.unsaved)
	go func() {
		defer close(kept)
		if err := keep(ctx, rec, evs); err != nil {
			d.engine.log.DebugContext(ctx, "keep the upstream task of a delegation that ended at once", "delegation", rec.ID, "error", err)
		}
	}()
	return kept
}

// endsAtOnce reports whether an agent's first answer ends the work: a
// message, or a task (or a status of it) in a terminal state.
func endsAtOnce(first a2a.Event) bool {
	switch ev := first.(type) {
	case *a2a.Message:
		return true
	case *a2a.Task:
		return ev.Status.State.Terminal()
	case *a2a.TaskStatusUpdateEvent:
		return ev.Status.State.Terminal()
	}
	return false
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

// getTask asks the agent for the downstream task, bounded by CallTimeout;
// ctx is the follower's, which the deadline's expiry ends.
func (d *Delegation) getTask(ctx context.Context, taskID a2a.TaskID) (*a2a.Task, error) {
	e := d.engine
	callCtx, cancel := context.WithTimeoutCause(ctx, e.cfg.CallTimeout, &callTimeoutError{agent: d.rec.Downstream.Agent, limit: e.cfg.CallTimeout})
	defer cancel()
	start := time.Now()
	task, err := d.client.GetTask(callCtx, &a2a.GetTaskRequest{ID: taskID})
	err = callErr(callCtx, err)
	e.in.called(ctx, d.rec.Downstream.Agent, "GetTask", start, err)
	if errors.Is(err, ErrAnswerTooLarge) {
		// Reading it again would bring the same: every path that reads
		// the task (a poll, a push notification, a resume) gives it up.
		d.mu.Lock()
		if !d.rec.State.Terminal() {
			d.overLimit(fmt.Sprintf("its task is larger than orchd reads: %v", err))
		}
		d.mu.Unlock()
	}
	return task, err
}

// settled runs when the downstream task ended or waits for input. Several
// paths may see the same end (the follower, a cancel, the silence probe);
// the first to see it ended hands the delegation to Engine.ended, once.
func (d *Delegation) settled() {
	d.mu.Lock()
	first := d.rec.State.Terminal() && !d.listed
	var lease Lease
	if first {
		d.listed = true
		lease, d.lease = d.lease, nil
	}
	d.mu.Unlock()
	if first {
		release(lease)
		d.engine.ended(d.rec.ID)
	}
}

// stop ends the goroutine following the downstream task and waits for it.
func (d *Delegation) stop() {
	d.mu.Lock()
	stop, done := d.stopFollow, d.followDone
	d.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// retryable reports whether an agent's failure to accept work warrants
// trying the next candidate: it could not be reached, failed on the server
// side, its breaker is open, it does not speak the version the client
// chose, it refused orchd's credentials, or orchd could not get them.
func retryable(err error) bool {
	if errors.Is(err, ErrAnswerTooLarge) {
		return false // the agent answered: too much, and the next would too
	}
	return errors.Is(err, a2a.ErrVersionNotSupported) ||
		errors.Is(err, a2a.ErrUnauthenticated) || errors.Is(err, a2a.ErrUnauthorized) ||
		errors.Is(err, credentials.ErrUnavailable) ||
		errors.Is(err, registry.ErrBreakerOpen) ||
		errors.Is(err, a2a.ErrInternalError) ||
		errors.Is(err, a2a.ErrServerError) ||
		unreachable(err) ||
		strings.Contains(err.Error(), "no compatible transports")
}

// unreachable reports whether err says the agent could not be reached or
// did not answer: the connection was refused or broke, the network or a
// timeout failed the call, or it answered with an HTTP 5xx status.
func unreachable(err error) bool {
	if errors.Is(err, ErrAnswerTooLarge) {
		return false // it answered, too much (a *url.Error wraps it)
	}
	var netErr net.Error
	return errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, &netErr) || // a context.DeadlineExceeded is one
		strings.Contains(err.Error(), "unexpected HTTP status: 5")
}
