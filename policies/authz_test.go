package policies

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"

	"github.com/orchd/orchd/internal/testcmp"
)

// Callers as authentication would describe them.
var (
	alice     = Caller{Principal: "alice", Tenant: "acme", Authenticated: true, Method: "token"}
	bob       = Caller{Principal: "bob", Tenant: "acme", Authenticated: true, Method: "token"}
	aliceElse = Caller{Principal: "alice", Tenant: "globex", Authenticated: true, Method: "jwt"}
	root      = Caller{Principal: "root", Roles: []string{"admin"}, Authenticated: true, Method: "mtls"}
	olivia    = Caller{Principal: "olivia", Tenant: "acme", Roles: []string{"operator"}, Authenticated: true, Method: "token"}
	anonymous = Caller{Method: MethodAnonymous}
	developer = Caller{Method: MethodNone}
	// forged claims to be an admin without having authenticated.
	forged = Caller{Principal: "root", Roles: []string{"admin"}, Method: MethodAnonymous}
)

var alicesDelegation = Resource{Kind: ResourceDelegation, ID: "d-1", Owner: "alice", Tenant: "acme", OwnerMethod: "token"}

type authzCase struct {
	name   string
	caller Caller
	action string
	res    Resource
	// want is the decision; by is "policy/rule" or "" for no rule.
	want bool
	by   string
}

func runAuthz(t *testing.T, set *Set, cases []authzCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := AuthzInput{Caller: tc.caller, Action: tc.action, Resource: tc.res}
			got := set.Authorize(in)
			by := ""
			if got.Rule != "" {
				by = got.Policy + "/" + got.Rule
			}
			if got.Allowed != tc.want || by != tc.by {
				t.Errorf("Authorize = allowed %v by %q (%s), want allowed %v by %q", got.Allowed, by, got.Reason, tc.want, tc.by)
			}
			if got.Reason == "" {
				t.Errorf("Authorize = %+v: no reason", got)
			}
			if got.PolicySet != set.Digest() {
				t.Errorf("Authorize's policy set %q, want the set's digest %q", got.PolicySet, set.Digest())
			}
			if got.Explain != nil {
				t.Errorf("Authorize explained itself: %+v", got.Explain)
			}
			ex := set.ExplainAuthorization(in)
			if diff := cmp.Diff(got, ex, cmpopts.IgnoreFields(AuthzDecision{}, "Explain")); diff != "" {
				t.Errorf("ExplainAuthorization decided otherwise than Authorize (-Authorize +ExplainAuthorization):\n%s", diff)
			}
			if knownAction(tc.action) && len(ex.Explain) < set.AuthorizationRules() {
				t.Errorf("ExplainAuthorization explained %d entries for %d rules", len(ex.Explain), set.AuthorizationRules())
			}
		})
	}
}

