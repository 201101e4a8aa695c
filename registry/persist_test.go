package registry

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestSavedCache_RoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
	}{
		{"none", http.Header{}},
		{"max-age", http.Header{"Cache-Control": {"max-age=300"}}},
		{"zero windows", http.Header{"Cache-Control": {"max-age=60, stale-while-revalidate=0, stale-if-error=0"}}},
		{"stale windows and age", http.Header{"Cache-Control": {"max-age=60, stale-while-revalidate=30, stale-if-error=600"}, "Age": {"12"}}},
		{"no-cache must-revalidate", http.Header{"Cache-Control": {"no-cache, must-revalidate"}}},
		{"no-store", http.Header{"Cache-Control": {"no-store"}}},
		{"expires", http.Header{"Expires": {now.Add(time.Hour).Format(http.TimeFormat)}, "Date": {now.Format(http.TimeFormat)}}},
		{"expired", http.Header{"Expires": {"0"}}},
	}
	for _, tt := range tests {
		want := parseCachePolicy(tt.header, now)
		b, err := json.Marshal(savedCache(want))
		if err != nil {
			t.Fatal(err)
		}
		var sc SavedCache
		if err := json.Unmarshal(b, &sc); err != nil {
			t.Fatal(err)
		}
		if got := sc.policy(); got != want {
			t.Errorf("%s: stored as %s, read back %+v, want %+v", tt.name, b, got, want)
		}
	}
}

func TestValidID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   string
		want bool
	}{
		{"a", true},
		{"research.agent_v1-x", true},
		{"a..b.", true},
		{strings.Repeat("x", 64), true},
		{"", false},
		{".a", false},
		{"-a", false},
		{"a=b", false},
		{"a/b", false},
		{"a b", false},
		{strings.Repeat("x", 65), false},
	}
	for _, tt := range tests {
		if got := ValidID(tt.id); got != tt.want {
			t.Errorf("ValidID(%q) = %v, want %v", tt.id, got, tt.want)
		}
	}
}
