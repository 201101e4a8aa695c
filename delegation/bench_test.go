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
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
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
				url := slowAgentProcess(b, tc.streaming)
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

// slowAgentProcess runs this test binary as an agent whose tasks never
// finish, in its own process, and returns its URL. The process ends with
// the benchmark.
func slowAgentProcess(b *testing.B, streaming bool) string {
	b.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), slowAgentEnv+"="+strconv.FormatBool(streaming))
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
		b.Fatalf("agent process: %v", err)
	}
	return strings.TrimSpace(line)
}

// slowAgentEnv makes the test binary serve a slow agent instead of
// running tests (see TestMain).
const slowAgentEnv = "ORCHD_TEST_SLOW_AGENT"

// serveSlowAgent serves an agent whose tasks work until the process ends,
// prints its URL and returns when stdin closes.
func serveSlowAgent(streaming bool) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	url := "http://" + ln.Addr().String()
	card := &a2a.AgentCard{Name: "Slow", Description: "never finishes", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(url+"/rpc", a2a.TransportProtocolJSONRPC)},
		Capabilities:        a2a.AgentCapabilities{Streaming: streaming},
		Skills:              []a2a.AgentSkill{{ID: "slow", Name: "slow", Tags: []string{}}}}
	mux := http.NewServeMux()
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(forever{})))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	go func() { _ = http.Serve(ln, mux) }()
	fmt.Println(url)
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// forever works on every task until the process ends or the task is
// canceled.
type forever struct{}

func (forever) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		if yield(a2a.NewSubmittedTask(ec, ec.Message), nil) && yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			<-ctx.Done()
		}
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
