package policies

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/registry"
)

// CaseFile is a file of policy test cases, run by `orchd policy test`.
type CaseFile struct {
	// Cases are run in order.
	Cases []Case `yaml:"cases"`
}

// Case is one policy test. A delegation case gives a request, the
// candidate agents and the decisions the delegation policies must reach;
// an authorization case gives Authorize and the decision the authorization
// policies must reach.
type Case struct {
	// Name says what the case checks.
	Name string `yaml:"name"`
	// Request is what is asked for.
	Request Request `yaml:"request"`
	// Chain is the delegation chain the request came through.
	Chain Chain `yaml:"chain"`
	// Caller is who asks.
	Caller Caller `yaml:"caller"`
	// Now is the evaluation time; zero means 2026-01-01T00:00:00Z, so
	// cases do not depend on the day they run.
	Now time.Time `yaml:"now"`
	// Agents are the candidates.
	Agents []CaseAgent `yaml:"agents"`
	// Want maps agent ids to "allow" or "deny"; for an authorization
	// case it is "allow" or "deny".
	Want CaseWant `yaml:"want"`
	// Winner is the agent that must be chosen, or "none" when every
	// candidate must be refused. Empty skips the check.
	Winner string `yaml:"winner"`
	// Authorize makes this an authorization case: who asks to do what to
	// what. Now applies; Request, Chain, Caller, Agents and Winner do not.
	Authorize *AuthzCase `yaml:"authorize"`
	// DecidedBy, in an authorization case, is the rule that must decide,
	// as "policy/rule". Empty skips the check.
	DecidedBy string `yaml:"decidedBy"`
}

// CaseWant is what a case expects: for a delegation case a mapping of
// agent ids to "allow" or "deny", for an authorization case "allow" or
// "deny" alone.
type CaseWant struct {
	// Agents maps agent ids to "allow" or "deny".
	Agents map[string]string
	// Decision is an authorization case's "allow" or "deny".
	Decision string
}

// UnmarshalYAML reads a mapping into Agents and a scalar into Decision.
func (w *CaseWant) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		w.Decision = n.Value
		return nil
	}
	return n.Decode(&w.Agents)
}

// AuthzCase is the request of an authorization case.
type AuthzCase struct {
	// Caller is who asks.
	Caller Caller `yaml:"caller"`
	// Action is what they ask to do, one of [Actions].
	Action string `yaml:"action"`
	// Resource is what they ask to do it to.
	Resource Resource `yaml:"resource"`
}

// CaseAgent is a candidate in a test case.
type CaseAgent struct {
	// ID is the agent's id.
	ID string `yaml:"id"`
	// Card is the agent's card: a path relative to the case file, or the
	// card itself written inline.
	Card yaml.Node `yaml:"card"`
	// Healthy defaults to true.
	Healthy *bool `yaml:"healthy"`
	// Failures counts failed refreshes.
	Failures int `yaml:"failures"`
	// Drift lists recent card changes.
	Drift []CaseDrift `yaml:"drift"`
	// Contained, when not empty, is the reason the agent is held
	// contained (registry.Containment), by "case".
	Contained string `yaml:"contained"`
}

// CaseDrift is a recorded card change, at a time or a duration before the
// case's now.
type CaseDrift struct {
	// At is when the change was seen.
	At time.Time `yaml:"at"`
	// Ago, used when At is zero, is how long before the case's now.
	Ago time.Duration `yaml:"ago"`
	// Added, Removed and Deprecated list the capabilities that changed.
	Added      []string `yaml:"added"`
	Removed    []string `yaml:"removed"`
	Deprecated []string `yaml:"deprecated"`
}

// CaseResult is the outcome of one case.
type CaseResult struct {
	// File is the case file.
	File string
	// Name is the case's name.
	Name string
	// Failures lists every expectation the decisions broke; none means
	// the case passed.
	Failures []string
	// Result is what the delegation policies decided; nil for an
	// authorization case.
	Result *Result
	// Authorization is what the authorization policies decided, with
	// every rule explained; nil for a delegation case.
	Authorization *AuthzDecision
	// Elapsed is how long the evaluation took.
	Elapsed time.Duration
}

// Passed reports whether the case met every expectation.
func (r CaseResult) Passed() bool { return len(r.Failures) == 0 }

// ReadCaseFiles reads case files. A directory contributes the case files
// (a top-level cases: key) among the *.yaml and *.yml files under it, at
// any depth, as ReadFiles reads the policy files beside them.
func ReadCaseFiles(paths []string) ([]File, error) {
	files, err := readFiles(paths, true)
	if err != nil {
		return nil, fmt.Errorf("read cases: %w", err)
	}
	return files, nil
}

