package fleet

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"go.uber.org/goleak"

	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/steering"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// start runs the fleet on free ports until the test ends and returns its
// agents by id.
func start(t *testing.T) map[string]Agent {
	t.Helper()
	f, err := Start(t.Context(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	agents := map[string]Agent{}
	for _, a := range f.Agents() {
		agents[a.ID] = a
	}
	return agents
}

// client is an a2a-go client of the agent, built from its card, for A2A
// 1.0 and 0.3 alike.
func client(t *testing.T, a Agent) (*a2aclient.Client, *a2a.AgentCard) {
	t.Helper()
	card, err := (&agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}).Resolve(t.Context(), a.URL)
	if err != nil {
		t.Fatalf("card of %s: %v", a.ID, err)
	}
	c, err := a2aclient.NewFromCard(t.Context(), card, a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{}))
	if err != nil {
		t.Fatalf("client of %s: %v", a.ID, err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c, card
}

func send(t *testing.T, c *a2aclient.Client, msg *a2a.Message) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatal(err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("answer %T, want a task", res)
	}
	return task
}

func artifactText(task *a2a.Task, id a2a.ArtifactID) string {
	for _, a := range task.Artifacts {
		if a.ID == id {
			return textOf(&a2a.Message{Parts: a.Parts})
		}
	}
	return ""
}

// Every agent serves a card with its skill, the version it speaks and,
// for steerable alone, the steering extension.
func TestStart_Cards(t *testing.T) {
	agents := start(t)
	for _, tc := range []struct {
		id, skill, version string
		steering           bool
	}{
		{"report", "report", "1.0", false},
		{"steerable", "research", "1.0", true},
		{"asker", "summary", "1.0", false},
		{"legacy", "legacy", "0.3", false},
		{"plain", "draft", "1.0", false},
	} {
		t.Run(tc.id, func(t *testing.T) {
			a, ok := agents[tc.id]
			if !ok || a.Skill != tc.skill || a.Description == "" || !strings.HasPrefix(a.URL, "http://127.0.0.1:") {
				t.Fatalf("agent %q: %+v", tc.id, a)
			}
			_, card := client(t, a)
			if len(card.Skills) != 1 || card.Skills[0].ID != tc.skill {
				t.Errorf("skills %+v, want %s", card.Skills, tc.skill)
			}
			if v := card.SupportedInterfaces[0].ProtocolVersion; string(v) != tc.version {
				t.Errorf("speaks %s, want %s", v, tc.version)
			}
			declared := false
			for _, ext := range card.Capabilities.Extensions {
				declared = declared || ext.URI == steering.URI
			}
			if declared != tc.steering {
				t.Errorf("declares steering: %v, want %v", declared, tc.steering)
			}
		})
	}
}

// The report streams four sections into one artifact and completes.
func TestReport_Streams(t *testing.T) {
	if testing.Short() {
		t.Skip("streams a report for about 2 s")
	}
	c, _ := client(t, start(t)["report"])
	var statuses, chunks int
	var last a2a.Event
	for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("tides"))}) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *a2a.TaskStatusUpdateEvent:
			if e.Status.State == a2a.TaskStateWorking {
				statuses++
			}
		case *a2a.TaskArtifactUpdateEvent:
			if e.Artifact.ID != "report" || e.Append != (chunks > 0) || e.LastChunk != (chunks == len(reportSections)-1) {
				t.Errorf("chunk %d: %+v", chunks, e)
			}
			chunks++
		}
		last = ev
	}
	if statuses != len(reportSections) || chunks != len(reportSections) {
		t.Errorf("%d working updates and %d chunks, want %d of each", statuses, chunks, len(reportSections))
	}
	if e, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || e.Status.State != a2a.TaskStateCompleted || !strings.Contains(textOf(e.Status.Message), `"tides"`) {
		t.Errorf("last event %+v, want COMPLETED naming the topic", last)
	}
}

// The asker waits for input and finishes with it.
func TestAsker_AsksThenFinishes(t *testing.T) {
	c, _ := client(t, start(t)["asker"])
	task := send(t, c, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("the A2A spec")))
	if task.Status.State != a2a.TaskStateInputRequired || !strings.Contains(textOf(task.Status.Message), "which year") {
		t.Fatalf("first answer %s %q, want INPUT_REQUIRED asking which year", task.Status.State, textOf(task.Status.Message))
	}
	answer := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("2025"))
	task = send(t, c, answer)
	if got := artifactText(task, "summary"); task.Status.State != a2a.TaskStateCompleted || got != `summary of "the A2A spec" for 2025` {
		t.Errorf("after the answer %s, summary %q", task.Status.State, got)
	}
}

