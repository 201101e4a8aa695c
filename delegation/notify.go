package delegation

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// Taking push notifications: the webhook's side of following by push
// (push.go). The daemon's route (POST /a2a/push/{id}) hands each
// notification to Notify, which checks it and has the process following
// the delegation read the task.

// Errors of Engine.Notify.
var (
	// ErrPushRefused means no delegation has that webhook with that
	// token. An unknown delegation and a wrong token are the same error,
	// so a caller without the token learns nothing of the delegation.
	ErrPushRefused = errors.New("no such push webhook")
	// ErrPushRate means notifications came faster than they are taken:
	// PushRate per delegation, or, for those that must be checked
	// against the store, pushStoreRate for the whole process.
	ErrPushRate = errors.New("too many push notifications")
	// ErrPushTooLarge means the notification's body was over the limit;
	// its token was good, so the task is read all the same.
	ErrPushTooLarge = errors.New("push notification too large")
)

// Bounds of push notifications.
const (
	// PushRate and PushBurst bound the notifications taken per
	// delegation: PushRate a second on average, PushBurst at once.
	PushRate  = 50
	PushBurst = 100
	// MaxPushToken bounds the length of a notification's token.
	MaxPushToken = 256
	// pushStoreRate and pushStoreBurst bound, for the whole process, the
	// notifications checked against the store (for delegations not
	// followed here, or unknown): each costs a store read.
	pushStoreRate  = 200
	pushStoreBurst = 400
)

// Notify takes a push notification the agent of delegation id sent to
// its webhook with token, its body read from body (at most maxBytes). The
// token is checked first, then the rate; the body must be an A2A stream
// response naming the delegation's task. Nothing in it is believed: the
// process following the delegation reads the task from the agent, unless
// the notification names the very status that process read last
// (statusMark), or the task's creation, when a read would bring nothing
// newer (notice).
//
// It fails with ErrPushRefused for an unknown delegation or a wrong token
// alike, ErrPushRate, ErrPushTooLarge (the task is read all the same),
// ErrBadRequest for a body that is not a notification of the task, and
// ErrUnavailable when the store cannot be read. A good notification for
// a delegation that has ended is taken and does nothing.
func (e *Engine) Notify(ctx context.Context, id, token string, body io.Reader, maxBytes int64) error {
	if token == "" || len(token) > MaxPushToken {
		return ErrPushRefused
	}
	sum := sha256.Sum256([]byte(token))
	now := time.Now()
	taskID, local, err := e.authorizePush(ctx, id, sum, now)
	if err != nil {
		return err
	}
	n, err := readNotification(body, maxBytes)
	switch {
	case errors.Is(err, ErrPushTooLarge):
	case err != nil:
		return err
	case taskID != "" && n.task != taskID:
		return fmt.Errorf("%w: the notification names task %q, not the delegation's", ErrBadRequest, n.task)
	case n.created:
		return nil // orchd has the task from the agent's answer
	}
	if local != nil {
		local.notify(n.mark, n.marked)
		return err
	}
	d, owner, rerr := e.route(ctx, id)
	switch {
	case errors.Is(rerr, ErrEnded):
		return err
	case rerr != nil:
		return rerr
	case d == nil:
		res, ferr := e.forward(ctx, owner, Op{Kind: "push", ID: id})
		if ferr == nil {
			ferr = res.err()
		}
		if ferr != nil {
			return ferr
		}
		return err
	}
	if nerr := e.notifyLocal(d); nerr != nil {
		return nerr
	}
	return err
}

// authorizePush checks a notification's token for delegation id, and its
// rate. It returns the delegation's task ("" when not known yet: for a
// delegation followed here, until its follower starts) and its webhook
// when the delegation is followed here; a nil webhook means the
// delegation was checked against the store. It never waits for the
// delegation's lock, which its writes to the store hold.
func (e *Engine) authorizePush(ctx context.Context, id string, sum [sha256.Size]byte, now time.Time) (a2a.TaskID, *pushHook, error) {
	if h := e.push.get(id); h != nil {
		if subtle.ConstantTimeCompare(h.hash[:], sum[:]) != 1 {
			return "", nil, ErrPushRefused
		}
		h.mu.Lock()
		ok := h.rate.take(now, PushRate, PushBurst)
		taskID, started := h.task, h.ended != nil
		h.mu.Unlock()
		if !ok {
			return "", nil, ErrPushRate
		}
		if live, ok := e.Get(id); !started || (ok && live == h.d) {
			return taskID, h, nil // about to be followed here, or followed here
		}
		// Another process follows it now (this one lost its lease).
		e.push.drop(id, h)
		return taskID, nil, nil
	}
	e.push.mu.Lock()
	ok := e.push.store.take(now, pushStoreRate, pushStoreBurst)
	e.push.mu.Unlock()
	if !ok {
		return "", nil, ErrPushRate
	}
	rec, err := e.store.Get(ctx, id)
	var want []byte
	switch {
	case errors.Is(err, ErrNotFound):
	case err != nil:
		return "", nil, fmt.Errorf("%w: read delegation for a push notification: %v", ErrUnavailable, err)
	case rec.Progress != nil:
		want, _ = hex.DecodeString(rec.Progress.PushToken)
	}
	if len(want) != sha256.Size {
		want = make([]byte, sha256.Size) // compared all the same: no shortcut tells absent from wrong
	}
	if subtle.ConstantTimeCompare(want, sum[:]) != 1 || rec.Progress == nil || rec.Progress.PushToken == "" {
		return "", nil, ErrPushRefused
	}
	return rec.Downstream.TaskID, nil, nil
}