func TestSet_Authorize_Default(t *testing.T) {
	t.Parallel()
	set := compileText(t)
	if diff := cmp.Diff([]string{DefaultAuthorizationName}, set.AuthorizationPolicies()); diff != "" {
		t.Fatalf("authorization policies (-want +got):\n%s", diff)
	}
	if n := set.AuthorizationRules(); n != 5 {
		t.Fatalf("%d authorization rules, want 5", n)
	}
	const own = DefaultAuthorizationName + "/own-delegations"
	runAuthz(t, set, []authzCase{
		{"owner reads", alice, ActionDelegationsRead, alicesDelegation, true, own},
		{"owner cancels", alice, ActionDelegationsCancel, alicesDelegation, true, own},
		{"owner steers", alice, ActionDelegationsSteer, alicesDelegation, true, own},
		{"other principal of the tenant", bob, ActionDelegationsRead, alicesDelegation, false, ""},
		{"same principal of another tenant", aliceElse, ActionDelegationsCancel, alicesDelegation, false, ""},
		{"same principal and tenant by another method", Caller{Principal: "alice", Tenant: "acme", Authenticated: true, Method: "jwt", Issuer: "https://idp.example"},
			ActionDelegationsRead, alicesDelegation, false, ""},
		{"same principal and tenant from another issuer", Caller{Principal: "alice", Tenant: "acme", Authenticated: true, Method: "jwt", Issuer: "https://idp.example"},
			ActionDelegationsRead, Resource{Kind: ResourceDelegation, ID: "d-2", Owner: "alice", Tenant: "acme", OwnerMethod: "jwt", OwnerIssuer: "https://other.example"}, false, ""},
		{"owner from the same issuer", Caller{Principal: "alice", Tenant: "acme", Authenticated: true, Method: "jwt", Issuer: "https://idp.example"},
			ActionDelegationsRead, Resource{Kind: ResourceDelegation, ID: "d-2", Owner: "alice", Tenant: "acme", OwnerMethod: "jwt", OwnerIssuer: "https://idp.example"}, true, own},
		{"owner stored without a method is no one's", alice, ActionDelegationsRead, Resource{Kind: ResourceDelegation, ID: "d-3", Owner: "alice", Tenant: "acme"}, false, ""},
		{"unowned delegation", alice, ActionDelegationsRead, Resource{Kind: ResourceDelegation, ID: "d-0"}, false, ""},
		{"principal-less caller and owner-less delegation", Caller{Authenticated: true, Method: "token"}, ActionDelegationsRead, Resource{Kind: ResourceDelegation, ID: "d-0"}, false, ""},
		{"authenticated creates", bob, ActionDelegationsCreate, Resource{Kind: ResourceDelegation, Owner: "bob", Tenant: "acme"}, true, DefaultAuthorizationName + "/create-delegations"},
		{"authenticated lists delegations", bob, ActionDelegationsList, Resource{Kind: ResourceDelegation, Owner: "bob", Tenant: "acme"}, true, DefaultAuthorizationName + "/create-delegations"},
		{"authenticated lists agents", bob, ActionAgentsList, Resource{Kind: ResourceAgent}, true, DefaultAuthorizationName + "/read-agents-and-policies"},
		{"authenticated reads policies", bob, ActionPoliciesRead, Resource{Kind: ResourcePolicies}, true, DefaultAuthorizationName + "/read-agents-and-policies"},
		{"authenticated dry-runs as itself", bob, ActionPoliciesEvaluate, Resource{Kind: ResourcePolicies, Owner: "bob", Tenant: "acme"}, true, DefaultAuthorizationName + "/read-agents-and-policies"},
		{"authenticated dry-runs as no one else", bob, ActionPoliciesEvaluate, Resource{Kind: ResourcePolicies, Owner: "alice", Tenant: "acme"}, false, ""},
		{"nor as itself in another tenant", bob, ActionPoliciesEvaluate, Resource{Kind: ResourcePolicies, Owner: "bob", Tenant: "globex"}, false, ""},
		{"admin dry-runs as anyone", root, ActionPoliciesEvaluate, Resource{Kind: ResourcePolicies, Owner: "alice", Tenant: "acme"}, true, DefaultAuthorizationName + "/admin"},
		{"no auth configured dry-runs as anyone", developer, ActionPoliciesEvaluate, Resource{Kind: ResourcePolicies, Owner: "alice", Tenant: "acme"}, true, DefaultAuthorizationName + "/no-authentication-configured"},
		{"authenticated registers no agent", bob, ActionAgentsRegister, Resource{Kind: ResourceAgent, ID: "x"}, false, ""},
		{"authenticated reloads no policies", bob, ActionPoliciesReload, Resource{Kind: ResourcePolicies}, false, ""},
		{"authenticated reads no metrics", bob, ActionMetricsRead, Resource{Kind: ResourceMetrics}, false, ""},
		{"admin deletes an agent", root, ActionAgentsDelete, Resource{Kind: ResourceAgent, ID: "x"}, true, DefaultAuthorizationName + "/admin"},
		{"admin cancels anyone's delegation", root, ActionDelegationsCancel, alicesDelegation, true, DefaultAuthorizationName + "/admin"},
		{"admin reads metrics", root, ActionMetricsRead, Resource{Kind: ResourceMetrics}, true, DefaultAuthorizationName + "/admin"},
		{"anonymous with auth configured lists nothing", anonymous, ActionAgentsList, Resource{Kind: ResourceAgent}, false, ""},
		{"anonymous with auth configured creates nothing", anonymous, ActionDelegationsCreate, Resource{Kind: ResourceDelegation}, false, ""},
		{"unauthenticated admin role counts for nothing", forged, ActionAgentsDelete, Resource{Kind: ResourceAgent, ID: "x"}, false, ""},
		{"no auth configured registers", developer, ActionAgentsRegister, Resource{Kind: ResourceAgent, ID: "x"}, true, DefaultAuthorizationName + "/no-authentication-configured"},
		{"no auth configured cancels anything", developer, ActionDelegationsCancel, alicesDelegation, true, DefaultAuthorizationName + "/no-authentication-configured"},
		{"unknown action", root, "agents.destroy", Resource{Kind: ResourceAgent}, false, ""},
	})
}

