package delegation

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Following by push.
//
// An agent whose card declares push notifications can be told, with the
// first message, where to POST its task's events: orchd's webhook for the
// delegation (Config.PushURL followed by the delegation's id), with a
// token made for the delegation. No stream stays open and no poll runs;
// the delegation holds no goroutine between notifications, only a timer.
//
// A notification is never believed: it only says that the task may have
// changed. The webhook checks the token (its SHA-256 is kept in the
// record's Progress, so every process sharing the store can check it,
// after any restart), and the process following the delegation then asks
// the agent for the task (GetTask) and applies what the agent answers.
// Notifications that arrive while a read is under way are folded into one
// more read. A notification that was lost is made up for by the safety
// read: SilenceTimeout after the last read, the task is read anyway, and
// read failures back off and give the task up as polling does.

// pushConfigID names orchd's push config at the agent.
const pushConfigID = "orchd"

// pushHub holds the webhooks of the delegations followed by push here.
// Its zero value is ready.
type pushHub struct {
	mu    sync.Mutex
	url   string
	set   bool
	hooks map[string]*pushHook
	// store bounds the notifications checked against the store.
	store bucket
	// reads runs the followers' reads of their tasks.
	reads pushReads
}

// pushHook is a delegation's webhook in this process: its token's hash,
// the rate its notifications are taken at, and its follower.
type pushHook struct {
	d    *Delegation
	hash [sha256.Size]byte

	mu   sync.Mutex
	rate bucket
	// task is the delegation's downstream task once a follower has
	// read it, "" before: what a notification must name. It is kept
	// here so a notification is checked and answered without the
	// delegation's lock, which is held while its writes reach the
	// store; an agent that sends its notifications in line with its
	// work (a2a-go does) would wait for them.
	task a2a.TaskID
	// f follows the task; nil while none does (before the follower
	// starts, and while the task waits for input), and pending then
	// says a notification came meanwhile; pendingMarked, that every one
	// named the status pendingMark.
	f             *pushFollower
	pending       bool
	pendingMarked bool
	pendingMark   statusMark
	// known is the mark of the task's status as last read (from the
	// agent's answer, or a read), when knows: a notification naming it
	// is not read again (statusMark).
	known statusMark
	knows bool
	// ended undoes the drop of the hook at the delegation's end; expire
	// drops a hook whose delegation never started being followed.
	ended  func() bool
	expire *time.Timer
}

// bucket is a token bucket; callers hold the lock guarding it.
type bucket struct {
	tokens float64
	at     time.Time
}

