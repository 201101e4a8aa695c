package delegation

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/registry"
)

// Following the task of an agent that accepted the work.
//
// How is chosen once, as the work is sent (chooseFollow), and kept in the
// record's Progress, so a process carrying the delegation on follows it
// the same way: by the agent's push notifications (push.go), on the stream
// the agent answered with (stream.go), or by polling the task (poll.go).
// A follower reads the stream and polls once the stream ends before the
// task settles. Every way reads the task with getTask; stop ends the one
// that runs.

// Ways of following a task, as Config.Follow names them.
const (
	// FollowAuto streams when the agent streams, else pushes when the
	// agent declares push notifications and the webhook is one it can
	// reach, else polls.
	FollowAuto = "auto"
	// FollowPush asks for push notifications.
	FollowPush = "push"
	// FollowStream asks for a stream.
	FollowStream = "stream"
	// FollowPoll polls the task, whatever the agent offers.
	FollowPoll = "poll"
)

// ValidFollow reports whether s is a value Config.Follow takes ("" is
// FollowAuto).
func ValidFollow(s string) bool {
	switch s {
	case "", FollowAuto, FollowPush, FollowStream, FollowPoll:
		return true
	}
	return false
}

// chooseFollow decides once, as the work is sent, how the hop is followed,
// and records it in the delegation's Progress.
func (d *Delegation) chooseFollow(a *registry.Agent, card *a2a.AgentCard) {
	e := d.engine
	streams := card.Capabilities.Streaming
	pushes := card.Capabilities.PushNotifications && reachable(e.pushURL(), card)
	mode := FollowPoll
	// A stream brings each change as it happens; push costs a read of
	// the task per notification, so it is chosen over a stream only when
	// asked for (to hold no connection per delegation).
	switch want := e.cfg.Follow; {
	case want == FollowPoll:
	case want == FollowPush && pushes:
		mode = FollowPush
	case streams:
		mode = FollowStream
	case pushes:
		mode = FollowPush
	}
	if e.cfg.Follow == FollowPush && mode != FollowPush {
		e.log.Info("agent cannot be followed by push; following it another way", "agent", a.ID, "follow", mode,
			"declaresPush", card.Capabilities.PushNotifications, "webhook", e.pushURL() != "")
	}
	d.prog.Follow, d.prog.Streaming = mode, mode == FollowStream
}

// follower follows a delegation's downstream task until it settles or
// following stops: on the rest of the task's stream, when there is one,
// read by the stream's own goroutine (agentStream), then by polling,
// should the stream end first.
type follower struct {
	d      *Delegation
	ctx    context.Context // ends when following stops
	cancel context.CancelFunc
	done   chan struct{} // closed once the follower is done
	// quiet watches the stream for silence, and unabort unties the
	// stream from ctx; both are set by watch.
	quiet   *silence
	unabort func() bool
	// settled is set when the task settled on the stream.
	settled bool
}

// watch starts watching the stream st for silence and ties it to the
// follower: it is closed when following stops, even while the stream's
// goroutine waits on it.
func (f *follower) watch(st *agentStream) {
	f.unabort = context.AfterFunc(f.ctx, st.cancel)
	f.quiet = f.d.watchSilence(f.ctx, f.cancel)
}

// event applies one element of the stream; false once the stream is done
// with: the task settled, or the stream broke.
func (f *follower) event(ev a2a.Event, err error) bool {
	if err != nil {
		f.quiet.stop() // the follower polls now
		if f.ctx.Err() == nil {
			f.d.engine.log.Warn("stream from agent broke; polling the task instead", "delegation", f.d.rec.ID, "error", err)
		}
		return false
	}
	f.quiet.heard()
	if f.d.apply(ev) {
		f.settled = true
		return false
	}
	return true
}

// streamEnded ends the watch of the stream st, and st.
func (f *follower) streamEnded(st *agentStream) {
	f.quiet.stop()
	f.unabort()
	st.cancel()
}

// finish polls the task unless it settled on the stream, hands on a
// delegation that settled, and ends following.
func (f *follower) finish() {
	if f.settled || f.d.poll(f.ctx) {
		f.d.settled()
	}
	f.cancel()
	close(f.done)
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
	e.instruments.called(ctx, d.rec.Downstream.Agent, "GetTask", start, err)
	if errors.Is(err, ErrAnswerTooLarge) {
		// Reading it again would bring the same: every path that reads
		// the task (a poll, a push notification, a resume) gives it up.
		d.mu.Lock()
		if !d.rec.State.Terminal() {
			d.overLimitLocked(fmt.Sprintf("its task is larger than orchd reads: %v", err))
		}
		d.mu.Unlock()
	}
	return task, err
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
