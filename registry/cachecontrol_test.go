package registry

import (
	"net/http"
	"testing"
	"time"
)

func TestParseCachePolicy(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header http.Header
		want   cachePolicy
	}{
		{"none", http.Header{}, cachePolicy{swr: -1, sie: -1}},
		{"max-age", http.Header{"Cache-Control": {"public, max-age=60"}}, cachePolicy{lifetime: time.Minute, hasLifetime: true, swr: -1, sie: -1}},
		{"quoted and spaced", http.Header{"Cache-Control": {` Max-Age = "30" `}}, cachePolicy{lifetime: 30 * time.Second, hasLifetime: true, swr: -1, sie: -1}},
		{"no-cache wins", http.Header{"Cache-Control": {"max-age=60", "no-cache"}}, cachePolicy{noCache: true, hasLifetime: true, swr: -1, sie: -1}},
		{"stale windows", http.Header{"Cache-Control": {"max-age=5, stale-while-revalidate=30, stale-if-error=600, must-revalidate"}},
			cachePolicy{mustRevalidate: true, lifetime: 5 * time.Second, hasLifetime: true, swr: 30 * time.Second, sie: 10 * time.Minute}},
		{"malformed max-age ignored", http.Header{"Cache-Control": {"max-age=soon"}}, cachePolicy{swr: -1, sie: -1}},
		{"expires", http.Header{"Date": {"Thu, 01 Jan 2026 00:00:00 GMT"}, "Expires": {"Thu, 01 Jan 2026 00:02:00 GMT"}},
			cachePolicy{lifetime: 2 * time.Minute, hasLifetime: true, swr: -1, sie: -1}},
		{"max-age beats expires", http.Header{"Cache-Control": {"max-age=1"}, "Expires": {"Thu, 01 Jan 2026 00:02:00 GMT"}},
			cachePolicy{lifetime: time.Second, hasLifetime: true, swr: -1, sie: -1}},
		{"age", http.Header{"Age": {"7"}}, cachePolicy{age: 7 * time.Second, swr: -1, sie: -1}},
		{"no-store", http.Header{"Cache-Control": {"no-store"}}, cachePolicy{noStore: true, swr: -1, sie: -1}},
	}
	for _, tt := range tests {
		if got := parseCachePolicy(tt.header, now); got != tt.want {
			t.Errorf("%s: got %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// FuzzParseCachePolicy checks that no header value panics or yields a
// negative lifetime.
func FuzzParseCachePolicy(f *testing.F) {
	for _, s := range []string{"max-age=60", "no-cache, no-store", "s-maxage=9999999999999", "max-age=-1", `max-age="`, ",,=,"} {
		f.Add(s, "Thu, 01 Jan 2026 00:02:00 GMT", "5")
	}
	f.Fuzz(func(t *testing.T, cc, expires, age string) {
		p := parseCachePolicy(http.Header{"Cache-Control": {cc}, "Expires": {expires}, "Age": {age}}, time.Now())
		if p.lifetime < 0 || p.age < 0 {
			t.Fatalf("negative duration in %+v", p)
		}
	})
}
