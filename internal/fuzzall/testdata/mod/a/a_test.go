package a

import "testing"

// FuzzTwo fails on any input that is not two bytes long; the fuzzer
// finds one at once.
func FuzzTwo(f *testing.F) {
	f.Add([]byte("ok"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if !Two(b) {
			t.Fatalf("%q is not two bytes long", b)
		}
	})
}

// Fuzz alone is a target too.
func Fuzz(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {})
}

// fuzzHelper is not a target.
func fuzzHelper(f *testing.F) {}

type s struct{}

// FuzzMethod is not a target: it is a method.
func (s) FuzzMethod(f *testing.F) {}
