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
)

// ErrTooLarge is returned, wrapped with the path and the limit, for a file
// larger than the limit.
var ErrTooLarge = errors.New("file too large")

// Read returns the contents of the file at path, or an error wrapping
// ErrTooLarge when it holds more than limit bytes. It reads at most
// limit+1 bytes, whatever the file's size says.
func Read(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: %w: over %d bytes", path, ErrTooLarge, limit)
	}
	return b, nil
}
