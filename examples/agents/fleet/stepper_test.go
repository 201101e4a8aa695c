package fleet

import (
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// The directions followed are bounded in number and length, and the
// progress a task's artifact kept reads back, from a store that keeps Go
// values or JSON.
func TestProgress_FollowAndRead(t *testing.T) {
	var p progress
	for i := range maxDirections + 3 {
		p.follow(strings.Repeat("x", i))
	}
	p.follow(strings.Repeat("é", maxDirectionRunes+5))
	if len(p.following) != maxDirections || p.following[0] != strings.Repeat("x", 4) ||
		p.following[maxDirections-1] != strings.Repeat("é", maxDirectionRunes)+"…" {
		t.Errorf("following %q", p.following)
	}
	for _, tc := range []struct {
		name string
		meta map[string]any
		want progress
	}{
		{"go values", map[string]any{"step": 3, "following": []any{"a", "b"}}, progress{step: 3, following: []string{"a", "b"}}},
		{"json", map[string]any{"step": float64(4), "following": []any{"a"}}, progress{step: 4, following: []string{"a"}}},
		{"none", nil, progress{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := &a2a.Task{Artifacts: []*a2a.Artifact{{ID: "other"}, {ID: "progress", Metadata: tc.meta}}}
			got := progressOf(task)
			if got.step != tc.want.step || strings.Join(got.following, "|") != strings.Join(tc.want.following, "|") {
				t.Errorf("progressOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}
