package main

import (
	"log/slog"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/orchd/orchd/internal/syncbuf"
)

// TestSetMemoryLimit_GOMEMLIMITWins checks that a GOMEMLIMIT the operator
// set is left as it is, whatever the cgroup says, and that nothing is
// logged as set from the cgroup.
func TestSetMemoryLimit_GOMEMLIMITWins(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "300MiB")
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	debug.SetMemoryLimit(300 << 20) // what the runtime read from it at start
	var buf syncbuf.Buffer
	setMemoryLimit(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if got := debug.SetMemoryLimit(-1); got != 300<<20 {
		t.Errorf("memory limit = %d, want GOMEMLIMIT's %d", got, 300<<20)
	}
	if strings.Contains(buf.String(), "set from the cgroup") {
		t.Errorf("logged a limit from the cgroup over GOMEMLIMIT: %s", buf.String())
	}
}

// TestSetMemoryLimit_Off checks that AUTOMEMLIMIT=off sets no limit.
func TestSetMemoryLimit_Off(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("AUTOMEMLIMIT", "off")
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })
	setMemoryLimit(slog.New(slog.DiscardHandler))
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("memory limit = %d with AUTOMEMLIMIT=off, want it left at %d", got, before)
	}
}
