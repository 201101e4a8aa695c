package fleet

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// report streams a report: it creates the task, then for each section
// says what it is writing (a WORKING status update) and adds the section
// to one artifact, chunk by chunk, the way a model's output streams. The
// last chunk is marked LastChunk, and the task completes.
type report struct {
	log *slog.Logger
}

// reportSections are the report's sections, each written in reportPace;
// the summary names the topic.
var reportSections = []struct{ title, text string }{
	{"summary", "what matters about %q, in short"},
	{"background", "where it comes from"},
	{"findings", "three things worth knowing"},
	{"next steps", "what to read next"},
}

const reportPace = 500 * time.Millisecond

func (r report) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		topic := topicOf(ec)
		r.log.Info("writing a report", "task", ec.TaskID, "topic", topic)
		if ec.StoredTask == nil && !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		for i, section := range reportSections {
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, say(ec, "writing section %d of %d: %s", i+1, len(reportSections), section.title)), nil) {
				return
			}
			if !sleep(ctx, reportPace) {
				r.log.Info("report stopped", "task", ec.TaskID)
				return
			}
			// The first chunk creates the artifact; the others append to
			// it (a2a.NewArtifactUpdateEvent sets Append).
			text := section.text
			if i == 0 {
				text = fmt.Sprintf(text, topic)
			}
			chunk := a2a.NewTextPart(section.title + ": " + text + ". ")
			ev := a2a.NewArtifactUpdateEvent(ec, "report", chunk)
			if i == 0 {
				ev.Append = false
				ev.Artifact.Name = "report"
			}
			ev.LastChunk = i == len(reportSections)-1
			if !yield(ev, nil) {
				return
			}
		}
		r.log.Info("report done", "task", ec.TaskID)
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, say(ec, "the report on %q is ready", topic)), nil)
	}
}

func (report) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return cancel(ec)
}
