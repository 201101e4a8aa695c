package orchestrator

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestNew_FailureReleasesWhatItBuilt: New that fails late, after it took
// the state directory's lock and started the embedded store, the registry
// and the push sender, releases them all: the same state directory opens
// again at once, and no goroutine is left (TestMain's goleak check).
func TestNew_FailureReleasesWhatItBuilt(t *testing.T) {
	t.Parallel()
	cfg := loadDefaults(t)
	cfg.StateDir = t.TempDir()
	cfg.Agent.SigningKey = filepath.Join(t.TempDir(), "no-such.key")
	for range 2 {
		if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), "no-such.key") {
			t.Fatalf("New with a missing signing key: err = %v, want it named", err)
		}
	}
	cfg.Agent.SigningKey = ""
	d, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New on the state directory a failed New left: %v", err)
	}
	d.Close()
}
