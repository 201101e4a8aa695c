package delegation

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// lineageMetadata is a status's metadata carrying l, as an orchd sends it.
func lineageMetadata(l Lineage) map[string]any {
	return map[string]any{ExtensionURI: map[string]any{"delegation": "d-1", lineageKey: l.metadata()}}
}

func hopsOf(n int, name string) []LineageHop {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	out := make([]LineageHop, n)
	for i := range out {
		out[i] = LineageHop{Orchd: "orchd-" + string(rune('a'+i%26)), Name: name, Agent: "agent", AgentName: name, CardDigest: "sha256:00",
			TaskID: "task", State: "TASK_STATE_WORKING", CreatedAt: at, UpdatedAt: at.Add(time.Second)}
	}
	return out
}

func TestLineageFrom_Bounds(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("n", MaxLineageText+1)
	wide := hopsOf(MaxLineageHops, strings.Repeat("n", MaxLineageText))
	one, err := json.Marshal(wide[0])
	if err != nil {
		t.Fatal(err)
	}
	fit := MaxLineageBytes / len(one) // hops of that size within the byte bound
	for _, tt := range []struct {
		name      string
		md        map[string]any
		ok        bool
		hops      int
		truncated bool
	}{
		{name: "no extension entry", md: map[string]any{"other": 1}},
		{name: "an entry without a lineage", md: map[string]any{ExtensionURI: map[string]any{"delegation": "d-1"}}},
		{name: "hops not a list", md: map[string]any{ExtensionURI: map[string]any{lineageKey: map[string]any{"hops": "x"}}}},
		{name: "a hop without its agent", md: map[string]any{ExtensionURI: map[string]any{lineageKey: map[string]any{"hops": []any{map[string]any{"orchd": "b"}}}}}},
		{name: "a hop with a number for a name", md: map[string]any{ExtensionURI: map[string]any{lineageKey: map[string]any{"hops": []any{map[string]any{"orchd": "b", "agent": "c", "name": 7}}}}}},
		{name: "two hops", md: lineageMetadata(Lineage{Hops: hopsOf(2, "x")}), ok: true, hops: 2},
		{name: "truncated below stays truncated", md: lineageMetadata(Lineage{Hops: hopsOf(2, "x"), Truncated: true}), ok: true, hops: 2, truncated: true},
		{name: "over the hop limit", md: lineageMetadata(Lineage{Hops: hopsOf(MaxLineageHops+4, "x")}), ok: true, hops: MaxLineageHops, truncated: true},
		{name: "a field over the text limit ends the list", md: lineageMetadata(Lineage{Hops: append(hopsOf(2, "x"), hopsOf(2, long)...)}), ok: true, hops: 2, truncated: true},
		{name: "over the byte limit", md: lineageMetadata(Lineage{Hops: wide}), ok: true, hops: fit, truncated: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, ok := LineageFrom(tt.md)
			if ok != tt.ok || len(l.Hops) != tt.hops || l.Truncated != tt.truncated {
				t.Fatalf("LineageFrom = %d hops, truncated %v, ok %v; want %d, %v, %v", len(l.Hops), l.Truncated, ok, tt.hops, tt.truncated, tt.ok)
			}
		})
	}
}

// A lineage written as metadata reads back the same.
func TestLineageFrom_ReadsWhatMetadataWrites(t *testing.T) {
	t.Parallel()
	want := Lineage{Hops: hopsOf(3, "research hub")}
	want.Hops[2].TaskID, want.Hops[2].CreatedAt, want.Hops[2].UpdatedAt = "", time.Time{}, time.Time{}
	got, ok := LineageFrom(lineageMetadata(want))
	if !ok {
		t.Fatal("not read")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
	if !want.equal(&got) || (&want).equal(&Lineage{Hops: hopsOf(2, "research hub")}) {
		t.Error("equal does not tell lineages apart")
	}
}
