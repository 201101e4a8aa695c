package orchestrator

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
)

// BenchmarkSteerChain measures steering across A → B → C with a no-op
// steerable agent C: "steer" is the time from the caller's :steer at A to
// the receipt, which comes back once C's executor has the steer queued;
// "interrupt" is the time from :interrupt at A to the acknowledgement,
// which waits for C, then B, then A to settle INPUT_REQUIRED.
//
//	go test ./orchestrator -run '^$' -bench SteerChain -benchtime 300x
func BenchmarkSteerChain(b *testing.B) {
	c := testagent.Start(b, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	bNode := orchdNode(b, "b", "research", registry.Spec{ID: "c", URL: c.URL})
	a := orchdNode(b, "a", "research", registry.Spec{ID: "b", URL: bNode})
	// Each task takes ten signals: a2a-go copies a task's whole history on
	// every update, so hundreds of steers on one task would measure that.
	var rec delegation.Record
	fresh := func(b *testing.B) {
		b.StopTimer()
		if rec.ID != "" {
			call(b, "POST", a+"/v1/delegations/"+rec.ID+":cancel", "", nil)
		}
		if code := call(b, "POST", a+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
			b.Fatalf("delegate = %d", code)
		}
		waitFor(b, a, rec.ID, a2a.TaskStateWorking)
		b.StartTimer()
	}
	report := func(b *testing.B, lat []time.Duration) {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	b.Run("steer", func(b *testing.B) {
		var lat []time.Duration
		i := 0
		for b.Loop() {
			if i%10 == 0 {
				fresh(b)
			}
			i++
			start := time.Now()
			if code := call(b, "POST", a+"/v1/delegations/"+rec.ID+":steer", fmt.Sprintf(`{"text": "steer %d"}`, i), nil); code != 200 {
				b.Fatalf("steer = %d", code)
			}
			lat = append(lat, time.Since(start))
		}
		report(b, lat)
	})
	b.Run("interrupt", func(b *testing.B) {
		var lat []time.Duration
		i := 0
		for b.Loop() {
			if i%10 == 0 {
				fresh(b)
			}
			i++
			start := time.Now()
			if code := call(b, "POST", a+"/v1/delegations/"+rec.ID+":interrupt", "", nil); code != 200 {
				b.Fatalf("interrupt = %d", code)
			}
			lat = append(lat, time.Since(start))
			b.StopTimer()
			if code := call(b, "POST", a+"/v1/delegations/"+rec.ID+"/messages", `{"text": "go on"}`, nil); code != 200 {
				b.Fatalf("resume = %d", code)
			}
			waitFor(b, a, rec.ID, a2a.TaskStateWorking)
			b.StartTimer()
		}
		report(b, lat)
	})
	call(b, "POST", a+"/v1/delegations/"+rec.ID+":cancel", "", nil)
}
