package a2aserver

import (
	"mime"
	"strings"
	"testing"
)

// FuzzAcceptedMediaType checks the Content-Type check on any value: it
// does not panic, what it accepts is empty or one of the two JSON types,
// and its refusal message stays short.
func FuzzAcceptedMediaType(f *testing.F) {
	for _, s := range []string{"", "application/json", "application/json; charset=utf-8", "application/a2a+json", "text/plain", "application/json; ===", "APPLICATION/JSON", strings.Repeat("x", 500)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		if acceptedMediaType(ct) && strings.TrimSpace(ct) != "" {
			mt, _, err := mime.ParseMediaType(ct)
			if err != nil || (mt != "application/json" && mt != "application/a2a+json") {
				t.Fatalf("accepted %q (%q, %v)", ct, mt, err)
			}
		}
		if n := len(mediaTypeMessage(ct)); n > 1000 {
			t.Fatalf("message for %q is %d bytes", ct, n)
		}
	})
}
