package main

import (
	"maps"
	"slices"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/steering"
)

// TestMisdelivered counts the steers an agent did not take once each, in
// the order sent.
func TestMisdelivered(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taken map[string][]int
		want  int
		bad   []string
	}{
		{"every one once in order", map[string][]int{"a": {1, 2, 3}, "b": {1, 2, 3}}, 0, nil},
		{"one task never steered", map[string][]int{"a": {1, 2, 3}}, 3, []string{"b"}},
		{"one lost", map[string][]int{"a": {1, 3}, "b": {1, 2, 3}}, 2, []string{"a"}},
		{"two swapped", map[string][]int{"a": {2, 1, 3}, "b": {1, 2, 3}}, 2, []string{"a"}},
		{"one twice", map[string][]int{"a": {1, 2, 2, 3}, "b": {1, 2, 3}}, 2, []string{"a"}},
		{"one more at the end", map[string][]int{"a": {1, 2, 3}, "b": {1, 2, 3, 3}}, 1, []string{"b"}},
	} {
		got, bad := misdelivered([]string{"a", "b"}, tc.taken, 3)
		if got != tc.want || !slices.Equal(bad, tc.bad) {
			t.Errorf("%s: misdelivered = %d, %q; want %d, %q", tc.name, got, bad, tc.want, tc.bad)
		}
	}
}

// TestSignalsTaken_CountsEveryAcknowledgedSignal checks an agent counts
// and logs the signals its work stopped before handling: those taken in
// the same batch after the one it stopped on (the work canceled while it
// acknowledged a steer), as well as those handled.
func TestSignalsTaken_CountsEveryAcknowledgedSignal(t *testing.T) {
	sig := func(c steering.Control, text string) steering.Signal {
		return steering.Signal{Control: c, Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))}
	}
	for _, tc := range []struct {
		name     string
		stopAt   int // the signal take stops on; -1: none
		wantGoOn bool
	}{
		{"handled all", -1, true},
		{"stopped on the first", 0, false},
		{"stopped on the second", 1, false},
	} {
		var taken signalsTaken
		sigs := []steering.Signal{sig(steering.Steer, "steer a 1"), sig(steering.Steer, "steer a 2"),
			sig(steering.Interrupt, "interrupt 3"), sig(steering.Steer, "steer a 3")}
		handled := 0
		goOn := taken.handle(sigs, func(steering.Signal) bool {
			handled++
			return handled-1 != tc.stopAt
		})
		if goOn != tc.wantGoOn {
			t.Errorf("%s: handle = %v, want %v", tc.name, goOn, tc.wantGoOn)
		}
		if n := taken.n.Load(); n != int64(len(sigs)) {
			t.Errorf("%s: %d signals counted, want %d", tc.name, n, len(sigs))
		}
		if got := taken.steers.steers; !maps.EqualFunc(got, map[string][]int{"a": {1, 2, 3}}, slices.Equal) {
			t.Errorf("%s: steers kept %v, want a: 1 2 3", tc.name, got)
		}
	}
}