// RunCases runs every case in files against set. A file that cannot be
// read as cases is an error; a case whose expectations fail is not.
func RunCases(ctx context.Context, set *Set, files []File) ([]CaseResult, error) {
	var out []CaseResult
	for _, f := range files {
		var cf CaseFile
		dec := yaml.NewDecoder(bytes.NewReader(f.Data))
		dec.KnownFields(true)
		if err := dec.Decode(&cf); err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		if len(cf.Cases) == 0 {
			return nil, fmt.Errorf("%s: no cases (want a top-level cases: list)", f.Path)
		}
		for i, c := range cf.Cases {
			name := c.Name
			if name == "" {
				name = fmt.Sprintf("case %d", i+1)
			}
			res, err := runCase(ctx, set, filepath.Dir(f.Path), c)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", f.Path, name, err)
			}
			res.File, res.Name = f.Path, name
			out = append(out, res)
		}
	}
	return out, nil
}

func runCase(ctx context.Context, set *Set, dir string, c Case) (CaseResult, error) {
	if c.Now.IsZero() {
		c.Now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if c.Authorize != nil {
		return runAuthzCase(set, c)
	}
	if c.Want.Decision != "" || c.DecidedBy != "" {
		return CaseResult{}, errors.New("want: allow|deny and decidedBy belong to authorization cases (with authorize:); a delegation case wants a map of agent ids")
	}
	agents := make([]*registry.Agent, 0, len(c.Agents))
	for _, ca := range c.Agents {
		a, err := ca.agent(dir, c.Now)
		if err != nil {
			return CaseResult{}, err
		}
		agents = append(agents, a)
	}
	for id, want := range c.Want.Agents {
		if want != "allow" && want != "deny" {
			return CaseResult{}, fmt.Errorf("want %s: %q is neither allow nor deny", id, want)
		}
		if !slices.ContainsFunc(agents, func(a *registry.Agent) bool { return a.ID == id }) {
			return CaseResult{}, fmt.Errorf("want names agent %q, which the case does not list", id)
		}
	}
	start := time.Now()
	res := set.Evaluate(ctx, agents, Input{Request: c.Request, Chain: c.Chain, Caller: c.Caller, Now: c.Now})
	cr := CaseResult{Result: res, Elapsed: time.Since(start)}
	for _, d := range res.Decisions {
		want, ok := c.Want.Agents[d.Agent]
		if !ok {
			continue
		}
		got := "deny"
		if d.Allowed {
			got = "allow"
		}
		if got != want {
			why := "no rule refused it"
			if len(d.Reasons) > 0 {
				why = strings.Join(d.Reasons, "; ")
			}
			cr.Failures = append(cr.Failures, fmt.Sprintf("agent %q: want %s, got %s (%s)", d.Agent, want, got, why))
		}
	}
	switch {
	case c.Winner == "":
	case c.Winner == "none" && res.Winner != "":
		cr.Failures = append(cr.Failures, fmt.Sprintf("winner: want none, got %q", res.Winner))
	case c.Winner != "none" && res.Winner != c.Winner:
		cr.Failures = append(cr.Failures, fmt.Sprintf("winner: want %q, got %q", c.Winner, orNone(res.Winner)))
	}
	return cr, nil
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// agent builds the registry's view of a case agent.
func (ca CaseAgent) agent(dir string, now time.Time) (*registry.Agent, error) {
	if ca.ID == "" {
		return nil, errors.New("an agent needs an id")
	}
	card := &ca.Card
	if card.Kind == yaml.AliasNode && card.Alias != nil {
		card = card.Alias
	}
	var raw []byte
	switch card.Kind {
	case yaml.ScalarNode:
		b, err := os.ReadFile(filepath.Join(dir, card.Value))
		if err != nil {
			return nil, fmt.Errorf("agent %s: %w", ca.ID, err)
		}
		raw = b
	case yaml.MappingNode:
		var v any
		if err := card.Decode(&v); err != nil {
			return nil, fmt.Errorf("agent %s: card: %w", ca.ID, err)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("agent %s: card: %w", ca.ID, err)
		}
		raw = b
	default:
		return nil, fmt.Errorf("agent %s: card must be a file path or an inline card", ca.ID)
	}
	p, err := capability.Build(raw, capability.Options{ID: ca.ID, URL: "https://" + ca.ID + ".test"})
	if err != nil {
		return nil, fmt.Errorf("agent %s: %w", ca.ID, err)
	}
	a := &registry.Agent{Profile: p, Healthy: ca.Healthy == nil || *ca.Healthy, Failures: ca.Failures, FetchedAt: now}
	if ca.Contained != "" {
		a.Contained, a.Containment = true, &registry.Containment{Agent: ca.ID, Reason: ca.Contained, By: "case", At: now}
	}
	for _, d := range ca.Drift {
		at := d.At
		if at.IsZero() {
			at = now.Add(-d.Ago)
		}
		a.Drift = append(a.Drift, registry.DriftRecord{At: at, Drift: capability.Drift{Added: d.Added, Removed: d.Removed, Deprecated: d.Deprecated}})
	}
	return a, nil
}
