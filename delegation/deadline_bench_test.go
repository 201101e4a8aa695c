package delegation

import (
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/registry"
)

// BenchmarkDeadline measures deadline enforcement: one delegation, then
// 100 at once, to an agent whose tasks never finish, running in a separate
// process, each with a deadline 300ms after it was delegated. It reports
// how long after its deadline each delegation was FAILED (its downstream
// task canceled first), and orchd's goroutines before, while the
// delegations run, and once they have expired.
//
//	go test ./delegation -run '^$' -bench Deadline -benchtime 1x -count 3
func BenchmarkDeadline(b *testing.B) {
	for _, tc := range []struct {
		name      string
		n         int
		streaming bool
	}{{"polled-1", 1, false}, {"streamed-1", 1, true}, {"polled-100", 100, false}, {"streamed-100", 100, true}} {
		n := tc.n
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				url := agentProcess(b, "slow-agent", strconv.FormatBool(tc.streaming))
				transport, err := registry.NewTransport(registry.Config{AllowNetworks: []string{"127.0.0.0/8"}})
				if err != nil {
					b.Fatal(err)
				}
				f := newFixture(b, Config{HTTPClient: &http.Client{Transport: transport}, PollInterval: 500 * time.Millisecond, KeepFinished: n})
				f.add(b, "slow", url)
				before := runtime.NumGoroutine()
				ds := delegateAll(b, f, n, func() Request {
					return Request{Text: "wait", Skill: "slow", Deadline: time.Now().Add(300 * time.Millisecond)}
				})
				during := runtime.NumGoroutine()
				var late []float64
				for _, d := range ds {
					r := waitState(b, d, a2a.TaskStateFailed)
					evs, _, _ := d.Events(r.LastEvent - 1)
					late = append(late, float64(evs[len(evs)-1].At.Sub(r.Chain.Deadline).Microseconds())/1000)
				}
				transport.CloseIdleConnections()
				after := settledGoroutines(before)
				slices.Sort(late)
				b.ReportMetric(late[len(late)/2], "p50-ms")
				b.ReportMetric(late[len(late)-1], "max-ms")
				b.ReportMetric(float64(before), "goroutines-before")
				b.ReportMetric(float64(during), "goroutines-during")
				b.ReportMetric(float64(after), "goroutines-after")
				f.engine.Close()
			}
		})
	}
}

// settledGoroutines is the goroutine count once it is back to want, or
// after a second: goroutines of closed connections end a little after
// their connections.
func settledGoroutines(want int) int {
	for range 100 {
		if n := runtime.NumGoroutine(); n <= want {
			return n
		}
		time.Sleep(10 * time.Millisecond)
	}
	return runtime.NumGoroutine()
}
