package delegation

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"iter"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"

	"github.com/orchd/orchd/internal/helperproc"
)

// inUse is the memory the Go runtime holds for live objects and goroutine
// stacks, after a collection.
func inUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc + m.StackInuse
}

// BenchmarkInFlight measures orchd's memory per in-flight delegation:
// 10,000 slow tasks (they never finish) delegated at once to an agent
// running in a separate process, so only orchd's side counts: its
// delegation state, its goroutines and, for streaming agents, one open
// stream each. Agents that do not stream are polled.
//
//	go test ./delegation -run '^$' -bench InFlight -benchtime 1x
func BenchmarkInFlight(b *testing.B) {
	for _, tc := range []struct {
		name      string
		n         int
		streaming bool
	}{{"polled-10000", 10_000, false}, {"streamed-10000", 10_000, true}} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				url := agentProcess(b, "slow-agent", strconv.FormatBool(tc.streaming))
				f := newFixture(b, Config{PollInterval: time.Minute, KeepFinished: tc.n})
				f.add(b, "slow", url)
				before := inUse()
				goroutines := runtime.NumGoroutine()
				ds := delegateAll(b, f, tc.n, func() Request { return Request{Text: "wait", Skill: "slow"} })
				per := float64(inUse()-before) / float64(tc.n)
				for _, d := range ds {
					if s := d.Record().State; s.Terminal() {
						b.Fatalf("delegation %s is %s, want in flight", d.ID(), s)
					}
				}
				b.ReportMetric(per, "B/delegation")
				b.ReportMetric(per/1024, "KiB/delegation")
				b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/float64(tc.n), "goroutines/delegation")
				f.engine.Close()
			}
		})
	}
}

// helpers are the processes the benchmarks and tests start from this
// test binary (see TestMain): agents whose tasks never finish, in
// processes of their own so that only orchd's side of the work counts,
// and an engine in a process with its own open-files limit.
var helpers = helperproc.Commands{
	// slow-agent's tasks work until the process ends; it streams when its
	// argument is "true".
	"slow-agent": func(args []string) int {
		return serveForever(foreverAgent{name: "Slow", skill: "slow", streaming: len(args) > 0 && args[0] == "true"})
	},
	// push-agent's tasks never finish either; it streams and sends push
	// notifications.
	"push-agent": func([]string) int {
		return serveForever(foreverAgent{name: "Forever", skill: "forever", streaming: true, push: true})
	},
	// chatty-agent streams as many status messages as its argument says
	// on each task, then works on until the process ends.
	"chatty-agent": func(args []string) int {
		n, err := strconv.Atoi(args[0])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		return serveForever(foreverAgent{name: "Chatty", skill: "chat", streaming: true, says: n})
	},
	// out-of-files delegates to the agent at its argument with no file
	// descriptor left (limits_test.go).
	"out-of-files": outOfFilesHelper,
}

// agentProcess starts the helper agent, with args, and returns its URL.
// The process ends with the benchmark.
func agentProcess(b *testing.B, helper string, args ...string) string {
	b.Helper()
	cmd := helpers.Command(b, helper, args...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		b.Fatalf("%s process: %v", helper, err)
	}
	return strings.TrimSpace(line)
}

// foreverAgent describes an agent of forever tasks, which say says
// status messages first.
type foreverAgent struct {
	name, skill     string
	streaming, push bool
	says            int
}

// serveForever serves the agent on 127.0.0.1, prints its URL, and serves
// until stdin closes; it returns the process's exit status.
func serveForever(a foreverAgent) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	url := "http://" + ln.Addr().String()
	card := &a2a.AgentCard{Name: a.name, Description: "never finishes", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(url+"/rpc", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: a.streaming, PushNotifications: a.push},
		Skills:              []a2a.AgentSkill{{ID: a.skill, Name: a.skill, Tags: []string{}}}}
	var opts []a2asrv.RequestHandlerOption
	if a.push {
		sender := push.NewHTTPPushSender(&push.HTTPSenderConfig{Timeout: 30 * time.Second, AllowPrivateNetworks: true})
		opts = append(opts, a2asrv.WithPushNotifications(push.NewInMemoryStore(), sender))
	}
	mux := http.NewServeMux()
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(forever{says: a.says}, opts...)))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	fmt.Println(url)
	_, _ = io.Copy(io.Discard, os.Stdin)
	// The tasks it served never end: they end with the process.
	return 0
}

// forever works on every task until the process ends or the task is
// canceled, after it says says status messages of 200 bytes.
type forever struct{ says int }

func (f forever) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		for i := range f.says {
			text := fmt.Sprintf("%-200d", i)
			if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))), nil) {
				return
			}
		}
		<-ctx.Done()
	}
}

func (forever) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// delegateAll delegates n requests made by req, 64 at a time, and returns
// the delegations; it fails on the first error.
func delegateAll(b *testing.B, f *fixture, n int, req func() Request) []*Delegation {
	b.Helper()
	var mu sync.Mutex
	ds := make([]*Delegation, 0, n)
	parallel(b, n, func() error {
		d, err := f.engine.Delegate(context.Background(), req())
		if err != nil {
			return err
		}
		mu.Lock()
		ds = append(ds, d)
		mu.Unlock()
		return nil
	})
	return ds
}

// parallel runs fn n times on 64 workers and fails on the first error.
func parallel(b *testing.B, n int, fn func() error) {
	b.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	next := make(chan struct{})
	for range 64 {
		wg.Go(func() {
			for range next {
				if err := fn(); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for range n {
		next <- struct{}{}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatal(fmt.Errorf("in-flight setup: %w", err))
	default:
	}
}
