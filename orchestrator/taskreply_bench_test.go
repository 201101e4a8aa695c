package orchestrator

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testwait"
)

// taskReplyKinds are the skills of the agents that answer with a Task: an
// agent's skill is its kind.
var taskReplyKinds = []string{"completed", "quick"}

// taskReplyExec is an agent that does not stream and answers every message
// with a Task holding one artifact: completed answers with the Task
// already COMPLETED; quick creates it SUBMITTED, then adds the artifact
// and completes it at once, so a caller that asked for an immediate
// answer learns the end later.
type taskReplyExec struct{ kind string }

func (x taskReplyExec) Execute(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		done := a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done"))
		if x.kind == "completed" {
			task := a2a.NewSubmittedTask(ec, ec.Message)
			task.Artifacts = []*a2a.Artifact{{ID: "result", Parts: a2a.ContentParts{a2a.NewTextPart("pong")}}}
			task.Status = a2a.TaskStatus{State: a2a.TaskStateCompleted, Message: done}
			yield(task, nil)
			return
		}
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) ||
			!yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("pong")), nil) {
			return
		}
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, done), nil)
	}
}

func (taskReplyExec) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// taskReplyAgentsProcess is the body of the agent process
// BenchmarkTaskReply starts. It serves one agent per kind, on the
// addresses args in taskReplyKinds' order, until its standard input
// closes, which it does when the benchmark ends.
func taskReplyAgentsProcess(args []string) int {
	if len(args) != len(taskReplyKinds) {
		return helperFailed(fmt.Errorf("task-reply-agents: want %d addresses, got %q", len(taskReplyKinds), args))
	}
	for i, addr := range args {
		kind := taskReplyKinds[i]
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return helperFailed(err)
		}
		go func() {
			_ = http.Serve(ln, agentHandler("http://"+addr, "Task "+kind, kind, taskReplyExec{kind: kind}))
		}()
	}
	untilStdinCloses()
	return 0
}

// freeAddrs returns n free loopback addresses.
func freeAddrs(b *testing.B, n int) []string {
	b.Helper()
	addrs := make([]string, n)
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		addrs[i] = ln.Addr().String()
		ln.Close()
	}
	return addrs
}

// startProcess runs the helper with args in its own process until the
// benchmark ends, and waits until ready answers true (failing after 30
// seconds). The process's standard input closes when the benchmark ends;
// its standard error goes to errs.
func startProcess(b *testing.B, helper string, args []string, errs io.Writer, ready func() bool) {
	b.Helper()
	cmd := helpers.Command(b, helper, args...)
	cmd.Stderr = errs
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	})
	testwait.Until(b, 30*time.Second, helper+" ready", ready)
}

// taskReplyDaemon runs orchd in its own process as `orchd serve` runs: on
// its embedded defaults (default pollInterval, the embedded store in a
// state directory, text logs at info level, here into a pipe the
// benchmark drains), with the agents at urls registered by kind. It
// returns orchd's URL.
func taskReplyDaemon(b *testing.B, urls []string) string {
	b.Helper()
	addr := freeAddrs(b, 1)[0]
	var yaml strings.Builder
	fmt.Fprintf(&yaml, "listen: %s\nstateDir: %s\nagents:\n", addr, b.TempDir())
	for i, u := range urls {
		fmt.Fprintf(&yaml, "  - {id: %s, url: %s}\n", taskReplyKinds[i], u)
	}
	cfg := filepath.Join(b.TempDir(), "orchd.yaml")
	if err := os.WriteFile(cfg, []byte(yaml.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	base := "http://" + addr
	startProcess(b, "daemon", []string{cfg}, drain(b), func() bool {
		var page httpapi.AgentList
		return callNoFail(base+"/v1/agents", &page) == 200 && len(page.Agents) == len(urls)
	})
	return base
}

// drain returns a pipe whose reader is read to the end and dropped.
func drain(b *testing.B) io.Writer {
	b.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	go func() { _, _ = io.Copy(io.Discard, r); r.Close() }()
	b.Cleanup(func() { w.Close() })
	return w
}

// taskCall sends one message asking for kind's agent and checks the
// answer: the Task COMPLETED with its artifact, whoever answers.
func taskCall(ctx context.Context, c *a2aclient.Client, kind string) error {
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("ping"))
	msg.Metadata = map[string]any{a2aserver.SkillMetadataKey: kind}
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		return err
	}
	task, ok := res.(*a2a.Task)
	switch {
	case !ok:
		return fmt.Errorf("answer is a %T, want a Task", res)
	case task.Status.State != a2a.TaskStateCompleted:
		return fmt.Errorf("task is %s, want COMPLETED", task.Status.State)
	case len(task.Artifacts) != 1:
		return fmt.Errorf("task has %d artifacts, want 1", len(task.Artifacts))
	}
	return nil
}

