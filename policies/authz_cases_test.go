package policies

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestRunCases_Examples runs the authorization example and the
// tenant-isolation example (which reads the authenticated caller's tenant)
// against their cases.
func TestRunCases_Examples(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"authorization", "tenant-isolation"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join("..", "examples", "policies", name)
			files, err := ReadFiles([]string{filepath.Join(dir, "policy.yaml")})
			if err != nil {
				t.Fatal(err)
			}
			set, err := Compile(files, Options{})
			if err != nil {
				t.Fatal(err)
			}
			cases, err := ReadCaseFiles([]string{filepath.Join(dir, "cases.yaml")})
			if err != nil {
				t.Fatal(err)
			}
			results, err := RunCases(t.Context(), set, cases)
			if err != nil {
				t.Fatal(err)
			}
			if len(results) < 4 {
				t.Errorf("%d cases, want at least 4", len(results))
			}
			for _, r := range results {
				if !r.Passed() {
					t.Errorf("%s: %v", r.Name, r.Failures)
				}
			}
		})
	}
}

func TestRunCases_Authorization(t *testing.T) {
	t.Parallel()
	set := compileText(t, operatorPolicy)
	const cases = `cases:
  - name: passes
    authorize:
      caller: {principal: olivia, tenant: acme, roles: [operator], authenticated: true, method: token}
      action: delegations.cancel
      resource: {kind: delegation, id: d-1, owner: alice, tenant: acme}
    want: allow
    decidedBy: operators/cancel-tenant
  - name: wrong decision
    authorize: {caller: {principal: bob, tenant: acme, authenticated: true, method: token}, action: delegations.cancel, resource: {kind: delegation, id: d-1, owner: alice, tenant: acme}}
    want: allow
  - name: wrong rule
    authorize: {caller: {method: none}, action: agents.list}
    want: allow
    decidedBy: operators/cancel-tenant
`
	results, err := RunCases(t.Context(), set, []File{{Path: "c.yaml", Data: []byte(cases)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 3 {
		t.Fatalf("%d results", len(results))
	}
	want := [][]string{
		nil,
		{`delegations.cancel: want allow, got deny (no authorization rule allows delegations.cancel on delegation "d-1")`},
		{"decidedBy: want operators/cancel-tenant, got default-authorization/no-authentication-configured"},
	}
	for i, r := range results {
		if diff := cmp.Diff(want[i], r.Failures, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s: failures (-want +got):\n%s", r.Name, diff)
		}
		if r.Authorization == nil || r.Result != nil {
			t.Errorf("%s: authorization %v, delegation result %v; want an authorization case", r.Name, r.Authorization, r.Result)
		}
		if r.Authorization != nil && len(r.Authorization.Explain) == 0 {
			t.Errorf("%s: the decision is not explained", r.Name)
		}
	}
}

func TestRunCases_AuthorizationMistakes(t *testing.T) {
	t.Parallel()
	set := compileText(t)
	cases := []struct{ name, body, want string }{
		{"unknown action", "authorize: {action: delegation.cancel}\n    want: deny", `c.yaml: case 1: authorize: unknown action "delegation.cancel"`},
		{"want a map", "authorize: {action: agents.list}\n    want: {a: allow}", "c.yaml: case 1: an authorization case (authorize:) has no agents or winner"},
		{"want neither", "authorize: {action: agents.list}\n    want: maybe", `c.yaml: case 1: want: "maybe" is neither allow nor deny`},
		{"agents", "authorize: {action: agents.list}\n    want: deny\n    agents: [{id: a, card: x.json}]", "c.yaml: case 1: an authorization case (authorize:) has no agents"},
		{"bad decidedBy", "authorize: {action: agents.list}\n    want: deny\n    decidedBy: admin", `c.yaml: case 1: decidedBy: "admin" is not policy/rule`},
		{"scalar want in a delegation case", "want: allow", "c.yaml: case 1: want: allow|deny and decidedBy belong to authorization cases"},
		{"unknown field", "authorize: {action: agents.list, actor: bob}\n    want: deny", "field actor not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := RunCases(t.Context(), set, []File{{Path: "c.yaml", Data: []byte("cases:\n  - " + tc.body + "\n")}})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
		})
	}
}
