package syncbuf

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Writers in several goroutines, and a reader polling String meanwhile,
// lose no write and never interleave two: every line arrives whole.
func TestBuffer_ConcurrentWriters(t *testing.T) {
	const writers, writes = 8, 1000
	var b Buffer
	var wg sync.WaitGroup
	stop := make(chan struct{})
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		for {
			select {
			case <-stop:
				return
			default:
				_ = b.String()
			}
		}
	}()
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			line := []byte(fmt.Sprintf("writer %d line\n", w))
			for range writes {
				if n, err := b.Write(line); n != len(line) || err != nil {
					t.Errorf("Write = %d, %v; want %d, nil", n, err, len(line))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	<-readerDone

	got := b.String()
	want := 0
	for w := range writers {
		want += writes * len(fmt.Sprintf("writer %d line\n", w))
	}
	if len(got) != want {
		t.Fatalf("got %d bytes, want %d", len(got), want)
	}
	for w := range writers {
		line := fmt.Sprintf("writer %d line\n", w)
		if n := strings.Count(got, line); n != writes {
			t.Errorf("writer %d: %d whole lines, want %d", w, n, writes)
		}
	}
}

// The zero value reads as empty, and String returns a copy that later
// writes do not change.
func TestBuffer_ZeroValueAndCopy(t *testing.T) {
	var b Buffer
	if got := b.String(); got != "" {
		t.Fatalf("zero value String = %q, want empty", got)
	}
	if _, err := fmt.Fprint(&b, "one"); err != nil {
		t.Fatal(err)
	}
	first := b.String()
	if _, err := fmt.Fprint(&b, " two"); err != nil {
		t.Fatal(err)
	}
	if first != "one" {
		t.Errorf("earlier String = %q, want %q", first, "one")
	}
	if got := b.String(); got != "one two" {
		t.Errorf("String = %q, want %q", got, "one two")
	}
}
