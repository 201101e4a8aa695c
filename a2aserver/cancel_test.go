package a2aserver

import (
	"context"
	"errors"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/eventqueue"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// parkingExecutor works until released, then parks its task waiting for
// input, as an interrupted task does. Its first Cancel arrives while the
// execution runs and answers only once a2a-go has let go of that
// execution: exactly the moment a cancel meets an execution that ended.
type parkingExecutor struct {
	release  chan struct{}
	mu       sync.Mutex
	execDone <-chan struct{} // the running execution's context
	cancels  int
}

func (x *parkingExecutor) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	x.mu.Lock()
	x.execDone = ctx.Done()
	x.mu.Unlock()
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		<-x.release
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, nil), nil)
	}
}

func (x *parkingExecutor) Cancel(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	x.mu.Lock()
	x.cancels++
	first, done := x.cancels == 1, x.execDone
	x.mu.Unlock()
	return func(yield func(a2a.Event, error) bool) {
		if first {
			close(x.release)
			<-done
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// TestCancelRetry_CancelMeetingAnEndingExecution: a2a-go v2.4.0 fails a
// cancel that it sent down a running execution's queue when the
// execution ends first (the queue closed, or the task parked). orchd's
// handler asks again and the task is canceled; a2a-go's own handler, for
// comparison, fails.
func TestCancelRetry_CancelMeetingAnEndingExecution(t *testing.T) {
	t.Parallel()
	for _, retry := range []bool{false, true} {
		t.Run(map[bool]string{false: "a2a-go alone", true: "with cancelRetry"}[retry], func(t *testing.T) {
			t.Parallel()
			x := &parkingExecutor{release: make(chan struct{})}
			h := a2asrv.NewHandler(x, a2asrv.WithTaskStore(taskstore.NewInMemory(nil)))
			if retry {
				var err error
				if h, err = withCancelRetry(h); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			var task a2a.TaskID
			for ev, err := range h.SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go"))}) {
				if err != nil {
					t.Fatal(err)
				}
				if st, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && st.Status.State == a2a.TaskStateWorking {
					task = st.TaskID
					break
				}
			}
			if task == "" {
				t.Fatal("the task never reached WORKING")
			}
			got, err := h.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task})
			if !retry {
				// Closed queue, or the parked task "not cancelable":
				// which of the two depends on a2a-go's timing.
				if !errors.Is(err, eventqueue.ErrQueueClosed) && !errors.Is(err, a2a.ErrTaskNotCancelable) {
					t.Fatalf("a2a-go alone: CancelTask = %v, %v; want the failure this test sets up", got, err)
				}
				return
			}
			if err != nil || got.Status.State != a2a.TaskStateCanceled {
				t.Fatalf("CancelTask = %v, %v; want the task CANCELED", got, err)
			}
		})
	}
}
