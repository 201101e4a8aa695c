// Package limitedfile reads files that must be small, such as keys,
// certificates, secrets and token lists, without ever reading more than a
// bound: a file that grew or was replaced by something large is refused
// instead of filling memory.
package limitedfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
)

// ErrTooLarge is returned, wrapped with the path and the limit, for a file
// larger than the limit.
var ErrTooLarge = errors.New("file too large")

// ErrNotRegular is returned, wrapped with the path, for a file that is not
// a regular file (a named pipe, a device, a directory): reading a named
// pipe waits for a writer, perhaps forever.
var ErrNotRegular = errors.New("not a regular file")

// Read returns the contents of the file at path, or an error wrapping
// ErrTooLarge when it holds more than limit bytes, or ErrNotRegular when
// it is not a regular file (symbolic links are followed). It reads at
// most limit+1 bytes, whatever the file's size says, and never waits for
// a writer: the file is opened without blocking and checked before it is
// read.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w (%s)", path, ErrNotRegular, st.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w: over %d bytes", path, ErrTooLarge, limit)
	}
	return b, nil
}