// take takes a token, refilled at rate a second up to burst.
func (b *bucket) take(now time.Time, rate, burst float64) bool {
	if b.at.IsZero() {
		b.tokens = burst
	} else {
		b.tokens = min(burst, b.tokens+now.Sub(b.at).Seconds()*rate)
	}
	b.at = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// SetPushURL sets the URL prefix of the push webhook when Config.PushURL
// left it empty: the daemon knows its own URL only once it listens. Call
// it before Start; an empty prefix turns push off.
func (e *Engine) SetPushURL(prefix string) {
	e.push.mu.Lock()
	defer e.push.mu.Unlock()
	e.push.url, e.push.set = prefix, true
}

// pushURL is the webhook prefix in force.
func (e *Engine) pushURL() string {
	e.push.mu.Lock()
	defer e.push.mu.Unlock()
	if e.push.set {
		return e.push.url
	}
	return e.cfg.PushURL
}

// reachable reports whether an agent of card can reach the webhook at
// prefix, as far as orchd can tell: there is one, and a webhook on a
// loopback address is offered only to agents on loopback addresses.
func reachable(prefix string, card *a2a.AgentCard) bool {
	u, err := url.Parse(prefix)
	if prefix == "" || err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	if !loopbackHost(u.Hostname()) {
		return true
	}
	for _, i := range card.SupportedInterfaces {
		if au, err := url.Parse(i.URL); err == nil && loopbackHost(au.Hostname()) {
			return true
		}
	}
	return false
}

func loopbackHost(h string) bool {
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// sendPush sends the first message of a delegation followed by push, with
// orchd's webhook and a new token for it. It reports ok false, sending
// nothing, for other delegations and for later messages: the agent keeps
// the webhook for the task. An agent that refuses push after all is sent
// the message again without it, followed as without push.
func (d *Delegation) sendPush(ctx context.Context, req *a2a.SendMessageRequest) (*session, bool, error) {
	e := d.engine
	d.mu.Lock()
	mode, named, id, agent := d.prog.Follow, d.rec.Downstream.TaskID != "", d.rec.ID, d.rec.Downstream.Agent
	d.mu.Unlock()
	if mode != FollowPush || named {
		return nil, false, nil
	}
	token, err := newPushToken()
	if err != nil {
		return nil, true, err
	}
	sum := sha256.Sum256([]byte(token))
	h := e.push.prepare(d, sum, max(2*e.cfg.CallTimeout, time.Minute))
	d.mu.Lock()
	d.prog.PushToken = hex.EncodeToString(sum[:])
	d.mu.Unlock()
	callCtx, cancel := d.callContext(ctx)
	defer cancel()
	req.Config = &a2a.SendMessageConfig{ReturnImmediately: true,
		PushConfig: &a2a.PushConfig{ID: pushConfigID, URL: e.pushURL() + url.PathEscape(id), Token: token}}
	start := time.Now()
	res, err := d.client.SendMessage(callCtx, req)
	err = callErr(callCtx, err)
	e.instruments.called(ctx, agent, "SendMessage", start, err)
	if _, answered := res.(*a2a.Message); err != nil || answered {
		e.push.drop(id, h)
		d.mu.Lock()
		d.prog.PushToken = ""
		d.mu.Unlock()
	}
	if errors.Is(err, a2a.ErrPushNotificationNotSupported) {
		streams := false
		if a, ok := e.reg.Get(agent); ok {
			if card, cerr := a.AgentCard(); cerr == nil {
				streams = card.Capabilities.Streaming
			}
		}
		e.log.Warn("agent declares push notifications but refused orchd's webhook; following it another way", "delegation", id, "agent", agent, "stream", streams)
		d.mu.Lock()
		d.prog.Follow, d.prog.Streaming = FollowPoll, streams
		if streams {
			d.prog.Follow = FollowStream
		}
		d.mu.Unlock()
		req.Config = nil
		s, err := d.send(ctx, req.Message)
		return s, true, err
	}
	if err != nil {
		return nil, true, err
	}
	return &session{first: res}, true, nil
}

// newPushToken returns a random token: 32 bytes, base64url.
func newPushToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("make a push token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// prepare keeps the webhook of a delegation about to be sent, so a
// notification that comes before its follower starts is kept for it. A
// hook no follower takes within expireAfter is dropped.
func (p *pushHub) prepare(d *Delegation, hash [sha256.Size]byte, expireAfter time.Duration) *pushHook {
	h := &pushHook{d: d, hash: hash}
	id := d.rec.ID
	h.expire = time.AfterFunc(expireAfter, func() {
		h.mu.Lock()
		taken := h.ended != nil || h.f != nil
		h.mu.Unlock()
		if !taken {
			p.drop(id, h)
		}
	})
	p.mu.Lock()
	if p.hooks == nil {
		p.hooks = map[string]*pushHook{}
	}
	p.hooks[id] = h
	p.mu.Unlock()
	return h
}

// hook returns the delegation's webhook here, made from the record's hash
// when there is none (a delegation carried on from the store); nil when
// the record keeps no valid hash.
func (p *pushHub) hook(d *Delegation, hexHash string) *pushHook {
	p.mu.Lock()
	defer p.mu.Unlock()
	if h := p.hooks[d.rec.ID]; h != nil && h.d == d {
		return h
	}
	b, err := hex.DecodeString(hexHash)
	if err != nil || len(b) != sha256.Size {
		return nil
	}
	h := &pushHook{d: d}
	copy(h.hash[:], b)
	if p.hooks == nil {
		p.hooks = map[string]*pushHook{}
	}
	p.hooks[d.rec.ID] = h
	return h
}

// get returns the webhook of delegation id here, or nil.
func (p *pushHub) get(id string) *pushHook {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hooks[id]
}

// drop forgets h, if it is still delegation id's webhook.
func (p *pushHub) drop(id string, h *pushHook) {
	p.mu.Lock()
	if p.hooks[id] == h {
		delete(p.hooks, id)
	}
	p.mu.Unlock()
	if h.expire != nil {
		h.expire.Stop()
	}
}

// followPush follows the task of a delegation followed by push, from the
// session's first event (nil when the task could not be read), and
// reports whether it does; false leaves the delegation to be streamed or
// polled.
func (d *Delegation) followPush(s *session) bool {
	e := d.engine
	d.mu.Lock()
	mode, hash, task, agent := d.prog.Follow, d.prog.PushToken, d.rec.Downstream.TaskID, d.rec.Downstream.Agent
	d.mu.Unlock()
	if mode != FollowPush {
		return false
	}
	h := e.push.hook(d, hash)
	if h == nil {
		return false // no webhook was registered: the task is polled
	}
	s.drop() // no stream is read in push mode
	ctx, cancel := context.WithCancel(d.traced(e.ctx))
	f := &pushFollower{h: h, d: d, agent: agent, ctx: ctx, cancel: cancel, done: make(chan struct{}), wait: e.cfg.PollInterval}
	d.mu.Lock()
	d.stopFollow, d.followDone = f.stop, f.done
	d.mu.Unlock()
	h.mu.Lock()
	if task != "" {
		h.task = task
	}
	if h.ended == nil {
		h.ended = d.AfterEnd(func() { e.push.drop(d.rec.ID, h) })
	}
	if h.expire != nil {
		h.expire.Stop()
	}
	if e.ctx.Err() != nil {
		// Closed meanwhile: nothing follows the task, as after Close.
		h.mu.Unlock()
		f.stop()
		return true
	}
	if f.stopped {
		h.mu.Unlock()
		return true // stopped already (a cancel, the deadline): nothing to follow
	}
	if old := h.f; old != nil {
		old.stopLocked()
	}
	h.f = f
	h.known, h.knows = statusMark{}, false
	switch ev := s.first.(type) {
	case *a2a.Task:
		h.known, h.knows = markOf(ev.Status)
	case *a2a.TaskStatusUpdateEvent:
		h.known, h.knows = markOf(ev.Status)
	}
	read := s.first == nil || h.pendingNewsLocked()
	h.pending, h.pendingMarked = false, false
	f.timer = time.AfterFunc(e.cfg.SilenceTimeout, f.kick)
	h.mu.Unlock()
	if read {
		f.kick()
	}
	return true
}

// pushFollower follows one stretch of a task by reading it, until the
// task settles or following stops: by push, when kicked by a notification
// or by its safety timer; polling (pace set, followPoll), when its timer
// says the next poll is due. Each read runs in a worker of its agent's
// read queue (pushReads): no goroutine is its own while it waits.
type pushFollower struct {
	h      *pushHook
	d      *Delegation
	agent  string // the agent whose queue its reads wait in (pushReads)
	ctx    context.Context
	cancel context.CancelFunc
	// done is closed once the follower has stopped and no read runs.
	done chan struct{}
	// pace schedules the polls of a polling follower; nil by push.
	pace *pace

	// Guarded by h.mu.
	timer    *time.Timer
	due      time.Duration // what the timer of a polling follower was set to
	running  bool          // a read runs
	again    bool          // kicked while a read ran
	stopped  bool
	closed   bool
	failures int
	since    time.Time // the first failure of the current run
	wait     time.Duration
}

// kick reads the task now, or once more after the read under way.
func (f *pushFollower) kick() {
	h := f.h
	h.mu.Lock()
	if f.stopped {
		h.mu.Unlock()
		return
	}
	if f.running {
		f.again = true
		h.mu.Unlock()
		return
	}
	f.running = true
	h.mu.Unlock()
	if !f.d.engine.push.reads.add(f.d.engine, f) {
		h.mu.Lock()
		f.running = false
		f.stopLocked()
		h.mu.Unlock()
	}
}

// run reads the task until no kick is left, then returns; a pushReads
// worker runs it.
func (f *pushFollower) run() {
	d, e, h := f.d, f.d.engine, f.h
	for {
		d.mu.Lock()
		taskID := d.rec.Downstream.TaskID
		d.mu.Unlock()
		task, err := d.getTask(f.ctx, taskID)
		settled := errors.Is(err, ErrAnswerTooLarge) // getTask gave the task up
		if err == nil {
			settled = d.apply(task)
		}
		lost := ""
		h.mu.Lock()
		if taskID != "" {
			h.task = taskID
		}
		if err == nil {
			h.known, h.knows = markOf(task.Status)
		}
		switch {
		case f.stopped || f.ctx.Err() != nil:
			f.running = false
			f.stopLocked()
			h.mu.Unlock()
			return
		case err == nil:
			f.failures, f.wait = 0, e.cfg.PollInterval
			switch {
			case settled:
			case f.pace != nil:
				now := time.Now()
				f.pace.saw(now, task.Status.State)
				f.due = f.pace.wait(now)
				f.timer.Reset(f.due)
			default:
				f.timer.Reset(e.cfg.SilenceTimeout)
			}
		default:
			if f.failures++; f.failures == 1 {
				f.since = time.Now()
			}
			if f.failures >= lostAfter && time.Since(f.since) >= e.cfg.SilenceTimeout {
				what := "reads"
				if f.pace != nil {
					what = "polls"
				}
				lost = fmt.Sprintf("lost track of task %s: %d %s failed in a row over %s, the last with: %v",
					taskID, f.failures, what, time.Since(f.since).Round(time.Millisecond), err)
			} else {
				f.wait = min(2*f.wait, max(maxPollBackoff, e.cfg.PollInterval))
				f.due = f.wait
				f.timer.Reset(f.wait)
			}
		}
		if !settled && lost == "" && f.again {
			f.again = false
			h.mu.Unlock()
			continue
		}
		f.running = false
		if settled || lost != "" {
			f.stopLocked()
		}
		h.mu.Unlock()
		if lost != "" {
			d.fail(lost)
		}
		if settled || lost != "" {
			d.settled()
		}
		return
	}
}

// stop ends the follower and, once no read runs, closes done: the
// delegation's stopFollow.
func (f *pushFollower) stop() {
	f.h.mu.Lock()
	defer f.h.mu.Unlock()
	f.stopLocked()
}

// stopLocked is stop; callers hold h.mu.
func (f *pushFollower) stopLocked() {
	if !f.stopped {
		f.stopped = true
		f.cancel()
		if f.timer != nil {
			f.timer.Stop()
		}
		if f.h.f == f {
			f.h.f = nil
		}
	}
	if f.running && f.d.engine.push.reads.remove(f) {
		f.running = false // its read had not begun
	}
	if !f.running && !f.closed {
		f.closed = true
		close(f.done)
	}
}
