package orchestrator

import "testing"

// TestDecodeProblem pins how the YAML decoder's messages, which name Go
// types, read in the config file's own terms.
func TestDecodeProblem(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"field nosuchkey not found in type orchestrator.Config", `unknown key "nosuchkey"`},
		{"cannot unmarshal !!str `many` into int", `"many" given, want a whole number`},
		{"cannot unmarshal !!int `3` into []string", "3 given, want a list"},
		{"cannot unmarshal !!seq into string", "a list given, want text"},
		{"cannot unmarshal !!map into []registry.Spec", "a mapping given, want a list"},
		{"cannot unmarshal !!str `yes please` into bool", `"yes please" given, want true or false`},
		{"cannot unmarshal !!seq into orchestrator.HTTPConfig", "a list given, want a mapping"},
		{"cannot unmarshal !!float `1.5` into int", "1.5 given, want a whole number"},
		{"something else entirely", "something else entirely"},
	} {
		if got := decodeProblem(tt.in); got != tt.want {
			t.Errorf("decodeProblem(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
