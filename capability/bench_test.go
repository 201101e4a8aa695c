package capability

import (
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
)

// BenchmarkBuild measures building a profile from a full 0.3 card, next to
// the direct call it replaces: a2a-go's dual-format card parser.
func BenchmarkBuild(b *testing.B) {
	raw := readCard(b, "v03-full.json")
	parse := a2av0.NewAgentCardParser()
	b.Run("direct-parse", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := parse(raw); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("profile", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			if _, err := Build(raw, Options{ID: "x"}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkSupports measures the capability checks policies make.
func BenchmarkSupports(b *testing.B) {
	p, err := Build(readCard(b, "v1-full.json"), Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if !p.Supports("streamingMessage") {
			b.Fatal("no streaming")
		}
	}
}
