package capability

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzBuild feeds arbitrary bytes to Build, seeded with every card in
// testdata/cards. Build must either return a profile or a *CardError, never
// panic, and a profile it returns must be usable.
//
//	go test ./capability -run '^$' -fuzz FuzzBuild -fuzztime 60s
func FuzzBuild(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "cards", "*.json"))
	if err != nil {
		f.Fatal(err)
	}
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, legacy bool) {
		p, err := Build(raw, Options{Legacy: legacy})
		if err != nil {
			if !errors.Is(err, ErrInvalidCard) {
				t.Fatalf("error %v is not an ErrInvalidCard", err)
			}
			return
		}
		if p.Name == "" || p.Digest == "" {
			t.Fatalf("incomplete profile: %+v", p)
		}
		if _, err := p.AgentCard(); err != nil {
			t.Fatalf("Build accepted a card a2a-go cannot read: %v", err)
		}
		if !p.Supports(SendMessage) {
			t.Fatal("profile lacks the implicit tier")
		}
		if !p.ClientCompatible && p.IncompatibleReason == "" {
			t.Fatal("incompatible profile without a reason")
		}
		d := Diff(p, p)
		if !d.Empty() {
			t.Fatalf("a profile drifted from itself: %+v", d)
		}
	})
}
