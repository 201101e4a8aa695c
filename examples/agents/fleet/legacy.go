package fleet

import (
	"context"
	"fmt"
	"iter"
	"log/slog"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// legacy answers at once. Its executor is an ordinary a2a-go v2 one: what
// makes the agent A2A 0.3 is how it is served (a2av0's JSON-RPC handler
// and a 0.3 card; see Fleet.handler), so orchd talks 0.3 to it.
type legacy struct {
	log *slog.Logger
}

func (l legacy) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		text := textOf(ec.Message)
		l.log.Info("answering over A2A 0.3", "task", ec.TaskID, "text", text)
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		answer := a2a.NewArtifactEvent(ec, a2a.NewTextPart(fmt.Sprintf("legacy agent (A2A 0.3) got %q", text)))
		answer.Artifact.ID, answer.Artifact.Name = "answer", "answer"
		if yield(answer, nil) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, say(ec, "answered over A2A 0.3")), nil)
		}
	}
}

func (legacy) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return cancel(ec)
}
