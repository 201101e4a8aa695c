package deep

import "testing"

// FuzzDeep passes on every input.
func FuzzDeep(f *testing.F) {
	f.Add("seed")
	f.Fuzz(func(t *testing.T, s string) {})
}
