package delegation_test

import (
	"testing"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/delegation/storetest"
)

// TestMemoryStore_Contract runs the store contract suite on the memory
// store.
func TestMemoryStore_Contract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(*testing.T) delegation.Store { return delegation.NewMemoryStore(0) })
}
