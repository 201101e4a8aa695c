package store

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/orchd/orchd/internal/helperproc"
)

// helpers are the processes store's tests start from this test binary to
// kill with SIGKILL mid-write; each gets the state directory.
var helpers = helperproc.Commands{
	// crash-writer puts records as fast as it can, printing each id
	// acknowledged (TestStore_CrashLosesNothing).
	"crash-writer": crashChild,
	// seq-writer puts records, recording its streams' sequences every
	// 50ms (TestOpen_RefusesLostSequencesAfterACrash).
	"seq-writer": seqChild,
}

// TestMain runs a helper process when the test binary was started as one,
// and otherwise the tests, failing them if any goroutine outlives them:
// every store, NATS server and connection a test opens must be closed by
// it.
func TestMain(m *testing.M) {
	helpers.Main()
	goleak.VerifyTestMain(m)
}
