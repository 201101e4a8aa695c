package policies

import (
	"hash/maphash"
	"math/rand/v2"
	"sync/atomic"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"

	"github.com/orchd/orchd/registry"
)

// agentCacheSets and agentCacheWays size a set's cache of agent values: at
// most 4,096 agents, eight to a slot set (one cache line of pointers), so
// that agents rarely compete for a slot until there are thousands.
const (
	agentCacheSets = 512
	agentCacheWays = 8
)

// agentCache holds candidates wrapped as CEL values, so that a candidate
// evaluated again (every delegation evaluates the registry's agents again)
// is not wrapped again: wrapping costs more than a simple rule takes to
// run, and allocates. It is keyed by the agent's pointer. The registry
// never changes a published agent, it publishes a changed copy, so a
// pointer seen again is the same agent; the value reads its fields through
// the pointer in any case, exactly as a freshly wrapped one would.
//
// The cache is a fixed table of slots, each holding an immutable entry
// swapped atomically: lookups take no lock, it never holds more than
// agentCacheSets*agentCacheWays agents, and an agent the registry replaced
// stays reachable only until its slot is reused. A Set owns its cache, so
// values are always made by the set's own type adapter.
type agentCache struct {
	seed  maphash.Seed
	slots [agentCacheSets][agentCacheWays]atomic.Pointer[agentEntry]
}

// agentEntry is one cached agent value.
type agentEntry struct {
	agent *registry.Agent
	val   ref.Val
}

func newAgentCache() *agentCache { return &agentCache{seed: maphash.MakeSeed()} }

// value returns a wrapped as a CEL value by adapter, from the cache when it
// is there.
func (c *agentCache) value(adapter types.Adapter, a *registry.Agent) ref.Val {
	h := maphash.Comparable(c.seed, a)
	set := &c.slots[h%agentCacheSets]
	for i := range set {
		if e := set[i].Load(); e != nil && e.agent == a {
			return e.val
		}
	}
	v := adapter.NativeToValue(a)
	// An empty slot if there is one, or a random one: a fixed choice could
	// have two agents evict each other at every evaluation.
	way := rand.IntN(agentCacheWays)
	for i := range set {
		if set[i].Load() == nil {
			way = i
			break
		}
	}
	set[way].Store(&agentEntry{agent: a, val: v})
	return v
}
