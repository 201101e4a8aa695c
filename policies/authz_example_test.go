package policies_test

import (
	"fmt"

	"github.com/orchd/orchd/policies"
)

// ExampleSet_Authorize adds an operator rule to the built-in default and
// decides three requests about alice's delegation.
func ExampleSet_Authorize() {
	set, err := policies.Compile([]policies.File{{Path: "operators.yaml", Data: []byte(`
kind: authorization
policy: operators
rules:
  - name: cancel-tenant
    allow: '"operator" in caller.roles && action == "delegations.cancel" && resource.tenant == caller.tenant'
    reason: operators cancel their tenant's delegations
`)}}, policies.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	alices := policies.Resource{Kind: policies.ResourceDelegation, ID: "d-1", Owner: "alice", Tenant: "acme", OwnerMethod: "token"}
	for _, c := range []policies.Caller{
		{Principal: "alice", Tenant: "acme", Authenticated: true, Method: "token"},
		{Principal: "bob", Tenant: "acme", Authenticated: true, Method: "token"},
		{Principal: "olivia", Tenant: "acme", Roles: []string{"operator"}, Authenticated: true, Method: "mtls"},
	} {
		d := set.Authorize(policies.AuthzInput{Caller: c, Action: policies.ActionDelegationsCancel, Resource: alices})
		fmt.Printf("%s: %v %s/%s: %s\n", c.Principal, d.Allowed, d.Policy, d.Rule, d.Reason)
	}
	// Output:
	// alice: true default-authorization/own-delegations: the caller owns the delegation
	// bob: false /: no authorization rule allows delegations.cancel on delegation "d-1"
	// olivia: true operators/cancel-tenant: operators cancel their tenant's delegations
}

// ExampleCompile_authorization shows an authorization policy's load errors:
// a misspelled field and an action orchd does not know.
func ExampleCompile_authorization() {
	_, err := policies.Compile([]policies.File{{Path: "authz.yaml", Data: []byte(`kind: authorization
policy: typos
rules:
  - name: role
    allow: '"admin" in caller.role'
  - name: action
    deny: action == "delegation.cancel"
`)}}, policies.Options{})
	fmt.Println(err)
	// Output:
	// authz.yaml:5:30: allow: undefined field 'role'
	// authz.yaml:7:21: deny: unknown action "delegation.cancel" (want one of agents.list, agents.read, agents.register, agents.delete, agents.refresh, agents.contain, delegations.create, delegations.list, delegations.read, delegations.cancel, delegations.steer, policies.read, policies.reload, policies.evaluate, metrics.read)
}
