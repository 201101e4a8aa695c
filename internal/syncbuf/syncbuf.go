// Package syncbuf is a byte buffer that several goroutines may write to
// while another reads it: tests hand it to slog handlers or to a command
// as its output, and read what was written while the writers still run.
package syncbuf

import (
	"bytes"
	"fmt"
	"io"
	"sync"
)

var (
	_ io.Writer    = (*Buffer)(nil)
	_ fmt.Stringer = (*Buffer)(nil)
)

// Buffer is a bytes.Buffer guarded by a mutex, so Write and String are safe
// for concurrent use. Its zero value is an empty buffer ready to use; it
// must not be copied after first use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p to the buffer. Each call is appended whole, never
// interleaved with another; the error is always nil.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns a copy of everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
