package outagelog

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/orchd/orchd/internal/syncbuf"
	"github.com/orchd/orchd/internal/testclock"
	"github.com/orchd/orchd/internal/testwait"
)

// TestOutageLog_AnOutageInAFewLines fails the writes of many delegations
// as a store election does and checks the log says so in a line, then a
// count every summaryEvery, then one line when writes go through again;
// and that other failures keep a line each.
func TestOutageLog_AnOutageInAFewLines(t *testing.T) {
	logs := &syncbuf.Buffer{}
	clock := testclock.New(time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC))
	errUnavailable := errors.New("state store unavailable")
	unavailable := func(err error) bool { return errors.Is(err, errUnavailable) }
	w := New(slog.New(slog.NewTextHandler(logs, nil)), clock.Now, slog.LevelError, "delegations' writes", "each is tried again with its delegation's next write or by itself", unavailable)
	down := fmt.Errorf("append event 3 to delegation d1: %w: context deadline exceeded", errUnavailable)
	lines := func() []string { return strings.Split(strings.TrimSpace(logs.String()), "\n") }

	w.Succeeded() // no outage: nothing to say
	for i := range 3000 {
		w.Failed("store delegation event", down, "delegation", fmt.Sprintf("d%d", i), "seq", 3)
	}
	if got := lines(); len(got) != 1 || !strings.Contains(got[0], "delegation=d0") || !strings.Contains(got[0], "level=ERROR") {
		t.Fatalf("3,000 failures at once logged %q, want the first alone", got)
	}
	clock.Advance(summaryEvery)
	w.Failed("store delegation event", down, "delegation", "d1", "seq", 4)
	if got := lines(); len(got) != 2 || !strings.Contains(got[1], "failed=3000") || !strings.Contains(got[1], "failedSinceStart=3001") {
		t.Fatalf("a failure %s into the outage logged %q, want a count", summaryEvery, got)
	}
	// Writes to the streams that have a leader go through meanwhile.
	clock.Advance(time.Second)
	w.Failed("store delegation event", down, "delegation", "d2", "seq", 4)
	w.Succeeded()
	clock.Advance(settleAfter / 2)
	w.Failed("store delegation event", down, "delegation", "d3", "seq", 4)
	w.Succeeded()
	if got := lines(); len(got) != 2 {
		t.Fatalf("writes going through between failures logged %q, want nothing more", got[2:])
	}
	clock.Advance(settleAfter)
	w.Succeeded()
	w.Succeeded()
	if got := lines(); len(got) != 3 || !strings.Contains(got[2], "level=WARN") || !strings.Contains(got[2], "failed=3003") || !strings.Contains(got[2], "lasted=11.5s") {
		t.Fatalf("the end of the outage logged %q, want one line with the count", got)
	}
	// The last operation of an outage may come right after a failure:
	// the outage ends once settleAfter passed with no failure after it.
	w.Failed("store delegation event", down, "delegation", "d3", "seq", 5)
	clock.Advance(time.Millisecond)
	w.Succeeded()
	clock.Advance(settleAfter)
	testwait.Until(t, 5*time.Second, "the end of an outage whose last write came right after a failure", func() bool {
		return len(lines()) == 5
	})
	if got := lines(); !strings.Contains(got[3], "delegation=d3") || !strings.Contains(got[4], "go through again") || !strings.Contains(got[4], "failed=1 ") {
		t.Fatalf("a short outage logged %q, want its first failure and its end", got[3:])
	}
	w.Close()

	// A new outage is told again; a failure that is not the store's
	// absence is told each time.
	w.Failed("store delegation event", down, "delegation", "d3", "seq", 5)
	bad := errors.New("record too large")
	w.Failed("store delegation record", bad, "delegation", "d4", "seq", 5)
	w.Failed("store delegation record", bad, "delegation", "d5", "seq", 5)
	got := lines()[5:]
	if len(got) != 3 || !strings.Contains(got[0], "delegation=d3") || !strings.Contains(got[1], "delegation=d4") || !strings.Contains(got[2], "delegation=d5") {
		t.Fatalf("after the outage, logged %q", got)
	}
}
