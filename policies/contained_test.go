package policies

import (
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orchd/orchd/registry"
)

// TestEvaluate_ContainedAgent checks that a policy sees an agent's
// containment as agent.contained, typed: a rule reading it decides, and
// one comparing it with a string does not compile.
func TestEvaluate_ContainedAgent(t *testing.T) {
	t.Parallel()
	free := testAgent(t, "free", "v1-full.json")
	held := testAgent(t, "held", "v1-full.json")
	held.Contained = true
	held.Containment = &registry.Containment{Agent: "held", Reason: "leaks data", By: "ops", At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	set := compileText(t, `
policy: brake
default: allow
rules:
  - name: contained
    deny: agent.contained
    reasonExpression: '"held by " + agent.containment.by + ": " + agent.containment.reason'
`)
	res := set.Evaluate(t.Context(), []*registry.Agent{free, held}, Input{})
	if d := decisionOf(res, "free"); !d.Allowed {
		t.Errorf("free agent refused: %q", d.Reasons)
	}
	if d := decisionOf(res, "held"); d.Allowed || len(d.Reasons) != 1 || d.Reasons[0] != "held by ops: leaks data" {
		t.Errorf("contained agent: allowed %v, reasons %q; want refused, held by ops", d.Allowed, d.Reasons)
	}

	_, err := Compile([]File{{Path: "p.yaml", Data: []byte("policy: p\nrules:\n  - name: r\n    deny: agent.contained == \"yes\"\n")}}, Options{})
	if err == nil || !strings.Contains(err.Error(), "p.yaml:4:") {
		t.Errorf("a string compared with agent.contained compiled: %v", err)
	}
}

// TestCase_ContainedAgent checks that a policy test case can hold an
// agent contained, as policies see it in force.
func TestCase_ContainedAgent(t *testing.T) {
	t.Parallel()
	set := compileText(t, "policy: brake\ndefault: allow\nrules:\n  - name: contained\n    deny: agent.contained\n    reasonExpression: 'agent.containment.reason'\n")
	card := "../capability/testdata/cards/v1-full.json"
	c := Case{Agents: []CaseAgent{{ID: "free"}, {ID: "held", Contained: "leaks data"}},
		Want: CaseWant{Agents: map[string]string{"free": "allow", "held": "deny"}}}
	for i := range c.Agents {
		c.Agents[i].Card.Kind, c.Agents[i].Card.Value = yaml.ScalarNode, card
	}
	res, err := runCase(t.Context(), set, ".", c)
	if err != nil || len(res.Failures) > 0 {
		t.Fatalf("case: %v %q", err, res.Failures)
	}
	if d := decisionOf(res.Result, "held"); len(d.Reasons) != 1 || d.Reasons[0] != "leaks data" {
		t.Errorf("held refused for %q, want the containment's reason", d.Reasons)
	}
}
