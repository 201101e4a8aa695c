package policies

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/registry"
)

// testAgent builds a registered-agent value from a card in the capability
// corpus, as the registry would after fetching it.
func testAgent(t testing.TB, id, card string) *registry.Agent {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "capability", "testdata", "cards", card))
	if err != nil {
		t.Fatal(err)
	}
	p, err := capability.Build(raw, capability.Options{ID: id, URL: "https://" + id + ".example.com"})
	if err != nil {
		t.Fatal(err)
	}
	return &registry.Agent{Profile: p, Healthy: true}
}

func compileText(t testing.TB, docs ...string) *Set {
	t.Helper()
	var files []File
	for i, d := range docs {
		files = append(files, File{Path: "p" + string(rune('0'+i)) + ".yaml", Data: []byte(d)})
	}
	set, err := Compile(files, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return set
}

func decisionOf(r *Result, id string) Decision {
	for _, d := range r.Decisions {
		if d.Agent == id {
			return d
		}
	}
	return Decision{}
}

func TestEvaluate_Combining(t *testing.T) {
	t.Parallel()
	full := testAgent(t, "full", "v1-full.json")           // steerable, streaming, 1.0
	minimal := testAgent(t, "minimal", "v1-minimal.json")  // nothing declared, 1.0
	old := testAgent(t, "old", "v03-steering.json")        // steerable, 0.3
	grpc := testAgent(t, "grpc2", "v1-grpc-2.0-only.json") // incompatible
	sick := testAgent(t, "sick", "v1-steerable-only.json") // steerable, unhealthy below
	sick.Healthy = false
	agents := []*registry.Agent{minimal, sick, full, old, grpc}

	set := compileText(t, `
policy: guard
default: allow
rules:
  - name: healthy
    deny: "!agent.healthy"
    reason: agent is unhealthy
  - name: reachable
    deny: "!agent.compatible"
    reasonExpression: '"cannot reach " + agent.id'
`, `
policy: steering
when: request.skill == "research"
rules:
  - name: steerable
    allow: agent.supports("steerable")
  - name: prefer-modern
    rank: 'agent.speaks(">= 1.0") ? 10 : 0'
  - name: prefer-streaming
    rank: 'agent.supports("streaming") ? 1.5 : 0.0'
  - name: prefer-none
    when: request.skill == "nothing"
    rank: "100"
`)
	res := set.Evaluate(t.Context(), agents, Input{Request: Request{Skill: "research"}})
	var order []string
	for _, d := range res.Decisions {
		order = append(order, d.Agent)
	}
	if want := []string{"full", "old", "grpc2", "minimal", "sick"}; !slices.Equal(order, want) {
		t.Errorf("order = %v, want %v", order, want)
	}
	if res.Winner != "full" {
		t.Errorf("winner %q, want full", res.Winner)
	}
	if full := decisionOf(res, "full"); !full.Allowed || full.Rank != 11.5 {
		t.Errorf("full allowed %v with rank %v, want allowed with 11.5", full.Allowed, full.Rank)
	}
	checks := map[string]string{
		"sick":    "agent is unhealthy",
		"grpc2":   "cannot reach grpc2",
		"minimal": `policy "steering": no rule allows it and the policy denies by default`,
	}
	for id, reason := range checks {
		d := decisionOf(res, id)
		if d.Allowed || !slices.Contains(d.Reasons, reason) {
			t.Errorf("%s: allowed %v, reasons %q; want refused because %q", id, d.Allowed, d.Reasons, reason)
		}
	}
	// grpc2 is steerable-less too: both guard and steering refuse it, and
	// every reason is listed.
	if d := decisionOf(res, "grpc2"); len(d.Reasons) != 2 {
		t.Errorf("grpc2 reasons = %q, want two", d.Reasons)
	}

	// The explanation names every rule with what it did.
	d := decisionOf(res, "old")
	var lines []string
	for _, r := range d.Rules {
		lines = append(lines, strings.Join([]string{r.Policy, r.Rule, r.Kind, boolStr(r.Applied), boolStr(r.Matched), strconv.FormatFloat(r.Rank, 'g', -1, 64)}, "/"))
	}
	// A rank rule that applied matched, with the rank it gave; one that
	// did not apply neither matched nor ranked.
	want := []string{"guard/healthy/deny/true/false/0", "guard/reachable/deny/true/false/0", "guard//default/true/true/0",
		"steering/steerable/allow/true/true/0", "steering/prefer-modern/rank/true/true/0", "steering/prefer-streaming/rank/true/true/1.5",
		"steering/prefer-none/rank/false/false/0"}
	if !slices.Equal(lines, want) {
		t.Errorf("explanation:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}

	// A request the steering policy does not apply to: it abstains.
	res = set.Evaluate(t.Context(), agents, Input{Request: Request{Skill: "translate"}})
	if d := decisionOf(res, "minimal"); !d.Allowed || d.Rank != 0 {
		t.Errorf("abstaining policy: minimal = %+v", d)
	}
	if res.Winner != "full" && res.Winner != "minimal" && res.Winner != "old" {
		t.Errorf("winner = %q", res.Winner)
	}
	// Ties break by id: the three allowed agents come first.
	var tied []string
	for _, d := range res.Decisions[:min(3, len(res.Decisions))] {
		tied = append(tied, d.Agent)
	}
	if diff := cmp.Diff([]string{"full", "minimal", "old"}, tied); diff != "" {
		t.Errorf("tie order (-want +got):\n%s", diff)
	}
}

func boolStr(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func TestEvaluate_Functions(t *testing.T) {
	t.Parallel()
	full := testAgent(t, "full", "v1-full.json")
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	drifted := testAgent(t, "drifted", "v1-minimal.json")
	drifted.Drift = []registry.DriftRecord{{At: now.Add(-30 * time.Minute), Drift: capability.Drift{Removed: []string{"streaming"}}}}
	in := Input{Now: now, Request: Request{Protocol: ">= 1.0", Metadata: map[string]any{"priority": "high"}},
		Chain: Chain{Depth: 2, MaxDepth: 4, Path: []string{"a", "b"}}, Caller: Caller{Tenant: "acme", Claims: map[string]any{"tier": "gold"}}}
	tests := []struct {
		expr  string
		agent *registry.Agent
		want  bool
	}{
		{`agent.speaks(">= 1.0, < 2.0")`, full, true},
		{`agent.speaks("~> 0.3")`, full, false},
		{`agent.speaks(request.protocol)`, full, true},
		{`agent.speaks("")`, full, true},
		{`agent.supports("streaming_message") && agent.supports("pushNotifications")`, full, true},
		{`agent.tier("send_message") == 1 && agent.tier("streaming") == 2 && agent.tier("nope") == 0`, full, true},
		{`agent.hasExtension("https://a2a-protocol.org/extensions/steering/v1")`, full, true},
		{`agent.hasSkill("fact-check") && agent.hasSkill("bibliography") && !agent.hasSkill("cooking")`, full, true},
		{`agent.steering.steerable && agent.steering.interruptible`, full, true},
		{`agent.capabilities["streaming"].declared`, full, true},
		{`agent.protocols.exists(p, p.tenant == caller.tenant)`, full, true},
		{`agent.protocols.exists(p, p.tenant == "globex")`, full, false},
		{`agent.drifted(duration("1h"))`, drifted, true},
		{`agent.drifted(duration("10m"))`, drifted, false},
		{`agent.drifted(duration("1h"))`, full, false},
		{`semver("1.2") < semver("1.10") && semver("2.0.0") == semver("2.0") && semver("1.0") >= semver("1.0")`, full, true},
		{`semver(agent.cardVersion) > semver("2.0")`, full, true},
		{`chain.depth < chain.maxDepth && size(chain.path) == 2 && !("full" in chain.path)`, full, true},
		{`caller.claims.tier == "gold" && request.metadata.priority == "high"`, full, true},
		{`now > timestamp("2026-01-01T00:00:00Z")`, full, true},
		{`agent.name.lowerAscii().contains("research")`, full, true},
	}
	for _, tt := range tests {
		set := compileText(t, "policy: p\nrules:\n  - name: r\n    allow: '"+strings.ReplaceAll(tt.expr, "'", "''")+"'\n")
		res := set.Evaluate(t.Context(), []*registry.Agent{tt.agent}, in)
		d := res.Decisions[0]
		if d.Allowed != tt.want {
			t.Errorf("%s on %s = %v, want %v (reasons %q)", tt.expr, tt.agent.ID, d.Allowed, tt.want, d.Reasons)
		}
	}
}

func TestEvaluate_FailuresDeny(t *testing.T) {
	t.Parallel()
	a := testAgent(t, "a", "v1-full.json")
	var big []string
	for i := range 60 {
		big = append(big, string(rune('0'+i%10)))
	}
	list := "[" + strings.Join(big, ",") + "]"
	tests := []struct {
		name, rule string
		opts       Options
		reason     string
	}{
		{"missing key", `allow: request.metadata["absent"] == 1`, Options{}, `rule "r" failed: no such key: absent`},
		{"bad constraint", `allow: agent.speaks("around 1.0")`, Options{}, `version constraint "around 1.0"`},
		{"bad semver", `allow: semver("one") < semver("2")`, Options{}, `semver("one")`},
		{"cost limit", `allow: '` + list + `.all(x, ` + list + `.all(y, ` + list + `.all(z, true)))'`, Options{CostLimit: 1000}, "exceeded the cost limit of 1000"},
		{"timeout", `allow: '` + list + `.all(x, ` + list + `.all(y, ` + list + `.all(z, ` + list + `.all(w, true))))'`, Options{CostLimit: 1 << 62, Timeout: 5 * time.Millisecond}, "timed out after 5ms"},
	}
	for _, tt := range tests {
		set, err := Compile([]File{{Path: "f.yaml", Data: []byte("policy: p\nrules:\n  - name: r\n    " + tt.rule + "\n")}}, tt.opts)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		start := time.Now()
		res := set.Evaluate(t.Context(), []*registry.Agent{a, a}, Input{})
		if time.Since(start) > 5*time.Second {
			t.Errorf("%s: evaluation took %s", tt.name, time.Since(start))
		}
		for _, d := range res.Decisions {
			if d.Allowed || !strings.Contains(strings.Join(d.Reasons, "; "), tt.reason) {
				t.Errorf("%s: allowed %v, reasons %q; want a refusal containing %q", tt.name, d.Allowed, d.Reasons, tt.reason)
			}
		}
	}
}

func TestEvaluate_EmptySetAllowsEverything(t *testing.T) {
	t.Parallel()
	set, err := Compile(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	res := set.Evaluate(t.Context(), []*registry.Agent{testAgent(t, "b", "v1-minimal.json"), testAgent(t, "a", "v1-minimal.json")}, Input{})
	if res.Winner != "a" || !res.Decisions[1].Allowed {
		t.Errorf("result = %+v", res)
	}
}

func TestChoose_MatchesEvaluate(t *testing.T) {
	t.Parallel()
	set := compileText(t, typicalPolicy)
	agents := []*registry.Agent{testAgent(t, "full", "v1-full.json"), testAgent(t, "min", "v1-minimal.json"), testAgent(t, "old", "v03-steering.json")}
	in := Input{Request: Request{Skill: "research"}, Chain: Chain{Depth: 1}}
	ev, ch := set.Evaluate(t.Context(), agents, in), set.Choose(t.Context(), agents, in)
	if ev.Winner != "full" || ch.Winner != "full" {
		t.Fatalf("Evaluate winner %q, Choose winner %q; want full", ev.Winner, ch.Winner)
	}
	// Choose decides as Evaluate does, without explaining each rule.
	if diff := cmp.Diff(ev.Decisions, ch.Decisions, cmpopts.IgnoreFields(Decision{}, "Rules"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("decisions (-Evaluate +Choose):\n%s", diff)
	}
	for i := range ev.Decisions {
		if e, c := ev.Decisions[i], ch.Decisions[i]; c.Rules != nil || len(e.Rules) == 0 {
			t.Errorf("decision %d: Evaluate explained %d rules, Choose %d; want all and none", i, len(e.Rules), len(c.Rules))
		}
	}
}
