package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
)

// doneAtOnce answers with a Task already COMPLETED that holds an artifact.
func doneAtOnce(_ context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
	task := a2a.NewSubmittedTask(ec, ec.Message)
	task.Artifacts = []*a2a.Artifact{{ID: "report", Parts: a2a.ContentParts{a2a.NewTextPart("the whole report")}}}
	task.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done"))}
	yield(task, nil)
}

// TestDelegate_PolledAgentsArtifacts checks that `orchd delegate` prints
// the artifacts of agents that do not stream (orchd polls their tasks), as
// it does a streaming agent's, before the state they end in.
func TestDelegate_PolledAgentsArtifacts(t *testing.T) {
	t.Parallel()
	work := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work"}, testagent.Work(30*time.Millisecond))
	done := testagent.Start(t, testagent.Options{Name: "Done", Skill: "done"}, doneAtOnce)
	base := daemon(t, registry.Spec{ID: "worker", URL: work.URL}, registry.Spec{ID: "done", URL: done.URL})
	for _, tc := range []struct {
		skill    string
		artifact *regexp.Regexp
	}{
		// A poll may find the artifact whole, or its first chunk and then
		// the second, appended.
		{"work", regexp.MustCompile(`(?m)^\[\d+\] artifact \S+: part one, (part two|\n\[\d+\] artifact \S+ \(continued\): part two)$`)},
		{"done", regexp.MustCompile(`(?m)^\[\d+\] artifact report: the whole report$`)},
	} {
		t.Run(tc.skill, func(t *testing.T) {
			code, out, errOut := orchd(t, t.Context(), "delegate", "--server", base, "--skill", tc.skill, "write it up")
			art := tc.artifact.FindStringIndex(out)
			end := strings.Index(out, "] completed: done")
			if code != 0 || art == nil || end < art[1] {
				t.Errorf("delegate: exit %d, want the artifact line and then completed:\n%s%s", code, out, errOut)
			}
		})
	}
	for _, a := range []*testagent.Agent{work, done} {
		for _, m := range a.Calls() {
			if m == "SendStreamingMessage" {
				t.Errorf("agent %s was streamed to: %v", a.URL, a.Calls())
			}
		}
	}
}
