package policies

import "testing"

// BenchmarkAuthorize measures the built-in default policy deciding the
// cheapest request (an open daemon: the first rule allows), the dearest
// (an owner: every rule runs), a denial (a stranger: every rule runs and
// none matches), and the same with a custom policy beside the default.
// The direct call is the owner check written as Go.
func BenchmarkAuthorize(b *testing.B) {
	def := compileText(b)
	custom := compileText(b, operatorPolicy)
	owner := AuthzInput{Caller: alice, Action: ActionDelegationsCancel, Resource: alicesDelegation}
	cases := []struct {
		name string
		set  *Set
		in   AuthzInput
	}{
		{"default/open", def, AuthzInput{Caller: developer, Action: ActionDelegationsCancel, Resource: alicesDelegation}},
		{"default/admin", def, AuthzInput{Caller: root, Action: ActionAgentsDelete, Resource: Resource{Kind: ResourceAgent, ID: "x"}}},
		{"default/owner", def, owner},
		{"default/stranger", def, AuthzInput{Caller: bob, Action: ActionDelegationsCancel, Resource: alicesDelegation}},
		{"default/anonymous", def, AuthzInput{Caller: anonymous, Action: ActionAgentsList, Resource: Resource{Kind: ResourceAgent}}},
		{"custom/operator", custom, AuthzInput{Caller: olivia, Action: ActionDelegationsCancel, Resource: alicesDelegation}},
		{"custom/owner", custom, owner},
	}
	b.Run("direct-go/owner", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, r := &owner.Caller, &owner.Resource
			_ = c.Authenticated && c.Principal != "" && r.Owner == c.Principal && r.Tenant == c.Tenant
		}
	})
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tc.set.Authorize(tc.in)
			}
		})
	}
	b.Run("explain/default/owner", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			def.ExplainAuthorization(owner)
		}
	})
}
