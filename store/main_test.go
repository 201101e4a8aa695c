package store

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them: every
// store, NATS server and connection a test opens must be closed by it.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
