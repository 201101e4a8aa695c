package policies

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/orchd/orchd/registry"
)

// fleetOf returns n copies of a, each with its own profile and id.
func fleetOf(a *registry.Agent, n int) []*registry.Agent {
	fleet := make([]*registry.Agent, n)
	for i := range fleet {
		c := *a
		p := *a.Profile
		p.ID = fmt.Sprintf("agent-%05d", i)
		c.Profile = &p
		fleet[i] = &c
	}
	return fleet
}

// TestChoose_CachedAgents checks that an agent evaluated again is decided
// as it is now, and that a changed copy of it (how the registry publishes
// a change) is decided by its own fields, not by the cached original's.
func TestChoose_CachedAgents(t *testing.T) {
	set := compileText(t, `
policy: health
default: allow
rules:
  - name: healthy
    deny: "!agent.healthy"
    reason: unhealthy
  - name: named
    rank: 'agent.id == "full" ? 5 : 1'
`)
	healthy := testAgent(t, "full", "v1-full.json")
	sick := *healthy
	sick.Healthy = false
	renamed := *healthy
	p := *healthy.Profile
	p.ID = "other"
	renamed.Profile = &p
	in := Input{Now: time.Now()}

	tests := []struct {
		name    string
		agent   *registry.Agent
		allowed bool
		rank    float64
	}{
		{"first", healthy, true, 5},
		{"changed copy", &sick, false, 0},
		{"original again", healthy, true, 5},
		{"copy with another profile", &renamed, true, 1},
		{"changed copy again", &sick, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, res := range []*Result{set.Choose(t.Context(), []*registry.Agent{tt.agent}, in),
				set.Evaluate(t.Context(), []*registry.Agent{tt.agent}, in)} {
				d := res.Decisions[0]
				want := Decision{Agent: tt.agent.ID, Allowed: tt.allowed, Rank: tt.rank}
				if diff := cmp.Diff(want, d, cmpopts.IgnoreFields(Decision{}, "Reasons", "Rules")); diff != "" {
					t.Fatalf("decision (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestAgentCache_Bounded checks that the cache holds at most its size
// however many agents pass through it, and that every value it returns
// wraps the agent asked for.
func TestAgentCache_Bounded(t *testing.T) {
	set := compileText(t, typicalPolicy)
	fleet := fleetOf(testAgent(t, "full", "v1-full.json"), 3*agentCacheSets*agentCacheWays)
	for range 2 {
		for _, a := range fleet {
			if got := set.agents.value(set.adapter, a).Value(); got != a {
				t.Fatalf("value of %s wraps %v", a.ID, got)
			}
		}
	}
	held := 0
	for i := range set.agents.slots {
		for j := range set.agents.slots[i] {
			if set.agents.slots[i][j].Load() != nil {
				held++
			}
		}
	}
	if held == 0 || held > agentCacheSets*agentCacheWays {
		t.Fatalf("the cache holds %d agents, want 1 to %d", held, agentCacheSets*agentCacheWays)
	}
}

// TestChoose_ConcurrentCachedAgents runs Choose from many goroutines over
// overlapping fleets, some agents healthy and some not, and checks every
// decision: cache entries are filled while others read them.
func TestChoose_ConcurrentCachedAgents(t *testing.T) {
	// A generous timeout: eight goroutines under the race detector on a
	// busy machine must not be refused for running out of time.
	set, err := Compile([]File{{Path: "typical.yaml", Data: []byte(typicalPolicy)}}, Options{Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	fleet := fleetOf(testAgent(t, "full", "v1-full.json"), 300)
	for i, a := range fleet {
		a.Healthy = i%3 != 0
	}
	in := Input{Request: Request{Skill: "research"}, Chain: Chain{Depth: 1, MaxDepth: 4}, Now: time.Now()}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for round := range 20 {
				part := fleet[(g*37+round*11)%200:][:100]
				res := set.Choose(t.Context(), part, in)
				allowed := 0
				for _, d := range res.Decisions {
					var want bool
					for _, a := range part {
						if a.ID == d.Agent {
							want = a.Healthy
						}
					}
					if d.Allowed != want {
						errs <- fmt.Errorf("goroutine %d round %d: %s allowed = %v, want %v (%v)", g, round, d.Agent, d.Allowed, want, d.Reasons)
						return
					}
					if d.Allowed {
						allowed++
					}
				}
				if allowed == 0 || res.Winner == "" {
					errs <- fmt.Errorf("goroutine %d round %d: no winner among %d allowed", g, round, allowed)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
