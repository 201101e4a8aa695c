package delegation

import (
	"context"
	"iter"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// session is an accepted send: the first event, and the rest of the
// stream when the agent streams.
type session struct {
	first a2a.Event
	// stream is the agent's stream after first; nil when the agent
	// answered unary.
	stream *agentStream
}

// drop closes the session's stream, if any, unread.
func (s *session) drop() {
	if s.stream != nil {
		s.stream.drop()
	}
}

// agentStream is an agent's event stream (SendStreamingMessage,
// SubscribeToTask) read by one goroutine the engine owns. The goroutine
// hands the stream's first event to whoever opened it, and then, once the
// delegation is followed (carry), applies the rest itself as the
// delegation's follower, polling the task should the stream break.
//
// Why: with a pull iterator (iter.Pull2) the stream was read on a
// coroutine of its own while a follower goroutine waited on it: two
// goroutines per streamed delegation where one does, about 5 KiB more for each
// delegation in flight (BenchmarkInFlight, docs/benchmarks.md).
type agentStream struct {
	ctx    context.Context    // the stream's: ending it ends the stream
	cancel context.CancelFunc // ends ctx
	first  chan streamItem    // the stream's first event, or why there is none
	plan   chan *follower     // the follower the reader carries on as
	gone   chan struct{}      // closed when the reader returns
}

// streamItem is one element of a stream; ok is false when the stream
// ended before it.
type streamItem struct {
	ev  a2a.Event
	err error
	ok  bool
}

// openStream reads seq, a stream whose context is ctx (cancel ends it),
// on a goroutine the engine owns, and waits for its first element: the
// stream and its first event. ok is false when the stream ended before
// its first element; err is the stream's first element when that is an
// error, or ErrClosed when the engine is closed. Unless it returns a
// first event, the stream is closed.
func (e *Engine) openStream(ctx context.Context, cancel context.CancelFunc, seq iter.Seq2[a2a.Event, error]) (st *agentStream, first a2a.Event, ok bool, err error) {
	if !e.track() {
		cancel()
		return nil, nil, true, ErrClosed
	}
	st = &agentStream{ctx: ctx, cancel: cancel, first: make(chan streamItem, 1), plan: make(chan *follower), gone: make(chan struct{})}
	go st.read(e, seq)
	it := <-st.first
	if !it.ok || it.err != nil {
		cancel()
	}
	return st, it.ev, it.ok, it.err
}

// read is the stream's goroutine: it hands the first element over, waits
// to be told to carry on (or the stream to end), and then follows the
// delegation on the rest of the stream.
func (st *agentStream) read(e *Engine, seq iter.Seq2[a2a.Event, error]) {
	defer e.wg.Done()
	defer close(st.gone)
	var f *follower
	for ev, err := range seq {
		if f == nil {
			st.first <- streamItem{ev: ev, err: err, ok: true}
			if err != nil {
				return
			}
			select {
			case f = <-st.plan:
			case <-st.ctx.Done(): // dropped, or the engine closed
				return
			}
			f.watch(st)
			continue
		}
		// Applying an event is deep, and the wait for the next one is
		// not: the work runs on a stack of its own (ownstack).
		more := false
		e.stacks.Run(func() { more = f.event(ev, err) })
		if !more {
			break
		}
	}
	if f == nil {
		st.first <- streamItem{} // the stream ended before its first event
		return
	}
	f.streamEnded(st)
	f.finish()
}

// carry makes the stream's goroutine follow the delegation as f, on the
// rest of the stream; false when the stream was closed meanwhile (the
// engine closed), and nothing follows.
func (st *agentStream) carry(f *follower) bool {
	select {
	case st.plan <- f:
		return true
	case <-st.gone:
		return false
	}
}

// drop closes a stream nobody carries on.
func (st *agentStream) drop() { st.cancel() }
