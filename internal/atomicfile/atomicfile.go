// Package atomicfile replaces small files so that a crash leaves the old
// contents or the new, never part of either: the state directory's files
// that are rewritten in place.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write replaces path with b, readable by its owner only: written to a
// temporary file beside it, synced, renamed over path, and the directory
// synced.
func Write(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp) // the write failed already
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		_ = d.Sync() // best effort: not every file system syncs a directory
		_ = d.Close()
	}
	return nil
}
