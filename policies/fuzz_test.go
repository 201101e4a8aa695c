package policies

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/orchd/orchd/registry"
)

// FuzzCompile feeds arbitrary policy files to Compile, seeded with every
// file in testdata/check and the example policies. Compile must return a
// set or Diagnostics, never panic; a set must evaluate without panicking.
//
//	go test ./policies -run '^$' -fuzz FuzzCompile -fuzztime 60s
func FuzzCompile(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "check", "*.yaml"))
	examples, _ := filepath.Glob(filepath.Join("..", "examples", "policies", "*", "policy.yaml"))
	for _, p := range append(seeds, examples...) {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	agent := testAgent(f, "a", "v1-full.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		set, err := Compile([]File{{Path: "f.yaml", Data: data}}, Options{})
		if err != nil {
			var diags Diagnostics
			if !errors.As(err, &diags) || len(diags) == 0 {
				t.Fatalf("Compile error %T %v is not Diagnostics", err, err)
			}
			return
		}
		res := set.Evaluate(t.Context(), []*registry.Agent{agent}, Input{})
		if len(res.Decisions) != 1 {
			t.Fatalf("decisions = %+v", res.Decisions)
		}
	})
}
