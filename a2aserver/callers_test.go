package a2aserver

import (
	"testing"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/policies"
)

// Task users an earlier orchd stored ("tenant/principal", or the
// principal alone) are no caller's today, whatever the caller's name;
// the anonymous and development users stay theirs. A carried-on
// delegation recorded then mirrors into its task under the same name.
func TestAuth_LegacyTaskUsers(t *testing.T) {
	t.Parallel()
	callers := []policies.Caller{
		{Principal: "alice", Tenant: "acme", Method: auth.MethodToken},
		{Principal: "acme/alice", Method: auth.MethodToken},
		{Principal: "token:alice@acme", Method: auth.MethodJWT, Issuer: "https://idp.example"},
		{Principal: "legacy:acme/alice", Method: auth.MethodMTLS},
	}
	for _, old := range []string{"acme/alice", "alice", "token:alice@acme", "legacy:acme/alice"} {
		for _, c := range callers {
			if taskUser(c) == LegacyTaskUser(old) {
				t.Errorf("%+v owns the task stored for %q", c, old)
			}
		}
	}
	for _, kept := range []string{"", developmentTaskUser} {
		if got := LegacyTaskUser(kept); got != kept {
			t.Errorf("LegacyTaskUser(%q) = %q", kept, got)
		}
	}
	old := delegation.Record{Owner: &delegation.Principal{ID: "alice", Tenant: "acme"}, Upstream: &delegation.Upstream{User: "acme/alice"}}
	now := delegation.Record{Owner: &delegation.Principal{ID: "alice", Tenant: "acme", Method: auth.MethodToken}, Upstream: &delegation.Upstream{User: "token:alice@acme"}}
	dev := delegation.Record{Upstream: &delegation.Upstream{User: developmentTaskUser}}
	for _, tc := range []struct {
		rec  delegation.Record
		want string
	}{{old, "legacy:acme/alice"}, {now, "token:alice@acme"}, {dev, developmentTaskUser}} {
		if got := upstreamUser(tc.rec); got != tc.want {
			t.Errorf("upstreamUser(owner %+v, user %q) = %q, want %q", tc.rec.Owner, tc.rec.Upstream.User, got, tc.want)
		}
	}
}
