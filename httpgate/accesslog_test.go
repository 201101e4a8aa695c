package httpgate

import (
	"strings"
	"testing"
)

func TestBounded(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", maxAccessField) // two bytes each
	for _, tc := range []struct{ in, want string }{
		{"/v1/agents", "/v1/agents"},
		{strings.Repeat("a", maxAccessField), strings.Repeat("a", maxAccessField)},
		{strings.Repeat("a", maxAccessField+1), strings.Repeat("a", maxAccessField) + "…"},
		{long, long[:maxAccessField] + "…"},
		{"a" + long, "a" + long[:maxAccessField-2] + "…"},
	} {
		if got := bounded(tc.in); got != tc.want {
			t.Errorf("bounded(%d bytes) = %d bytes %q…, want %d bytes", len(tc.in), len(got), got[:min(8, len(got))], len(tc.want))
		}
	}
}
