package fleet

import (
	"context"
	"fmt"
	"iter"
	"log/slog"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// asker needs input before it can work. Its first execution creates the
// task and ends it INPUT_REQUIRED with a question; the client's answer is
// a new message to the same task, which a2a-go hands to a new execution
// with the stored task (StoredTask set), and the agent finishes with it.
type asker struct {
	log *slog.Logger
}

func (a asker) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		topic := topicOf(ec)
		if ec.StoredTask == nil {
			a.log.Info("asking which year", "task", ec.TaskID, "topic", topic)
			if yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateInputRequired, say(ec, "which year should the summary of %q cover?", topic)), nil)
			}
			return
		}
		year := textOf(ec.Message)
		a.log.Info("answered; summarizing", "task", ec.TaskID, "topic", topic, "year", year)
		if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, say(ec, "summarizing %q for %s", topic, year)), nil) ||
			!sleep(ctx, reportPace) {
			return
		}
		summary := a2a.NewArtifactEvent(ec, a2a.NewTextPart(fmt.Sprintf("summary of %q for %s", topic, year)))
		summary.Artifact.ID, summary.Artifact.Name = "summary", "summary"
		if yield(summary, nil) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, say(ec, "summary ready")), nil)
		}
	}
}

func (asker) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return cancel(ec)
}
