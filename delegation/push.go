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
	f             *readFollower
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
	f := &readFollower{h: h, d: d, agent: agent, ctx: ctx, cancel: cancel, done: make(chan struct{}), wait: e.cfg.PollInterval}
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
	if st, ok := statusOf(s.first); ok {
		h.known, h.knows = markOf(st)
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