// The legacy agent answers over A2A 0.3.
func TestLegacy_Answers(t *testing.T) {
	c, _ := client(t, start(t)["legacy"])
	task := send(t, c, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hello")))
	if got := artifactText(task, "answer"); task.Status.State != a2a.TaskStateCompleted || got != `legacy agent (A2A 0.3) got "hello"` {
		t.Errorf("%s, answer %q", task.Status.State, got)
	}
}

// signal sends a steer or interrupt to the task as the steering extension
// has it: the control in the message's metadata, the extension activated.
func signal(t *testing.T, c *a2aclient.Client, task a2a.TaskInfoProvider, ctl steering.Control, text string) {
	t.Helper()
	m := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart(text))
	m.Metadata = map[string]any{steering.ControlKey: string(ctl)}
	ctx := a2aclient.AttachServiceParams(t.Context(), a2aclient.ServiceParams{a2a.SvcParamExtensions: {steering.URI}})
	if _, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: m}); err != nil {
		t.Fatalf("%s: %v", ctl, err)
	}
}

// waitTask polls the task until ok accepts it.
func waitTask(t *testing.T, c *a2aclient.Client, id a2a.TaskID, what string, ok func(*a2a.Task) bool) *a2a.Task {
	t.Helper()
	var task *a2a.Task
	testwait.Succeeds(t, 10*time.Second, "task "+what, func() error {
		var err error
		if task, err = c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id}); err != nil {
			t.Fatal(err)
		}
		if !ok(task) {
			return fmt.Errorf("it is %s, progress %q", task.Status.State, artifactText(task, "progress"))
		}
		return nil
	})
	return task
}

// The steerable agent says which steer it took, stops for an interrupt and
// resumes where it stopped, following the steer and the answer.
func TestSteerable_SteerInterruptResume(t *testing.T) {
	c, _ := client(t, start(t)["steerable"])
	req := &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("tides")), Config: &a2a.SendMessageConfig{ReturnImmediately: true}}
	res, err := c.SendMessage(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	task := res.(*a2a.Task)
	waitTask(t, c, task.ID, "working", func(t *a2a.Task) bool { return t.Status.State == a2a.TaskStateWorking })
	signal(t, c, task, steering.Steer, "only 2025")
	waitTask(t, c, task.ID, "took the steer", func(t *a2a.Task) bool {
		return artifactText(t, "progress") == `took steer 1 at step 0 of 12; following "only 2025"`
	})
	signal(t, c, task, steering.Interrupt, "")
	waitTask(t, c, task.ID, "interrupted", func(t *a2a.Task) bool {
		return t.Status.State == a2a.TaskStateInputRequired && t.Metadata[steering.InterruptedKey] == true
	})
	resume := &a2a.SendMessageRequest{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("briefly")), Config: &a2a.SendMessageConfig{ReturnImmediately: true}}
	if _, err := c.SendMessage(t.Context(), resume); err != nil {
		t.Fatal(err)
	}
	waitTask(t, c, task.ID, "resumed", func(t *a2a.Task) bool {
		return t.Status.State == a2a.TaskStateWorking && strings.Contains(textOf(t.Status.Message), `resuming at step 1 of 12 with "briefly"`)
	})
	if _, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID}); err != nil {
		t.Fatal(err)
	}
}

// Close ends running work and stops the servers; a taken port fails Start
// and leaves nothing running (TestMain checks for goroutines left over).
func TestClose_AndTakenPort(t *testing.T) {
	f, err := Start(context.Background(), Config{})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := client(t, f.Agents()[4]) // plain: long work
	req := &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x")), Config: &a2a.SendMessageConfig{ReturnImmediately: true}}
	if _, err := c.SendMessage(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	f.Close()
	f.Close()
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("Close took %s", took)
	}
	if conn, err := net.Dial("tcp", strings.TrimPrefix(f.Agents()[0].URL, "http://")); err == nil {
		conn.Close()
		t.Error("report still listens after Close")
	}

	// The taken port is the third agent's: the first two must stop again.
	ln, port := portAfterTwoFree(t)
	defer ln.Close()
	if _, err := Start(t.Context(), Config{BasePort: port - 2}); err == nil || !strings.Contains(err.Error(), "agent asker") || !strings.Contains(err.Error(), strconv.Itoa(port)) {
		t.Errorf("Start on a taken port: %v", err)
	}
}

// portAfterTwoFree listens on a port whose two predecessors are free.
func portAfterTwoFree(t *testing.T) (net.Listener, int) {
	t.Helper()
	for range 20 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		free := port > 2
		for p := port - 2; free && p < port; p++ {
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
			free = err == nil
			if free {
				l.Close()
			}
		}
		if free {
			return ln, port
		}
		ln.Close()
	}
	t.Skip("found no port with two free ones before it")
	return nil, 0
}
