package fleet

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/steering"
)

// stepper is long-running work: a fixed number of steps, one every
// `every`, each reported in a "progress" artifact that replaces the last,
// so a client reading the task sees where the work is. The artifact's
// metadata keeps the step and the directions followed, so work resumed
// after an interrupt goes on where it stopped.
//
// With steering (the steerable agent) it takes signals from its inbox
// between steps: a steer becomes a direction it follows from then on, and
// its next output says so; an interrupt stops it, waiting for input, and
// the input that resumes it is one more direction. Without steering (the
// plain agent) it just works; orchd refuses steers before they reach it.
type stepper struct {
	log *slog.Logger
	// st is the agent's steering; nil for an agent that declares none.
	st     *steering.Steering
	steps  int
	every  time.Duration
	result string // the name of the artifact the work ends with
}

// progress is how far the work got: steps done and directions followed.
type progress struct {
	step      int
	following []string
}

// maxDirections bounds the directions followed, the oldest going first,
// and maxDirectionRunes each one's length.
const (
	maxDirections     = 8
	maxDirectionRunes = 200
)

// follow adds a direction to follow.
func (p *progress) follow(direction string) {
	if r := []rune(direction); len(r) > maxDirectionRunes {
		direction = string(r[:maxDirectionRunes]) + "…"
	}
	p.following = append(p.following, direction)
	if n := len(p.following); n > maxDirections {
		p.following = p.following[n-maxDirections:]
	}
}

func (s stepper) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		topic := topicOf(ec)
		var inbox *steering.Inbox
		var ready <-chan struct{}
		if s.st != nil {
			// Open before the first event, Close before the last: a
			// signal is accepted only while the inbox is open.
			inbox = s.st.Open(ec)
			defer inbox.Close()
			ready = inbox.Ready()
		}
		p := progressOf(ec.StoredTask)
		if ec.StoredTask == nil {
			s.log.Info("starting", "task", ec.TaskID, "topic", topic, "steps", s.steps)
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) ||
				!yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, say(ec, "working on %q in %d steps", topic, s.steps)), nil) {
				return
			}
		} else {
			// The input that answers an interrupt is a direction too.
			answer := textOf(ec.Message)
			p.follow(answer)
			s.log.Info("resuming", "task", ec.TaskID, "step", p.step, "input", answer)
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, say(ec, "resuming at step %d of %d with %q", p.step+1, s.steps, answer)), nil) {
				return
			}
		}
		tick := time.NewTicker(s.every)
		defer tick.Stop()
		for p.step < s.steps {
			select {
			case <-ctx.Done():
				s.log.Info("stopped", "task", ec.TaskID, "step", p.step)
				return
			case <-tick.C:
				p.step++
				if !yield(p.event(ec, fmt.Sprintf("step %d of %d on %q", p.step, s.steps, topic)), nil) {
					return
				}
			case <-ready:
				if !s.take(ec, inbox.Take(), inbox, &p, yield) {
					return
				}
			}
		}
		// Signals acknowledged while the last step ended are honoured
		// too: steers are followed, an interrupt stops the work.
		if inbox != nil && !s.take(ec, inbox.Close(), inbox, &p, yield) {
			return
		}
		s.log.Info("done", "task", ec.TaskID, "following", p.following)
		done := a2a.NewArtifactEvent(ec, a2a.NewTextPart(fmt.Sprintf("%s on %q after %d steps%s", s.result, topic, s.steps, p.suffix())))
		done.Artifact.ID, done.Artifact.Name = a2a.ArtifactID(s.result), s.result
		if yield(done, nil) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, say(ec, "%s ready", s.result)), nil)
		}
	}
}

// take handles the signals from the inbox in order. It reports whether
// the work goes on: false after an interrupt (the task now waits for
// input) or when the client went away.
func (s stepper) take(ec *a2asrv.ExecutorContext, sigs []steering.Signal, inbox *steering.Inbox, p *progress, yield func(a2a.Event, error) bool) bool {
	for i, sig := range sigs {
		if sig.Control == steering.Interrupt {
			// Stop taking signals; steers that came with or after the
			// interrupt were acknowledged, so they are kept as
			// directions for when the work resumes.
			for _, late := range append(sigs[i+1:], inbox.Close()...) {
				if late.Control == steering.Steer {
					p.follow(textOf(late.Message))
				}
			}
			s.log.Info("interrupted; waiting for input", "task", ec.TaskID, "seq", sig.Seq, "step", p.step)
			if !yield(p.event(ec, fmt.Sprintf("interrupted at step %d of %d", p.step, s.steps)), nil) {
				return false
			}
			yield(inbox.Interrupted(ec, fmt.Sprintf("stopped at step %d of %d; send input to go on", p.step, s.steps)), nil)
			return false
		}
		steer := textOf(sig.Message)
		p.follow(steer)
		s.log.Info("took a steer", "task", ec.TaskID, "seq", sig.Seq, "steer", steer, "step", p.step)
		// Acknowledged makes the steer the task's status message; the
		// progress says the work follows it now.
		if !yield(steering.Acknowledged(ec, sig), nil) ||
			!yield(p.event(ec, fmt.Sprintf("took steer %d at step %d of %d", sig.Seq, p.step, s.steps)), nil) {
			return false
		}
	}
	return true
}

// event is the progress artifact saying what, with the directions
// followed; it replaces the previous one.
func (p progress) event(ec *a2asrv.ExecutorContext, what string) *a2a.TaskArtifactUpdateEvent {
	ev := a2a.NewArtifactUpdateEvent(ec, "progress", a2a.NewTextPart(what+p.suffix()))
	ev.Append = false
	following := make([]any, len(p.following))
	for i, f := range p.following {
		following[i] = f
	}
	ev.Artifact.Name = "progress"
	ev.Artifact.Metadata = map[string]any{"step": p.step, "following": following}
	return ev
}

// suffix lists the directions followed.
func (p progress) suffix() string {
	if len(p.following) == 0 {
		return ""
	}
	quoted := make([]string, len(p.following))
	for i, f := range p.following {
		quoted[i] = fmt.Sprintf("%q", f)
	}
	return "; following " + strings.Join(quoted, ", ")
}

// progressOf reads the progress a task's artifact kept.
func progressOf(t *a2a.Task) progress {
	var p progress
	if t == nil {
		return p
	}
	for _, a := range t.Artifacts {
		if a.ID != "progress" {
			continue
		}
		switch n := a.Metadata["step"].(type) {
		case int:
			p.step = n
		case float64: // a store that keeps JSON
			p.step = int(n)
		}
		if fs, ok := a.Metadata["following"].([]any); ok {
			for _, f := range fs {
				if s, ok := f.(string); ok {
					p.follow(s)
				}
			}
		}
	}
	return p
}

func (stepper) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return cancel(ec)
}
