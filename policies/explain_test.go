package policies

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/orchd/orchd/registry"
)

// TestSet_Evaluate_ExplanationGolden explains the decisions of
// testdata/explain/rank.yaml about three agents and compares them with
// rank.golden: a rank rule that applied matched, with its rank (absent
// when 0); one whose when was false neither matched nor ranked.
func TestSet_Evaluate_ExplanationGolden(t *testing.T) {
	t.Parallel()
	files, err := ReadFiles([]string{filepath.Join("testdata", "explain", "rank.yaml")})
	if err != nil {
		t.Fatal(err)
	}
	files[0].Path = "rank.yaml"
	set, err := Compile(files, Options{})
	if err != nil {
		t.Fatal(err)
	}
	agents := []*registry.Agent{testAgent(t, "full", "v1-full.json"), testAgent(t, "steady", "v1-steerable-only.json"), testAgent(t, "plain", "v1-minimal.json")}
	res := set.Evaluate(t.Context(), agents, Input{Request: Request{Skill: "research", Metadata: map[string]any{"weekend": "no"}}})
	res.PolicySet = ""
	got, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "explain", "rank.golden")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test ./policies -update creates it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