// operatorPolicy lets operators cancel any delegation of their own tenant.
const operatorPolicy = `kind: authorization
policy: operators
rules:
  - name: cancel-tenant
    allow: '"operator" in caller.roles && action == "delegations.cancel" && resource.tenant == caller.tenant'
    reason: operators cancel their tenant's delegations
  - name: no-deletes
    deny: action == "agents.delete" && resource.id == "core"
    reason: the core agent stays
`

func TestSet_Authorize_Custom(t *testing.T) {
	t.Parallel()
	set := compileText(t, typicalPolicy, operatorPolicy)
	if got := set.AuthorizationPolicies(); strings.Join(got, ",") != "operators,"+DefaultAuthorizationName || set.AuthorizationRules() != 7 {
		t.Fatalf("authorization policies = %v, %d rules", got, set.AuthorizationRules())
	}
	if got := set.Policies(); len(got) != 1 || got[0] != "typical" {
		t.Fatalf("delegation policies = %v", got)
	}
	globex := Resource{Kind: ResourceDelegation, ID: "d-9", Owner: "gina", Tenant: "globex"}
	runAuthz(t, set, []authzCase{
		{"operator cancels in its tenant", olivia, ActionDelegationsCancel, alicesDelegation, true, "operators/cancel-tenant"},
		{"operator cancels not in another tenant", olivia, ActionDelegationsCancel, globex, false, ""},
		{"operator steers not", olivia, ActionDelegationsSteer, alicesDelegation, false, ""},
		{"the default still lets owners act", alice, ActionDelegationsCancel, alicesDelegation, true, DefaultAuthorizationName + "/own-delegations"},
		{"a deny beats the admin", root, ActionAgentsDelete, Resource{Kind: ResourceAgent, ID: "core"}, false, "operators/no-deletes"},
		{"a deny beats the open daemon", developer, ActionAgentsDelete, Resource{Kind: ResourceAgent, ID: "core"}, false, "operators/no-deletes"},
		{"other agents may go", root, ActionAgentsDelete, Resource{Kind: ResourceAgent, ID: "edge"}, true, DefaultAuthorizationName + "/admin"},
	})
}

func TestSet_Authorize_ReplacedDefault(t *testing.T) {
	t.Parallel()
	set := compileText(t, `kind: authorization
policy: default-authorization
description: only admins, even without authentication configured
rules:
  - name: admins
    allow: caller.authenticated && "admin" in caller.roles
`)
	if got := set.AuthorizationPolicies(); len(got) != 1 || set.AuthorizationRules() != 1 {
		t.Fatalf("authorization policies = %v, %d rules", got, set.AuthorizationRules())
	}
	runAuthz(t, set, []authzCase{
		{"owner no longer", alice, ActionDelegationsRead, alicesDelegation, false, ""},
		{"open daemon no longer", developer, ActionAgentsList, Resource{Kind: ResourceAgent}, false, ""},
		{"admin still", root, ActionAgentsList, Resource{Kind: ResourceAgent}, true, DefaultAuthorizationName + "/admins"},
	})
}

