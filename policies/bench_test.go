package policies

import (
	"testing"
	"time"

	"github.com/orchd/orchd/registry"
)

// typicalPolicy is the benchmark's "typical five-rule policy": request
// gating, health, protocol, a capability requirement and a preference.
const typicalPolicy = `
policy: typical
default: deny
rules:
  - name: healthy
    deny: "!agent.healthy"
    reason: agent is unhealthy
  - name: modern
    deny: '!agent.speaks(">= 1.0")'
    reason: agent speaks no A2A 1.x
  - name: long-running-needs-steering
    when: request.skill == "research"
    deny: '!agent.supports("steerable")'
    reason: research needs a steerable agent
  - name: streaming
    allow: agent.supports("streaming")
  - name: prefer-shallow
    rank: 'chain.depth == 0 ? 10 : 10 - chain.depth'
`

// BenchmarkEvaluate measures the typical five-rule policy against one
// candidate and against 1,000, next to the direct call: the same five
// checks written as Go.
func BenchmarkEvaluate(b *testing.B) {
	set := compileText(b, typicalPolicy)
	one := testAgent(b, "full", "v1-full.json")
	in := Input{Request: Request{Skill: "research"}, Chain: Chain{Depth: 1, MaxDepth: 4}, Now: time.Now()}
	fleet := fleetOf(one, 1000)
	direct := func(a *registry.Agent) (bool, float64) {
		if speaks, _ := a.Compatible(">= 1.0"); !a.Healthy || !speaks || (in.Request.Skill == "research" && !a.Supports("steerable")) || !a.Supports("streaming") {
			return false, 0
		}
		return true, float64(10 - in.Chain.Depth)
	}
	b.Run("direct-go/1", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			direct(one)
		}
	})
	b.Run("policy/1", func(b *testing.B) {
		b.ReportAllocs()
		cands := []*registry.Agent{one}
		for b.Loop() {
			set.Evaluate(b.Context(), cands, in)
		}
	})
	b.Run("choose/1", func(b *testing.B) {
		b.ReportAllocs()
		cands := []*registry.Agent{one}
		for b.Loop() {
			set.Choose(b.Context(), cands, in)
		}
	})
	b.Run("direct-go/1000", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, a := range fleet {
				direct(a)
			}
		}
	})
	b.Run("policy/1000", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			set.Evaluate(b.Context(), fleet, in)
		}
	})
	b.Run("choose/1000", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			set.Choose(b.Context(), fleet, in)
		}
	})
}
