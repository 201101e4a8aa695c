package delegation

import (
	"fmt"
	"testing"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/registry"
)

func TestAgentByID_FindsEveryAgentOfSmallAndLargePools(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 8, 9, 40} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			pool := make([]*registry.Agent, n)
			for i := range pool {
				pool[i] = &registry.Agent{Profile: &capability.Profile{ID: fmt.Sprintf("agent-%d", i)}}
			}
			index := agentIndex(pool)
			if (index != nil) != (n > 8) {
				t.Errorf("pool of %d: indexed %v, want %v", n, index != nil, n > 8)
			}
			for _, a := range pool {
				if got := agentByID(pool, index, a.ID); got != a {
					t.Errorf("agentByID(%q) = %v, want %v", a.ID, got, a)
				}
			}
			if got := agentByID(pool, index, "absent"); got != nil {
				t.Errorf("agentByID(absent) = %v, want nil", got)
			}
		})
	}
}