// apiCall delegates through the HTTP API as `orchd delegate` does: POST
// /v1/delegations, then the delegation's events until its stream ends.
// The delegation must end COMPLETED after an artifact event.
func apiCall(ctx context.Context, hc *http.Client, base, kind string) error {
	body := fmt.Sprintf(`{"text": "ping", "skill": %q}`, kind)
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/v1/delegations", strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	var rec delegation.Record
	err = json.NewDecoder(resp.Body).Decode(&rec)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("POST /v1/delegations: HTTP %d, %v", resp.StatusCode, err)
	}
	req, err = http.NewRequestWithContext(ctx, "GET", base+"/v1/delegations/"+rec.ID+"/events", nil)
	if err != nil {
		return err
	}
	resp, err = hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var kinds []string
	var last delegation.Event
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if err := json.Unmarshal(data, &last); err != nil {
			return fmt.Errorf("event stream: %w", err)
		}
		kinds = append(kinds, last.Kind)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if last.State != a2a.TaskStateCompleted || !slices.Contains(kinds, "artifact") {
		return fmt.Errorf("delegation %s: events %v, last %s; want an artifact and COMPLETED", rec.ID, kinds, last.State)
	}
	return nil
}

// BenchmarkTaskReply measures a hop to agents that do not stream and
// answer with a Task, as users run them: the agents, orchd and the client
// each in their own process. orchd runs on its embedded defaults (the
// default pollInterval, the embedded store, its text logs). For each kind
// of agent (completed: the Task is COMPLETED in the first answer; quick:
// the first answer is SUBMITTED and the Task completes a moment later) it
// compares, in the same run, a direct a2a-go SendMessage to the agent, the
// same call to orchd over A2A, and a delegation through orchd's HTTP API
// followed to its end. Every answer is checked: COMPLETED, with the
// agent's artifact.
//
//	go test ./orchestrator -run '^$' -bench TaskReply -benchtime 1000x
//
// Each sub-benchmark runs one call at a time after 20 unmeasured calls and
// reports p50, p99, the share of calls over 100 ms, and, through orchd,
// p50 and p99 as multiples of the direct call's.
func BenchmarkTaskReply(b *testing.B) {
	addrs := freeAddrs(b, len(taskReplyKinds))
	urls := make([]string, len(addrs))
	for i, a := range addrs {
		urls[i] = "http://" + a
	}
	startProcess(b, "task-reply-agents", addrs, drain(b), func() bool {
		for _, u := range urls {
			var card map[string]any
			if callNoFail(u+a2asrv.WellKnownAgentCardPath, &card) != 200 {
				return false
			}
		}
		return true
	})
	base := taskReplyDaemon(b, urls)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	b.Cleanup(hc.CloseIdleConnections)
	viaOrchd := benchClient(b, base, nil)

	for i, kind := range taskReplyKinds {
		direct := benchClient(b, urls[i], nil)
		var p50, p99 time.Duration // the direct call's
		for _, path := range []struct {
			name string
			call func(context.Context) error
		}{
			{"direct", func(ctx context.Context) error { return taskCall(ctx, direct, kind) }},
			{"orchd-a2a", func(ctx context.Context) error { return taskCall(ctx, viaOrchd, kind) }},
			{"orchd-api", func(ctx context.Context) error { return apiCall(ctx, hc, base, kind) }},
		} {
			b.Run(kind+"/"+path.name, func(b *testing.B) {
				one := func() (time.Duration, error) {
					ctx, cancel := context.WithTimeout(b.Context(), 30*time.Second)
					defer cancel()
					start := time.Now()
					err := path.call(ctx)
					return time.Since(start), err
				}
				for range 20 {
					if _, err := one(); err != nil {
						b.Fatal(err)
					}
				}
				lat := make([]time.Duration, 0, b.N)
				for b.Loop() {
					took, err := one()
					if err != nil {
						b.Fatal(err)
					}
					lat = append(lat, took)
				}
				slices.Sort(lat)
				slow := len(lat) - sortedIndex(lat, 100*time.Millisecond)
				b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
				b.ReportMetric(100*float64(slow)/float64(len(lat)), "%>100ms")
				if path.name == "direct" {
					p50, p99 = lat[len(lat)/2], lat[len(lat)*99/100]
					return
				}
				if p50 > 0 {
					b.ReportMetric(float64(lat[len(lat)/2])/float64(p50), "p50-x-direct")
					b.ReportMetric(float64(lat[len(lat)*99/100])/float64(p99), "p99-x-direct")
				}
			})
		}
	}
}

// sortedIndex is the index of the first latency in sorted lat at or over
// limit.
func sortedIndex(lat []time.Duration, limit time.Duration) int {
	i, _ := slices.BinarySearch(lat, limit)
	return i
}
