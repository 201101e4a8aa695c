package a2aserver

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestInterrupt_AcknowledgedAnywayWhenNeverReleased bounds the wait for
// a2a-go to let go of orchd's execution: past the settle time the
// interrupt is acknowledged anyway, with a warning naming the task.
func TestInterrupt_AcknowledgedAnywayWhenNeverReleased(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	s := steerRoute{x: &executor{log: slog.New(slog.NewTextHandler(&logged, nil))}, settle: 20 * time.Millisecond}
	began := time.Now()
	s.waitReleased(t.Context(), "t-held", make(chan struct{}))
	if took := time.Since(began); took < s.settle || took > 5*time.Second {
		t.Errorf("waited %v, want about %v", took, s.settle)
	}
	for _, want := range []string{"level=WARN", "task=t-held", "already in progress"} {
		if out := logged.String(); !strings.Contains(out, want) {
			t.Errorf("log = %q, want it to say %q", out, want)
		}
	}
	released := make(chan struct{})
	close(released)
	logged.Reset()
	s.settle = time.Minute
	if s.waitReleased(t.Context(), "t-done", released); logged.Len() != 0 {
		t.Errorf("released execution logged %q", logged.String())
	}
}
