package policies

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzAuthorize feeds arbitrary policy files, callers and actions through
// Compile and Authorize, seeded with testdata/fuzz/FuzzAuthorize, the
// authorization policies in testdata and the example. Compile must return
// a set or Diagnostics; Authorize must decide with a reason, never panic,
// and agree with ExplainAuthorization.
//
//	go test ./policies -run '^$' -fuzz FuzzAuthorize -fuzztime 60s
func FuzzAuthorize(f *testing.F) {
	for _, p := range []string{
		filepath.Join("testdata", "authz", "operators.yaml"),
		filepath.Join("..", "examples", "policies", "authorization", "policy.yaml"),
	} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "alice", "acme", "delegations.cancel", "alice")
	}
	f.Add([]byte(DefaultAuthorizationPolicy), "", "", "agents.list", "")
	f.Add([]byte(operatorPolicy), "olivia", "acme", "delegations.cancel", "bob")
	f.Fuzz(func(t *testing.T, data []byte, principal, tenant, action, owner string) {
		set, err := Compile([]File{{Path: "f.yaml", Data: data}}, Options{})
		if err != nil {
			var diags Diagnostics
			if !errors.As(err, &diags) || len(diags) == 0 {
				t.Fatalf("Compile error %T %v is not Diagnostics", err, err)
			}
			return
		}
		for _, c := range []Caller{
			{Principal: principal, Tenant: tenant, Roles: []string{principal}, Authenticated: true, Method: "token"},
			{Principal: principal, Method: MethodAnonymous},
			{Method: MethodNone},
		} {
			in := AuthzInput{Caller: c, Action: action, Resource: Resource{Kind: ResourceDelegation, ID: "d", Owner: owner, Tenant: tenant}}
			got, ex := set.Authorize(in), set.ExplainAuthorization(in)
			if got.Reason == "" {
				t.Fatalf("Authorize(%+v) = %+v: no reason", in, got)
			}
			if diff := cmp.Diff(got, ex, cmpopts.IgnoreFields(AuthzDecision{}, "Explain")); diff != "" {
				t.Fatalf("ExplainAuthorization decided otherwise than Authorize (-Authorize +ExplainAuthorization):\n%s", diff)
			}
		}
	})
}
