//go:build !unix

package orchestrator

import (
	"fmt"
	"os"
	"path/filepath"
)

// lockStateDir opens the state directory's lock file. Without flock there
// is no lock on this platform: two daemons must not share a directory.
func lockStateDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	return os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o600)
}
