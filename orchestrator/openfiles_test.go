package orchestrator

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestOpenFiles_WarnsWhenTheLimitHoldsLessThanMaxRunning(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		soft       uint64
		maxRunning int
		warn       bool
		holds      string
	}{
		{"room to spare", 1 << 20, 20_000, false, "holdsStreamedDelegations=1047552"},
		{"just enough", 21_024, 20_000, false, "holdsStreamedDelegations=20000"},
		{"one short", 21_023, 20_000, true, "holdsStreamedDelegations=19999"},
		{"a default soft limit", 1024, 20_000, true, "holdsStreamedDelegations=0"},
		{"no running limit", 1 << 20, 0, true, "holdsStreamedDelegations=1047552"},
		{"unlimited files", ^uint64(0), 0, true, "holdsStreamedDelegations=1099511627776"},
		{"unlimited files, a limit", ^uint64(0), 20_000, false, "holdsStreamedDelegations=1099511627776"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			noteOpenFiles(slog.New(slog.NewTextHandler(&buf, nil)), tt.soft, tt.soft, tt.maxRunning)
			out := buf.String()
			if !strings.Contains(out, "level=INFO msg=\"open files limit\"") || !strings.Contains(out, tt.holds) {
				t.Errorf("no info line with %s:\n%s", tt.holds, out)
			}
			if got := strings.Contains(out, "level=WARN"); got != tt.warn {
				t.Errorf("warned %v, want %v:\n%s", got, tt.warn, out)
			}
			if tt.warn && !strings.Contains(out, "maxRunning=") || tt.warn && !strings.Contains(out, "openFiles=") {
				t.Errorf("the warning does not name both numbers:\n%s", out)
			}
		})
	}
}