// TestSet_Authorize_NoRules: with the default replaced by a policy without
// rules, or in a Set not made by Compile, nothing is allowed.
func TestSet_Authorize_NoRules(t *testing.T) {
	t.Parallel()
	empty := compileText(t, "kind: authorization\npolicy: default-authorization\n")
	for _, set := range []*Set{empty, {}} {
		for _, in := range []AuthzInput{{Caller: developer, Action: ActionAgentsList}, {Caller: root, Action: ActionAgentsDelete}} {
			for _, got := range []AuthzDecision{set.Authorize(in), set.ExplainAuthorization(in)} {
				if got.Allowed || !strings.HasPrefix(got.Reason, "no authorization rule allows ") {
					t.Errorf("%+v: %+v", in, got)
				}
			}
		}
	}
}

func TestSet_Authorize_Failures(t *testing.T) {
	t.Parallel()
	set := compileText(t, `kind: authorization
policy: claims
rules:
  - name: level-gate
    when: action == "agents.refresh"
    deny: caller.claims.level < 3
  - name: team-reads
    allow: action == "metrics.read" && caller.claims.team == "sre"
  - name: any-role-reads
    allow: action == "metrics.read" && caller.roles.exists(r, r.startsWith("metrics"))
`)
	cases := []struct {
		name   string
		caller Caller
		action string
		want   bool
		by     string
		reason string
	}{
		{"a failing deny denies, even an admin", root, ActionAgentsRefresh, false, "claims/level-gate", `policy "claims" rule "level-gate" failed: no such key: level`},
		{"a deny that holds", Caller{Roles: []string{"admin"}, Authenticated: true, Method: "jwt", Claims: map[string]any{"level": 1}}, ActionAgentsRefresh, false, "claims/level-gate", `denied by rule "level-gate" of policy "claims"`},
		{"a deny that does not hold", Caller{Roles: []string{"admin"}, Authenticated: true, Method: "jwt", Claims: map[string]any{"level": 5}}, ActionAgentsRefresh, true, DefaultAuthorizationName + "/admin", "admins may do everything"},
		{"a failing allow allows nothing", bob, ActionMetricsRead, false, "claims/team-reads", `policy "claims" rule "team-reads" failed: no such key: team`},
		{"another allow still allows", Caller{Roles: []string{"metrics-reader"}, Authenticated: true, Method: "token"}, ActionMetricsRead, true, "claims/any-role-reads", `allowed by rule "any-role-reads" of policy "claims"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, got := range []AuthzDecision{set.Authorize(AuthzInput{Caller: tc.caller, Action: tc.action}), set.ExplainAuthorization(AuthzInput{Caller: tc.caller, Action: tc.action})} {
				type decided struct {
					Allowed    bool
					By, Reason string
				}
				if diff := cmp.Diff(decided{tc.want, tc.by, tc.reason}, decided{got.Allowed, got.Policy + "/" + got.Rule, got.Reason}); diff != "" {
					t.Errorf("decision (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestSet_Authorize_CostLimit(t *testing.T) {
	t.Parallel()
	set, err := Compile([]File{{Path: "cost.yaml", Data: []byte(`kind: authorization
policy: cost
rules:
  - name: expensive
    deny: caller.roles.all(a, caller.roles.all(b, a.size() + b.size() >= 0)) && false
`)}}, Options{CostLimit: 500})
	if err != nil {
		t.Fatal(err)
	}
	if !set.authz.tracked || compileText(t).authz.tracked {
		t.Error("only expressions that could exceed the cost limit should be tracked; the built-in default cannot")
	}
	roles := make([]string, 100)
	for i := range roles {
		roles[i] = fmt.Sprint("role-", i)
	}
	got := set.Authorize(AuthzInput{Caller: Caller{Roles: roles, Method: MethodNone}, Action: ActionAgentsList})
	if got.Allowed || got.Rule != "expensive" {
		t.Errorf("allowed %v by rule %q, want denied by expensive", got.Allowed, got.Rule)
	}
	if !strings.Contains(got.Reason, "exceeded the cost limit of 500") {
		t.Errorf("an expression over the cost limit: %+v", got)
	}
	got = set.Authorize(AuthzInput{Caller: Caller{Roles: roles[:2], Method: MethodNone}, Action: ActionAgentsList})
	if !got.Allowed {
		t.Errorf("a cheap evaluation of the same rule: %+v", got)
	}
}

func TestSet_Authorize_Now(t *testing.T) {
	t.Parallel()
	set := compileText(t, `kind: authorization
policy: office-hours
rules:
  - name: nights
    deny: action == "agents.register" && now.getHours("UTC") < 6
    reason: no registrations at night
`)
	night := time.Date(2026, 3, 1, 3, 0, 0, 0, time.UTC)
	in := AuthzInput{Caller: developer, Action: ActionAgentsRegister, Now: night}
	if got := set.Authorize(in); got.Allowed || got.Reason != "no registrations at night" {
		t.Errorf("at night: %+v", got)
	}
	in.Now = night.Add(9 * time.Hour)
	if got := set.Authorize(in); !got.Allowed {
		t.Errorf("by day: %+v", got)
	}
}

// TestSet_Authorize_Concurrent runs different callers at once through the
// same set, so pooled state shared between calls would show as a wrong
// decision (and as a race under -race).
func TestSet_Authorize_Concurrent(t *testing.T) {
	t.Parallel()
	set := compileText(t, operatorPolicy)
	cases := []struct {
		caller Caller
		want   bool
	}{{alice, true}, {bob, false}, {aliceElse, false}, {olivia, true}, {anonymous, false}, {developer, true}}
	var wg sync.WaitGroup
	errs := make(chan string, len(cases))
	for _, tc := range cases {
		wg.Go(func() {
			for range 2000 {
				if got := set.Authorize(AuthzInput{Caller: tc.caller, Action: ActionDelegationsCancel, Resource: alicesDelegation}); got.Allowed != tc.want {
					errs <- fmt.Sprintf("%s: %+v", tc.caller.Principal, got)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestCompile_AuthorizationErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, src string
		want      []string
	}{
		{"misspelled caller field", "kind: authorization\npolicy: p\nrules:\n  - name: r\n    allow: '\"admin\" in caller.role'\n", []string{
			"a.yaml:5:30: allow: undefined field 'role'"}},
		{"misspelled resource field in a block", "kind: authorization\npolicy: p\nrules:\n  - name: r\n    allow: |\n      caller.authenticated &&\n        resource.owners == caller.principal\n", []string{
			"a.yaml:7:17: allow: undefined field 'owners'"}},
		{"agent is not a variable here", "kind: authorization\npolicy: p\nrules:\n  - name: r\n    deny: agent.healthy\n", []string{
			"a.yaml:5:11: deny: undeclared reference to 'agent'"}},
		{"allow that is not a bool", "kind: authorization\npolicy: p\nrules:\n  - name: r\n    allow: caller.principal\n", []string{
			`a.yaml:5:12: allow must be bool, but "caller.principal" is string`}},
		{"when that is not a bool", "kind: authorization\npolicy: p\nwhen: caller.roles\nrules: []\n", []string{
			`a.yaml:3:7: when must be bool, but "caller.roles" is list(string)`}},
		{"comparison of mismatched types", "kind: authorization\npolicy: p\nrules:\n  - name: r\n    allow: caller.authenticated == \"yes\"\n", []string{
			"a.yaml:5:33: allow: found no matching overload for '_==_' applied to '(bool, string)'"}},
		{"unknown action and resource kind", "kind: authorization\npolicy: p\nrules:\n  - name: r\n    allow: action in [\"agents.list\", \"agent.read\"] || (\"delegation.cancel\" == action && resource.kind != \"delegations\")\n", []string{
			`a.yaml:5:38: allow: unknown action "agent.read" (want one of ` + strings.Join(actions, ", ") + ")",
			`a.yaml:5:56: allow: unknown action "delegation.cancel" (want one of ` + strings.Join(actions, ", ") + ")",
			`a.yaml:5:106: allow: unknown resource kind "delegations" (want one of agent, delegation, policies, metrics)`}},
		{"rank and default do not apply", "kind: authorization\npolicy: p\ndefault: allow\nrules:\n  - name: r\n    rank: \"1\"\n", []string{
			`a.yaml:3:1: unknown key "default" in a policy (want one of policy, kind, description, when, rules)`,
			`a.yaml:5:5: rule "r" ranks; authorization rules allow or deny`}},
		{"unknown kind", "kind: authentication\npolicy: p\n", []string{
			`a.yaml:1:7: kind must be delegation or authorization, not "authentication"`}},
		{"a delegation policy cannot take the default's name", "policy: default-authorization\ndefault: allow\n", []string{
			`a.yaml:1:1: policy "default-authorization" is the built-in authorization policy's name; add kind: authorization to replace it, or rename the policy`}},
		{"names are unique across kinds", "policy: p\ndefault: allow\n---\nkind: authorization\npolicy: p\n", []string{
			`a.yaml:4:1: policy "p" is also defined at a.yaml:1`}},
		{"duplicate rule", "kind: authorization\npolicy: p\nrules:\n  - {name: r, allow: \"true\"}\n  - {name: r, deny: \"false\"}\n", []string{
			`a.yaml:5:5: rule "r" appears twice in policy "p"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Compile([]File{{Path: "a.yaml", Data: []byte(tc.src)}}, Options{})
			var diags Diagnostics
			if !errors.As(err, &diags) {
				t.Fatalf("Compile = %v, want Diagnostics", err)
			}
			if got, want := diags.Error(), strings.Join(tc.want, "\n"); got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestCompile_DelegationKind(t *testing.T) {
	t.Parallel()
	set := compileText(t, "kind: delegation\npolicy: p\ndefault: allow\nrules:\n  - name: r\n    rank: \"1\"\n")
	type kinds struct {
		Policies, Authorization []string
		Rules                   int
	}
	want := kinds{Policies: []string{"p"}, Authorization: []string{DefaultAuthorizationName}, Rules: 1}
	if diff := cmp.Diff(want, kinds{set.Policies(), set.AuthorizationPolicies(), set.Rules()}); diff != "" {
		t.Errorf("compiled (-want +got):\n%s", diff)
	}
}

// TestDefaultAuthorizationPolicy_Compiles keeps the built-in policy free of
// problems and its actions in the list.
func TestDefaultAuthorizationPolicy_Compiles(t *testing.T) {
	t.Parallel()
	set := compileText(t, strings.Replace(DefaultAuthorizationPolicy, "policy: default-authorization", "policy: copy", 1))
	if got := set.AuthorizationPolicies(); strings.Join(got, ",") != "copy,"+DefaultAuthorizationName || set.AuthorizationRules() != 10 {
		t.Errorf("policies = %v, %d rules", got, set.AuthorizationRules())
	}
}

func TestEngine_AuthorizationReloadKeepsLastGoodSet(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "authz.yaml")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(operatorPolicy)
	e, err := NewEngine([]string{dir}, Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	good := e.Set()
	st := e.Status()
	want := Status{AuthorizationPolicies: []string{"operators", DefaultAuthorizationName}, AuthorizationRules: 7}
	if diff := cmp.Diff(want, st, testcmp.Only[Status]("AuthorizationPolicies", "AuthorizationRules", "Policies"), cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("status (-want +got):\n%s", diff)
	}
	cancel := AuthzInput{Caller: olivia, Action: ActionDelegationsCancel, Resource: alicesDelegation}
	if !good.Authorize(cancel).Allowed {
		t.Fatal("the operator policy does not allow its operator")
	}

	write(strings.Replace(operatorPolicy, "caller.roles", "caller.rolse", 1))
	err = e.Reload()
	if err == nil || !strings.Contains(err.Error(), "authz.yaml:5:33: allow: undefined field 'rolse'") {
		t.Fatalf("Reload of a broken edit: %v", err)
	}
	if e.Set() != good || !e.Set().Authorize(cancel).Allowed {
		t.Error("a broken edit replaced the set in force")
	}
	st = e.Status()
	want = Status{Digest: good.Digest(), AuthorizationRules: 7, Diagnostics: []Diagnostic{{Line: 5, Col: 33}}}
	if diff := cmp.Diff(want, st, testcmp.Only[Status]("Digest", "AuthorizationRules", "Diagnostics"), cmpopts.EquateEmpty(), testcmp.Only[Diagnostic]("Line", "Col")); diff != "" {
		t.Errorf("status after a broken edit (-want +got):\n%s", diff)
	}

	write("kind: authorization\npolicy: empty\n")
	if err := e.Reload(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Status{AuthorizationRules: 5}, e.Status(), testcmp.Only[Status]("LastError", "AuthorizationRules"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("status after a good edit (-want +got):\n%s", diff)
	}
	if d := e.Set().Authorize(cancel); d.Allowed {
		t.Errorf("after a good edit the operator's cancel is still allowed: %+v", d)
	}
}

// TestSet_ExplainAuthorization_Golden explains the decisions of
// testdata/authz/inputs.yaml under testdata/authz/operators.yaml and the
// built-in default, and compares them with explain.golden.
func TestSet_ExplainAuthorization_Golden(t *testing.T) {
	t.Parallel()
	files, err := ReadFiles([]string{filepath.Join("testdata", "authz", "operators.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	files[0].Path = "operators.yaml"
	set, err := Compile(files, Options{})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "authz", "inputs.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var inputs []struct {
		Name       string `yaml:"name"`
		AuthzInput `yaml:",inline"`
	}
	if err := yaml.Unmarshal(raw, &inputs); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, in := range inputs {
		in.Now = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		dec := set.ExplainAuthorization(in.AuthzInput)
		dec.PolicySet = ""
		out, err := json.MarshalIndent(dec, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "# %s\n%s\n", in.Name, out)
	}
	golden := filepath.Join("testdata", "authz", "explain.golden")
	if *update {
		if err := os.WriteFile(golden, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./policies -update creates it)", err)
	}
	if !bytes.Equal(b.Bytes(), want) {
		t.Errorf("got:\n%s\nwant:\n%s", b.Bytes(), want)
	}
}

func TestA2AAction(t *testing.T) {
	t.Parallel()
	cases := []struct {
		method  string
		newTask bool
		want    string
	}{
		{"SendMessage", true, ActionDelegationsCreate},
		{"SendStreamingMessage", true, ActionDelegationsCreate},
		{"SendMessage", false, ActionDelegationsSteer},
		{"GetTask", false, ActionDelegationsRead},
		{"SubscribeToTask", false, ActionDelegationsRead},
		{"ListTasks", false, ActionDelegationsList},
		{"CancelTask", false, ActionDelegationsCancel},
		{"DeleteTaskPushConfig", false, ActionDelegationsSteer},
		{"GetExtendedAgentCard", false, ActionAgentsRead},
		{"Teleport", false, ""},
	}
	for _, tc := range cases {
		got, ok := A2AAction(tc.method, tc.newTask)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("A2AAction(%q, %v) = %q, %v; want %q", tc.method, tc.newTask, got, ok, tc.want)
		}
		if ok && !knownAction(got) {
			t.Errorf("A2AAction(%q) = %q, which is not in Actions", tc.method, got)
		}
	}
	if got := Actions(); len(got) != 15 || got[0] != ActionAgentsList {
		t.Errorf("Actions() = %v", got)
	}
}

// TestActionMask checks which actions a rule is run for: skipping a rule
// is only right when the rule could not have matched.
func TestActionMask(t *testing.T) {
	t.Parallel()
	if len(actions) >= 64 {
		t.Fatalf("%d actions do not fit the uint64 action masks", len(actions))
	}
	env, err := newAuthzEnv()
	if err != nil {
		t.Fatal(err)
	}
	bits := func(names ...string) uint64 {
		var m uint64
		for _, n := range names {
			m |= 1 << slices.Index(actions, n)
		}
		return m
	}
	cases := []struct {
		expr string
		want uint64
	}{
		{`caller.authenticated`, allActions},
		{`action == "agents.list"`, bits("agents.list")},
		{`"agents.list" == action && caller.authenticated`, bits("agents.list")},
		{`caller.authenticated && action in ["agents.list", "metrics.read"]`, bits("agents.list", "metrics.read")},
		{`action in ["agents.list", "metrics.read"] && action == "metrics.read"`, bits("metrics.read")},
		{`action == "agents.list" || action == "agents.read"`, bits("agents.list", "agents.read")},
		{`action == "agents.list" || caller.authenticated`, allActions},
		{`action != "agents.list"`, allActions},
		{`!(action == "agents.list")`, allActions},
		{`action.startsWith("agents.")`, allActions},
		{`action in caller.roles`, allActions},
	}
	for _, tc := range cases {
		checked, iss := env.Compile(tc.expr)
		if iss.Err() != nil {
			t.Fatal(iss.Err())
		}
		if got := actionMask(checked.NativeRep().Expr()); got != tc.want {
			t.Errorf("actionMask(%s) = %b, want %b", tc.expr, got, tc.want)
		}
	}
}

// TestSet_Authorize_Bounds: input beyond the bounds the cost estimates
// assume is denied, even on a daemon without authentication.
func TestSet_Authorize_Bounds(t *testing.T) {
	t.Parallel()
	set := compileText(t)
	long := strings.Repeat("x", AuthzMaxString+1)
	cases := []struct {
		name string
		in   AuthzInput
		want string
	}{
		{"too many roles", AuthzInput{Caller: Caller{Method: MethodNone, Roles: make([]string, AuthzMaxRoles+1)}, Action: ActionAgentsList}, "the caller has 257 roles (at most 256)"},
		{"long role", AuthzInput{Caller: Caller{Method: MethodNone, Roles: []string{long}}, Action: ActionAgentsList}, "a caller role is 4097 bytes (at most 4096)"},
		{"long principal", AuthzInput{Caller: Caller{Method: MethodNone, Principal: long}, Action: ActionAgentsList}, "the caller principal is 4097 bytes (at most 4096)"},
		{"long resource id", AuthzInput{Caller: developer, Action: ActionAgentsRead, Resource: Resource{Kind: ResourceAgent, ID: long}}, "the resource id is 4097 bytes (at most 4096)"},
	}
	for _, tc := range cases {
		if got := set.Authorize(tc.in); got.Allowed || got.Reason != "authorization input too large: "+tc.want {
			t.Errorf("%s: %+v", tc.name, got.Reason)
		}
	}
	in := AuthzInput{Caller: Caller{Method: MethodNone, Principal: long[1:], Roles: make([]string, AuthzMaxRoles)}, Action: ActionAgentsList}
	if got := set.Authorize(in); !got.Allowed {
		t.Errorf("input at the bounds: %+v", got)
	}
}
