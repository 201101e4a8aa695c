package a_test

import (
	"testing"

	"example.com/fuzzmod/a"
)

// Fuzz_External is a target in the external test package.
func Fuzz_External(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) { _ = a.Two(b) })
}
