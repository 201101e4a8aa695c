package delegation

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestChain_AttachAndReadBack(t *testing.T) {
	t.Parallel()
	c := Chain{Path: []string{"a", "b"}, Names: []string{"gateway", "hub"}, Depth: 2, MaxDepth: 5, Deadline: time.Date(2026, 6, 1, 12, 0, 0, 5, time.UTC),
		Skill: "research", Requires: []string{"steerable"}, RootTask: "t-1", Verified: []string{"orchd-gw", ""}, OnBehalfOf: &Principal{ID: "alice", Tenant: "acme"}}
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
	if err != nil || !ok {
		t.Fatalf("read back: ok %v, err %v", ok, err)
	}
	if diff := cmp.Diff(c, back); diff != "" {
		t.Errorf("read back (-sent +read):\n%s", diff)
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
		{map[string]any{"path": []any{"a"}, "names": []any{"x", "y"}}, "2 names for a path of 1"},
		{map[string]any{"names": "x"}, "names: want a list of strings"},
		{map[string]any{"path": []any{"a"}, "verified": []any{"x", "y"}}, "2 verified identities for a path of 1"},
		{map[string]any{"onBehalfOf": "alice"}, "onBehalfOf: want an object"},
		{map[string]any{"onBehalfOf": map[string]any{"tenant": "acme"}}, "onBehalfOf: principal"},
		{map[string]any{"onBehalfOf": map[string]any{"principal": "alice", "tenant": 3.0}}, "onBehalfOf: want a string"},
	}
	for _, tt := range tests {
		_, ok, err := ChainFrom(map[string]any{ExtensionURI: tt.v})
		if !ok || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ChainFrom(%v): ok %v, err %v; want %q", tt.v, ok, err, tt.want)
		}
	}
}

func TestChain_Enter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      Chain
		self    string
		display string
		path    []string
		names   []string
		err     string
	}{
		{name: "root", in: Chain{}, self: "orchd-1", display: "gateway", path: []string{"orchd-1"}, names: []string{"gateway"}},
		{name: "second hop", in: Chain{Path: []string{"orchd-1"}, Names: []string{"gateway"}, Depth: 1},
			self: "orchd-2", display: "hub", path: []string{"orchd-1", "orchd-2"}, names: []string{"gateway", "hub"}},
		{name: "a hop that sent no names", in: Chain{Path: []string{"old"}, Depth: 1},
			self: "orchd-2", display: "hub", path: []string{"old", "orchd-2"}, names: []string{"", "hub"}},
		{name: "cycle by identity, names differ", in: Chain{Path: []string{"orchd-1", "orchd-2"}, Names: []string{"gateway", "hub"}, Depth: 2},
			self: "orchd-1", display: "renamed", err: "delegation cycle: renamed (orchd-1) is already in the path gateway (orchd-1) → hub (orchd-2) → renamed (orchd-1)"},
		{name: "same display name, different identities", in: Chain{Path: []string{"orchd-1"}, Names: []string{"orchd"}, Depth: 1},
			self: "orchd-2", display: "orchd", path: []string{"orchd-1", "orchd-2"}, names: []string{"orchd", "orchd"}},
		{name: "too deep", in: Chain{Path: []string{"a"}, Depth: 1, MaxDepth: 1}, self: "b", display: "b",
			err: "another hop from b would be hop 2 of at most 1 (path a → b)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.in.Enter(tt.self, tt.display)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("Enter = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Enter: %v", err)
			}
			type entered struct {
				Path, Names []string
				Depth       int
			}
			want := entered{tt.path, tt.names, tt.in.Depth + 1}
			if diff := cmp.Diff(want, entered{got.Path, got.Names, got.Depth}, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Enter (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzChainFrom checks that no metadata makes ChainFrom panic and that what
// it accepts attaches and reads back the same.
func FuzzChainFrom(f *testing.F) {
	f.Add(`{"path":["a"],"depth":1,"maxDepth":8,"skill":"s","requires":["x"],"rootTask":"t","deadline":"2026-01-01T00:00:00Z"}`)
	f.Add(`{"path":["a","b"],"names":["gateway"],"depth":2}`)
	f.Add(`{"depth":1e300}`)
	f.Add(`[1,2]`)
	f.Add(`{"path":["a","b"],"verified":["orchd-a",""],"onBehalfOf":{"principal":"alice","tenant":"acme"}}`)
	f.Add(`{"path":["a"],"verified":["x","y"],"onBehalfOf":{"tenant":"acme"}}`)
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
		if err != nil {
			t.Fatalf("round trip of %+v: %v", c, err)
		}
		// The identities and how far the work came survive the trip.
		kept := cmpopts.IgnoreFields(Chain{}, "MaxDepth", "Deadline", "Skill", "Requires", "RootTask")
		if diff := cmp.Diff(c, back, kept, cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip (-attached +read):\n%s", diff)
		}
	})
}

func TestChain_ReceivedVerifiesTheCallersEntry(t *testing.T) {
	t.Parallel()
	// The caller claims its own entry was verified as "root"; the receiver
	// replaces that with whom it authenticated.
	c := Chain{Path: []string{"a", "b"}, Verified: []string{"orchd-a", "root"}}
	got := c.Received("orchd-b")
	if want := []string{"orchd-a", "orchd-b"}; !slices.Equal(got.Verified, want) {
		t.Errorf("verified %q, want %q", got.Verified, want)
	}
	if c.Verified[1] != "root" {
		t.Error("Received changed the chain it was called on")
	}
	// A chain whose hops verified nothing yet gets its last entry.
	bare := (Chain{Path: []string{"a", "b"}}).Received("orchd-b")
	if !slices.Equal(bare.Verified, []string{"", "orchd-b"}) {
		t.Errorf("verified %q", bare.Verified)
	}
	next, err := bare.Enter("c", "")
	if err != nil || !slices.Equal(next.Verified, []string{"", "orchd-b", ""}) {
		t.Errorf("entered: %q, %v", next.Verified, err)
	}
	if got := (Chain{}).Received("x"); got.Verified != nil {
		t.Errorf("root chain verified %q", got.Verified)
	}
}
