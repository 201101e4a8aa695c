package policies_test

import (
	"context"
	"fmt"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
)

// ExampleSet_Evaluate compiles a policy and explains its decision about
// two agents.
func ExampleSet_Evaluate() {
	set, err := policies.Compile([]policies.File{{Path: "steering.yaml", Data: []byte(`
policy: steering
default: allow
when: request.skill == "research"
rules:
  - name: steerable
    deny: '!agent.supports("steerable")'
    reasonExpression: '"agent " + agent.id + " cannot be steered"'
  - name: prefer-modern
    rank: 'agent.speaks(">= 1.0") ? 10 : 0'
`)}}, policies.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	agent := func(id, card string) *registry.Agent {
		p, err := capability.Build([]byte(card), capability.Options{ID: id})
		if err != nil {
			panic(err)
		}
		return &registry.Agent{Profile: p, Healthy: true}
	}
	steady := agent("steady", `{"name": "Steady", "url": "https://steady.example.com", "protocolVersion": "1.0",
		"capabilities": {"extensions": [{"uri": "https://a2a-protocol.org/extensions/steering/v1", "params": {"steerable": true}}]}}`)
	plain := agent("plain", `{"name": "Plain", "url": "https://plain.example.com", "protocolVersion": "0.3.0"}`)

	res := set.Evaluate(context.Background(), []*registry.Agent{plain, steady}, policies.Input{Request: policies.Request{Skill: "research"}})
	fmt.Println("winner:", res.Winner)
	for _, d := range res.Decisions {
		fmt.Println(d.Agent, d.Allowed, d.Rank, d.Reasons)
	}
	// Output:
	// winner: steady
	// steady true 10 []
	// plain false 0 [agent plain cannot be steered]
}

// ExampleCompile shows errors pointing into the policy file.
func ExampleCompile() {
	_, err := policies.Compile([]policies.File{{Path: "p.yaml", Data: []byte(`policy: p
rules:
  - name: typo
    allow: agent.healty
  - name: wrong-type
    rank: agent.name
`)}}, policies.Options{})
	fmt.Println(err)
	// Output:
	// p.yaml:4:17: allow: undefined field 'healty'
	// p.yaml:6:11: rank must be int or uint or double, but "agent.name" is string
}
