package policies

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata")

// TestCompile_Golden compiles every policy in testdata/check and compares
// the outcome (a summary, or every diagnostic) with NAME.golden.
func TestCompile_Golden(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join("testdata", "check", "*.yaml"))
	if len(files) == 0 {
		t.Fatal("no policies in testdata/check")
	}
	for _, path := range files {
		t.Run(filepath.Base(path), func(t *testing.T) {
			t.Parallel()
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			set, err := Compile([]File{{Path: filepath.Base(path), Data: data}}, Options{})
			var got string
			var diags Diagnostics
			switch {
			case err == nil:
				got = fmt.Sprintf("ok: %d policies, %d rules\n", len(set.Policies()), set.Rules())
			case errors.As(err, &diags):
				got = diags.Error() + "\n"
			default:
				t.Fatalf("Compile returned %T, want Diagnostics: %v", err, err)
			}
			if strings.HasPrefix(filepath.Base(path), "bad-") == strings.HasPrefix(got, "ok:") {
				t.Errorf("bad-* files must fail and others compile; got:\n%s", got)
			}
			golden := strings.TrimSuffix(path, ".yaml") + ".golden"
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test ./policies -update creates it)", err)
			}
			if !bytes.Equal([]byte(got), want) {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestCompile_DuplicatePolicyNames(t *testing.T) {
	t.Parallel()
	f := []byte("policy: same\nrules:\n  - name: a\n    allow: \"true\"\n")
	_, err := Compile([]File{{Path: "a.yaml", Data: f}, {Path: "b.yaml", Data: f}}, Options{})
	if err == nil || !strings.Contains(err.Error(), `b.yaml:1:1: policy "same" is also defined at a.yaml:1`) {
		t.Errorf("err = %v", err)
	}
}

func TestCompile_MultipleDocuments(t *testing.T) {
	t.Parallel()
	f := []byte("policy: one\ndefault: allow\n---\npolicy: two\ndefault: allow\nrules:\n  - name: r\n    rank: \"1\"\n")
	set, err := Compile([]File{{Path: "m.yaml", Data: f}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"one", "two"}, set.Policies()); diff != "" {
		t.Errorf("policies (-want +got):\n%s", diff)
	}
	if n := set.Rules(); n != 1 {
		t.Errorf("%d rules, want 1", n)
	}
	if !strings.HasPrefix(set.Digest(), "sha256:") {
		t.Errorf("digest = %q", set.Digest())
	}
}

func TestReadFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, n := range []string{"b.yaml", "a.yml", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("policy: "+n+"\ndefault: allow\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	files, err := ReadFiles([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f.Path))
	}
	if diff := cmp.Diff([]string{"a.yml", "b.yaml"}, names); diff != "" {
		t.Errorf("files read (-want +got):\n%s", diff)
	}
	if _, err := ReadFiles([]string{filepath.Join(dir, "missing.yaml")}); err == nil {
		t.Error("a missing file must be an error")
	}
}

// A directory is read at any depth: the policies in it and its
// subdirectories, not the case files beside them nor what is under a
// directory beginning with "." (a ConfigMap volume's versions).
func TestReadFiles_Recursive(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"top.yaml":                 "policy: top\ndefault: allow\n",
		"a/policy.yaml":            "policy: a\ndefault: allow\n",
		"a/cases.yaml":             "cases:\n  - name: c\n",
		"a/b/deep.yml":             "policy: deep\ndefault: allow\n",
		"a/b/notes.md":             "not yaml",
		"..2026_12_02/top.yaml":    "policy: old\ndefault: allow\n",
		".git/config.yaml":         "policy: git\n",
		"broken/policy.yaml":       "policy: [\n",
		"multi/two-documents.yaml": "policy: one\ndefault: allow\n---\npolicy: two\ndefault: allow\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	names := func(files []File) []string {
		var out []string
		for _, f := range files {
			rel, _ := filepath.Rel(dir, f.Path)
			out = append(out, filepath.ToSlash(rel))
		}
		return out
	}
	files, err := ReadFiles([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a/b/deep.yml", "a/policy.yaml", "broken/policy.yaml", "multi/two-documents.yaml", "top.yaml"}
	if got := names(files); !slices.Equal(got, want) {
		t.Errorf("ReadFiles = %v, want %v", got, want)
	}
	cases, err := ReadCaseFiles([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(cases); !slices.Equal(got, []string{"a/cases.yaml"}) {
		t.Errorf("ReadCaseFiles = %v, want [a/cases.yaml]", got)
	}
	// Named, a case file is read as it is: compiling it then says why.
	if files, err := ReadFiles([]string{filepath.Join(dir, "a", "cases.yaml")}); err != nil || len(files) != 1 {
		t.Errorf("ReadFiles(a case file) = %v, %v", names(files), err)
	}
}
