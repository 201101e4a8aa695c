package main

import "testing"

// TestMisdelivered counts the steers an agent did not take once each, in
// the order sent.
func TestMisdelivered(t *testing.T) {
	for _, tc := range []struct {
		name  string
		taken map[string][]int
		want  int
	}{
		{"every one once in order", map[string][]int{"a": {1, 2, 3}, "b": {1, 2, 3}}, 0},
		{"one task never steered", map[string][]int{"a": {1, 2, 3}}, 3},
		{"one lost", map[string][]int{"a": {1, 3}, "b": {1, 2, 3}}, 2},
		{"two swapped", map[string][]int{"a": {2, 1, 3}, "b": {1, 2, 3}}, 2},
		{"one twice", map[string][]int{"a": {1, 2, 2, 3}, "b": {1, 2, 3}}, 2},
		{"one more at the end", map[string][]int{"a": {1, 2, 3, 3}, "b": {1, 2, 3}}, 1},
	} {
		if got := misdelivered([]string{"a", "b"}, tc.taken, 3); got != tc.want {
			t.Errorf("%s: misdelivered = %d, want %d", tc.name, got, tc.want)
		}
	}
}
