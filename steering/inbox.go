package steering

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

var errNotRunning = errors.New("task has no open inbox")

// Inbox is one execution's queue of steering signals. It is safe for
// concurrent use: the interceptor delivers, the executor takes.
type Inbox struct {
	s    *Steering
	task a2a.TaskID
	// owner is the name of the user whose call started the execution:
	// only that user's signals reach it.
	owner string

	mu     sync.Mutex
	queue  []Signal
	closed bool
	seq    int64
	seen   map[string]Receipt // by message id
	// base is seq when the inbox opened: the signals this execution took
	// are numbered above it.
	base int64
	// ready has a token while the queue is not empty; done is closed by
	// Close.
	ready chan struct{}
	done  chan struct{}
	// released is closed once a2a-go has let go of the execution; nil
	// when the agent does not register ExecutorInterceptor.
	released <-chan struct{}
}

// Ready is signaled when signals are waiting; call Take.
func (in *Inbox) Ready() <-chan struct{} { return in.ready }

// Done is closed once the inbox is closed.
func (in *Inbox) Done() <-chan struct{} { return in.done }

// Take returns the waiting signals in order and empties the queue.
func (in *Inbox) Take() []Signal {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := in.queue
	in.queue = nil
	return out
}

// Next waits for the next signal, or returns ctx's error.
func (in *Inbox) Next(ctx context.Context) (Signal, error) {
	for {
		in.mu.Lock()
		if len(in.queue) > 0 {
			sig := in.queue[0]
			in.queue = slices.Delete(in.queue, 0, 1)
			if len(in.queue) > 0 {
				in.notify()
			}
			in.mu.Unlock()
			return sig, nil
		}
		in.mu.Unlock()
		select {
		case <-in.ready:
		case <-ctx.Done():
			return Signal{}, context.Cause(ctx)
		}
	}
}

// Close closes the inbox and returns the signals the executor has not
// taken: they were acknowledged to clients, so the executor must handle
// them (steers incorporated, an interrupt honoured) before it finishes.
// Signals arriving after Close are refused. Close is idempotent.
func (in *Inbox) Close() []Signal {
	in.mu.Lock()
	first := !in.closed
	if first {
		in.closed = true
		close(in.done)
	}
	out, seq, seen := in.queue, in.seq, in.seen
	in.queue = nil
	in.mu.Unlock()
	if first {
		in.s.closed(in, seq, seen)
	}
	return out
}

// notify leaves a token in ready; callers hold mu.
func (in *Inbox) notify() {
	select {
	case in.ready <- struct{}{}:
	default:
	}
}

// Interrupted is the package's Interrupted, with the inbox's last signal
// number under SeqKey and the receipts of its latest signals under
// SeenKey: stored with the task, they let the execution that resumes the
// task number on, and know a retry of one of those signals, even once the
// agent has forgotten this inbox (Config.Remember) or restarted.
func (in *Inbox) Interrupted(ec a2a.TaskInfoProvider, text string) *a2a.TaskStatusUpdateEvent {
	ev := Interrupted(ec, text)
	in.mu.Lock()
	ev.Metadata[SeqKey] = in.seq
	ev.Metadata[SeenKey] = storedReceipts(in.seen)
	in.mu.Unlock()
	return ev
}

// deliver queues a signal, or acknowledges a message id seen before
// without queueing it again. A nil or closed inbox refuses.
func (in *Inbox) deliver(c Control, m *a2a.Message) (Receipt, error) {
	if in == nil {
		return Receipt{}, errNotRunning
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if r, ok := in.seen[m.ID]; ok && m.ID != "" {
		r.Duplicate = true
		return r, nil
	}
	if in.closed {
		return Receipt{}, a2a.NewError(a2a.ErrUnsupportedOperation,
			fmt.Sprintf("task %s is finishing: the %s was not delivered", in.task, c))
	}
	in.seq++
	ref, _ := m.Metadata[ReferenceKey].(string)
	in.queue = append(in.queue, Signal{Control: c, Message: m, Seq: in.seq, ReferenceMessageID: ref})
	r := Receipt{Control: c, MessageID: m.ID, Seq: in.seq, ReferenceMessageID: ref}
	if m.ID != "" {
		in.seen[m.ID] = r
	}
	in.notify()
	return r, nil
}
