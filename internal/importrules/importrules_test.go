package importrules

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// module is the module path every package of orchd's starts with.
const module = "github.com/orchd/orchd"

// fronts are the packages that each translate one protocol to the
// delegation engine. orchestrator mounts them side by side.
var fronts = []string{"a2aserver", "httpapi", "console", "mcpserver"}

// wiring is the package that builds the daemon from its parts.
const wiring = "orchestrator"

// mayImportWiring reports whether the package at dir (relative to the
// module root, slash-separated) may import orchestrator: the programs and
// the test helpers.
func mayImportWiring(dir string) bool {
	for _, root := range []string{"cmd", "examples", "tests", "internal"} {
		if dir == root || strings.HasPrefix(dir, root+"/") {
			return true
		}
	}
	return false
}

// violations lists what breaks the import rules in imports, which maps
// each package directory (relative to the module root) to the module's
// packages its non-test files import, by directory too.
func violations(imports map[string][]string) []string {
	var out []string
	for dir, deps := range imports {
		for _, dep := range deps {
			switch {
			case slices.Contains(fronts, dir) && slices.Contains(fronts, dep):
				out = append(out, fmt.Sprintf("%s imports %s: a front never imports another front; share through httpgate or a library package", dir, dep))
			case dep == wiring && dir != wiring && !mayImportWiring(dir):
				out = append(out, fmt.Sprintf("%s imports %s: only the programs (cmd/, examples/) and the test helpers import the daemon's wiring", dir, dep))
			case slices.Contains(fronts, dep) && !slices.Contains(fronts, dir) && dir != wiring && !mayImportWiring(dir):
				out = append(out, fmt.Sprintf("%s imports the front %s: library packages import no front; orchestrator mounts them", dir, dep))
			}
		}
	}
	slices.Sort(out)
	return out
}

// moduleImports reads the imports of the non-test Go files of every
// package under root, keeping those of the module's own packages.
func moduleImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	imports := map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(rel)
		for _, spec := range f.Imports {
			ip, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return err
			}
			if dep, ok := strings.CutPrefix(ip, module+"/"); ok && !slices.Contains(imports[dir], dep) {
				imports[dir] = append(imports[dir], dep)
			}
		}
		if _, ok := imports[dir]; !ok {
			imports[dir] = nil
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return imports
}

// TestImportRules checks the module's own imports.
func TestImportRules(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(root, "go.mod")); err != nil || !strings.Contains(string(b), "module "+module+"\n") {
		t.Fatalf("%s is not the root of %s: %v", root, module, err)
	}
	imports := moduleImports(t, root)
	for _, p := range append(slices.Clone(fronts), wiring, "httpgate", "delegation") {
		if _, ok := imports[p]; !ok {
			t.Fatalf("no package %s under %s: the rules name packages that are gone", p, root)
		}
	}
	for _, v := range violations(imports) {
		t.Error(v)
	}
}

// TestViolations checks that each rule catches what it forbids, and lets
// through what it allows.
func TestViolations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		imports map[string][]string
		want    string // "" for none
	}{
		{"front imports a front", map[string][]string{"a2aserver": {"httpapi"}}, "a2aserver imports httpapi"},
		{"console imports the API", map[string][]string{"console": {"httpapi"}}, "console imports httpapi"},
		{"front imports the wiring", map[string][]string{"httpapi": {"orchestrator"}}, "httpapi imports orchestrator"},
		{"library imports the wiring", map[string][]string{"delegation": {"orchestrator"}}, "delegation imports orchestrator"},
		{"plumbing imports a front", map[string][]string{"httpgate": {"a2aserver"}}, "httpgate imports the front a2aserver"},
		{"library imports a front", map[string][]string{"store": {"console"}}, "store imports the front console"},
		{"fronts import the plumbing and libraries", map[string][]string{"a2aserver": {"httpgate", "delegation", "store"}, "httpapi": {"httpgate", "registry"}}, ""},
		{"the wiring imports the fronts", map[string][]string{"orchestrator": {"a2aserver", "httpapi", "console", "httpgate"}}, ""},
		{"programs and helpers import anything", map[string][]string{"cmd/orchd": {"orchestrator", "httpapi"}, "internal/orchdtest": {"orchestrator"}, "examples/chain": {"orchestrator", "httpapi"}}, ""},
	} {
		got := violations(tc.imports)
		switch {
		case tc.want == "" && len(got) > 0:
			t.Errorf("%s: %q, want none", tc.name, got)
		case tc.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tc.want)):
			t.Errorf("%s: %q, want one starting %q", tc.name, got, tc.want)
		}
	}
}
