package store

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testengine"
	"github.com/orchd/orchd/registry"
)

// oneByOne is the delegation store without ReadMany: an engine on it
// reads each running delegation's record and log tail on its own.
type oneByOne struct {
	delegation.Store
	delegation.RunningLister
}

// BenchmarkStateStart measures how long an engine on the embedded store
// takes to start carrying on 10,000 running delegations (Engine.Start,
// which returns once each is live), with the store reading them together
// (ManyReader, as orchd's start does) and one by one. The delegations go
// to a polled agent that never ends them, started by an engine closed
// before the measure; the engine and the store share the process, so the
// figure is what orchd's own work costs, without the agent, the followers
// or anything else a restart competes with for the machine.
//
//	go test ./store -run '^$' -bench '^BenchmarkStateStart$' -benchtime 3x
func BenchmarkStateStart(b *testing.B) {
	const running = 10_000
	agent := testagent.Start(b, testagent.Options{Name: "Worker", Skill: "work"}, testagent.Hang())
	parts := testengine.New(b, registry.Spec{ID: "worker", URL: agent.URL})
	dels := delegationsOf(b, openTest(b, "", Config{}), DelegationsConfig{})
	cfg := delegation.Config{Self: "a", HTTPClient: parts.HTTPClient, PollInterval: time.Hour}
	e := delegation.NewEngine(parts.Registry, parts.Policies, dels, cfg, nil)
	if err := e.Start(b.Context()); err != nil {
		b.Fatal(err)
	}
	ids := make([]string, running)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range next {
				d, err := e.Delegate(context.Background(), delegation.Request{Skill: "work", Text: "wait"})
				if err != nil {
					b.Error(err)
					continue
				}
				ids[i] = d.ID()
			}
		})
	}
	for i := range running {
		next <- i
	}
	close(next)
	wg.Wait()
	e.Close()
	if b.Failed() {
		return
	}
	for _, tc := range []struct {
		name  string
		store delegation.Store
	}{
		{"together", dels},
		{"one-by-one", oneByOne{dels, dels}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var took []time.Duration
			for b.Loop() {
				e := delegation.NewEngine(parts.Registry, parts.Policies, tc.store, cfg, nil)
				start := time.Now()
				err := e.Start(b.Context())
				took = append(took, time.Since(start))
				if err != nil {
					b.Fatal(err)
				}
				for _, id := range ids {
					if _, live := e.Get(id); !live {
						b.Fatalf("delegation %s was not carried on", id)
					}
				}
				e.Close()
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Milliseconds()), "p50-ms")
			b.ReportMetric(float64(took[len(took)-1].Milliseconds()), "max-ms")
		})
	}
}
