//go:build unix

package limitedfile

import (
	"errors"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRead_NotRegular refuses a named pipe with no writer, at once, as it
// does a directory: reading one would wait for a writer, perhaps forever.
func TestRead_NotRegular(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "tokens.yaml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	for _, path := range []string{fifo, dir} {
		done := make(chan error, 1)
		go func() {
			_, err := Read(path, 1024)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, ErrNotRegular) {
				t.Errorf("%s: err = %v, want ErrNotRegular", path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Read still waits after 10s", path)
		}
	}
}
