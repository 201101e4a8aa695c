package steering_test

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/steering"
)

// TestExecutions_ReleasedFollowsTheTaskExecution: Released is the end of
// the context of the task's current execution, until it ends; a
// cancelation is no execution; and the end of an execution does not
// forget the next one, noted before it.
func TestExecutions_ReleasedFollowsTheTaskExecution(t *testing.T) {
	t.Parallel()
	e := steering.NewExecutions()
	if r := e.Released("t1"); r != nil {
		t.Fatal("Released of a task never executed is not nil")
	}
	work := &a2asrv.ExecutorContext{TaskID: "t1", Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("work"))}
	first, endFirst := context.WithCancel(t.Context())
	defer endFirst()
	if _, err := e.Intercept(first, work); err != nil {
		t.Fatal(err)
	}
	if r := e.Released("t1"); r != first.Done() {
		t.Fatal("Released is not the end of the running execution's context")
	}

	cancel, endCancel := context.WithCancel(t.Context())
	defer endCancel()
	if _, err := e.Intercept(cancel, &a2asrv.ExecutorContext{TaskID: "t2"}); err != nil {
		t.Fatal(err)
	}
	if r := e.Released("t2"); r != nil {
		t.Error("a cancelation (no message) was noted as an execution")
	}

	// The task's next execution starts before the first one's context
	// ends, as a message resuming it right after an interrupt does.
	second, endSecond := context.WithCancel(t.Context())
	defer endSecond()
	if _, err := e.Intercept(second, work); err != nil {
		t.Fatal(err)
	}
	endFirst()
	// The first context's end is noted on a goroutine of its own: give it
	// time to (wrongly) forget the second.
	time.Sleep(50 * time.Millisecond)
	if r := e.Released("t1"); r != second.Done() {
		t.Fatal("the end of the first execution forgot the second")
	}
	endSecond()
	testwait.Until(t, 10*time.Second, "the ended execution forgotten", func() bool { return e.Released("t1") == nil })
}
