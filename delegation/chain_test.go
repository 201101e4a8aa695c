package delegation

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

func TestChain_AttachAndReadBack(t *testing.T) {
	t.Parallel()
	c := Chain{Path: []string{"a", "b"}, Depth: 2, MaxDepth: 5, Deadline: time.Date(2026, 6, 1, 12, 0, 0, 5, time.UTC),
		Skill: "research", Requires: []string{"steerable"}, RootTask: "t-1"}
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x"))
	c.Attach(m)
	// As sent over the wire and decoded by the receiver.
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var got a2a.Message
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	back, ok, err := ChainFrom(got.Metadata)
	if err != nil || !ok || !slices.Equal(back.Path, c.Path) || back.Depth != 2 || back.MaxDepth != 5 || !back.Deadline.Equal(c.Deadline) ||
		back.Skill != "research" || !slices.Equal(back.Requires, c.Requires) || back.RootTask != "t-1" {
		t.Errorf("read back %+v, %v, %v", back, ok, err)
	}
	// In process, without a wire round trip.
	if back, _, err := ChainFrom(m.Metadata); err != nil || back.Depth != 2 {
		t.Errorf("in-process read: %+v, %v", back, err)
	}
	if _, ok, err := ChainFrom(map[string]any{}); ok || err != nil {
		t.Errorf("absent extension: ok %v err %v", ok, err)
	}
}

func TestChain_MalformedMetadata(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v    any
		want string
	}{
		{"not an object", "want an object"},
		{map[string]any{"depth": "two"}, "depth: want a number"},
		{map[string]any{"depth": 1.5}, "depth: want an integer"},
		{map[string]any{"path": []any{"a", 3.0}}, "path: item 1: want a string"},
		{map[string]any{"path": "a"}, "path: want a list of strings"},
		{map[string]any{"deadline": "tomorrow"}, "deadline"},
		{map[string]any{"depth": -1.0}, "negative depth"},
	}
	for _, tt := range tests {
		_, ok, err := ChainFrom(map[string]any{ExtensionURI: tt.v})
		if !ok || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ChainFrom(%v): ok %v, err %v; want %q", tt.v, ok, err, tt.want)
		}
	}
}

// FuzzChainFrom checks that no metadata makes ChainFrom panic and that what
// it accepts attaches and reads back the same.
func FuzzChainFrom(f *testing.F) {
	f.Add(`{"path":["a"],"depth":1,"maxDepth":8,"skill":"s","requires":["x"],"rootTask":"t","deadline":"2026-01-01T00:00:00Z"}`)
	f.Add(`{"depth":1e300}`)
	f.Add(`[1,2]`)
	f.Fuzz(func(t *testing.T, raw string) {
		var v any
		if json.Unmarshal([]byte(raw), &v) != nil {
			return
		}
		c, _, err := ChainFrom(map[string]any{ExtensionURI: v})
		if err != nil {
			return
		}
		m := &a2a.Message{}
		c.Attach(m)
		b, _ := json.Marshal(m.Metadata)
		var md map[string]any
		_ = json.Unmarshal(b, &md)
		back, _, err := ChainFrom(md)
		if err != nil || back.Depth != c.Depth || !slices.Equal(back.Path, c.Path) {
			t.Fatalf("round trip of %+v gave %+v, %v", c, back, err)
		}
	})
}