// notify passes a notification to the webhook's follower, or keeps it for
// the next one. marked says the notification named the status mark; one
// naming the status the follower last read is dropped.
func (h *pushHook) notify(mark statusMark, marked bool) {
	h.mu.Lock()
	f := h.f
	switch {
	case f == nil:
		h.pendingMarked = marked && (!h.pending || h.pendingMarked && h.pendingMark.same(mark))
		h.pendingMark = mark
		h.pending = true
	case marked && h.knows && h.known.same(mark):
		f = nil // nothing newer than the last read
	}
	h.mu.Unlock()
	if f != nil {
		f.kick()
	}
}

// pendingNewsLocked reports whether the notifications that came before
// the follower started may bring something newer than the status it
// knows; callers hold h.mu.
func (h *pushHook) pendingNewsLocked() bool {
	return h.pending && !(h.pendingMarked && h.knows && h.known.same(h.pendingMark))
}

// statusMark tells one status of a task from another: its state, its
// message's id and its timestamp. A notification naming the status the
// follower read last brings nothing a read would not already have
// applied, so it costs no read.
type statusMark struct {
	state a2a.TaskState
	msg   string
	at    time.Time
}

// markOf is st's mark, and whether it tells st apart from the task's
// other statuses: one with neither a message id nor a timestamp does not.
func markOf(st a2a.TaskStatus) (statusMark, bool) {
	m := statusMark{state: st.State}
	if st.Message != nil {
		m.msg = st.Message.ID
	}
	if st.Timestamp != nil {
		m.at = *st.Timestamp
	}
	return m, m.msg != "" || !m.at.IsZero()
}

// same reports whether m and o mark the same status.
func (m statusMark) same(o statusMark) bool {
	return m.state == o.state && m.msg == o.msg && m.at.Equal(o.at)
}

// notice is what orchd takes from a notification's body: the task it
// names and, when it says only what the task's status is (a task without
// artifacts, or a status update, either without metadata, which may carry
// news such as a hop's lineage), that status's mark. created is set for
// the task just created (SUBMITTED, with nothing else), which a2a-go
// notifies first and orchd has from the agent's answer, before it follows
// the task by push: it costs no read either.
type notice struct {
	task    a2a.TaskID
	mark    statusMark
	marked  bool
	created bool
}

// noticeOf is ev's notice.
func noticeOf(ev a2a.Event) notice {
	n := notice{task: ev.TaskInfo().TaskID}
	switch ev := ev.(type) {
	case *a2a.Task:
		if len(ev.Artifacts) == 0 && len(ev.Metadata) == 0 {
			n.mark, n.marked = markOf(ev.Status)
			n.created = ev.Status.State == a2a.TaskStateSubmitted && ev.Status.Message == nil
		}
	case *a2a.TaskStatusUpdateEvent:
		if len(ev.Metadata) == 0 {
			n.mark, n.marked = markOf(ev.Status)
		}
	}
	return n
}

// notifyLocal passes a notification to delegation d, followed here: its
// follower reads the task. It fails with errMoved when d is no longer
// live here. A delegation not followed by push, or no longer followed
// (it ended, or waits for input), has nothing to read.
func (e *Engine) notifyLocal(d *Delegation) error {
	if live, ok := e.Get(d.rec.ID); !ok || live != d {
		return errMoved
	}
	if h := e.push.get(d.rec.ID); h != nil && h.d == d {
		h.notify(statusMark{}, false) // passed on from another replica: read
	}
	return nil
}

// readNotification reads a push notification's body, at most maxBytes of
// it, and returns its notice. A body over the limit fails with
// ErrPushTooLarge.
func readNotification(body io.Reader, maxBytes int64) (notice, error) {
	b, err := io.ReadAll(io.LimitReader(body, maxBytes+1))
	if err != nil {
		return notice{}, fmt.Errorf("%w: read the notification: %v", ErrBadRequest, err)
	}
	if int64(len(b)) > maxBytes {
		return notice{}, fmt.Errorf("%w: over %d bytes", ErrPushTooLarge, maxBytes)
	}
	ev, err := parseNotification(b)
	if err != nil {
		return notice{}, err
	}
	return noticeOf(ev), nil
}

// ParseNotification parses a push notification's body, an A2A stream
// response (a task, a status update, an artifact update or a message),
// and returns the task it names. It fails with ErrBadRequest for anything
// else.
func ParseNotification(b []byte) (a2a.TaskID, error) {
	ev, err := parseNotification(b)
	if err != nil {
		return "", err
	}
	return ev.TaskInfo().TaskID, nil
}

// parseNotification is ParseNotification, returning the event.
func parseNotification(b []byte) (a2a.Event, error) {
	var sr a2a.StreamResponse
	if err := json.Unmarshal(b, &sr); err != nil {
		return nil, fmt.Errorf("%w: the notification is not an A2A stream response: %v", ErrBadRequest, err)
	}
	if sr.Event == nil {
		return nil, fmt.Errorf("%w: the notification holds no event", ErrBadRequest)
	}
	if sr.Event.TaskInfo().TaskID == "" {
		return nil, fmt.Errorf("%w: the notification names no task", ErrBadRequest)
	}
	return sr.Event, nil
}
