package docrefs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// ref matches a code reference in Markdown: a backticked Go file path,
// optionally followed by a declared name or a line number.
var ref = regexp.MustCompile("`([A-Za-z0-9_./-]+\\.go)(?::([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)?|[0-9]+))?`")

func TestDocs_ReferencesExist(t *testing.T) {
	t.Parallel()
	docs := markdownFiles(t)
	if len(docs) == 0 {
		t.Fatal("no Markdown files found")
	}
	checked := 0
	for _, doc := range docs {
		b, err := os.ReadFile(filepath.Join(root, doc))
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range ref.FindAllStringSubmatch(line, -1) {
				path, anchor := m[1], m[2]
				if !strings.Contains(path, "/") {
					// A bare file name is one beside the doc, in a
					// package's README; elsewhere it is a link's text.
					if !hasGo(filepath.Dir(doc)) {
						continue
					}
					path = filepath.Join(filepath.Dir(doc), path)
				}
				if !ours(path) {
					continue
				}
				checked++
				if why := check(path, anchor); why != "" {
					t.Errorf("%s:%d: %s", doc, i+1, why)
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no reference to this repository's code was found; is the pattern right?")
	}
}

// TestCheck_Refuses shows that each kind of stale reference is caught.
func TestCheck_Refuses(t *testing.T) {
	t.Parallel()
	tests := []struct{ path, anchor, want string }{
		{"internal/docrefs/docrefs_test.go", "", ""},
		{"internal/docrefs/docrefs_test.go", "check", ""},
		{"internal/docrefs/docrefs_test.go", "TestCheck_Refuses", ""},
		{"internal/docrefs/docrefs_test.go", "root", ""},
		{"internal/docrefs/docrefs_test.go", "3", ""},
		{"internal/docrefs/gone.go", "", "no such file"},
		{"internal/docrefs/docrefs_test.go", "notDeclared", "declares no notDeclared"},
		{"internal/docrefs/docrefs_test.go", "fakeType.check", "declares no fakeType.check"},
		{"internal/docrefs/docrefs_test.go", "100000", "has fewer than 100000 lines"},
	}
	for _, tt := range tests {
		got := check(tt.path, tt.anchor)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("check(%q, %q) = %q, want %q", tt.path, tt.anchor, got, tt.want)
		}
	}
	if hasGo("docs") || !hasGo("internal/docrefs") {
		t.Error("hasGo: wrong about which directories hold Go files")
	}
	if ours("a2asrv/handler.go") || ours("internal/sse/sse.go") || !ours("delegation/x.go") {
		t.Error("ours: wrong about which paths are this repository's")
	}
}

// markdownFiles lists the repository's Markdown files, relative to root,
// leaving out installed packages and hidden directories.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ours reports whether path names a file of this repository: its
// directory exists here. Other projects' files (a2a-go's a2asrv/, say)
// are named in the docs too, and are not checked.
func ours(path string) bool {
	fi, err := os.Stat(filepath.Join(root, filepath.Dir(path)))
	return err == nil && fi.IsDir()
}

// hasGo reports whether dir, relative to root, holds Go files.
func hasGo(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(root, dir, "*.go"))
	return len(m) > 0
}

// check says what is wrong with a reference, or returns "" when the file
// exists and declares the name (or has the line) the anchor gives.
func check(path, anchor string) string {
	full := filepath.Join(root, path)
	b, err := os.ReadFile(full)
	if err != nil {
		return path + ": no such file"
	}
	if anchor == "" {
		return ""
	}
	if n, err := strconv.Atoi(anchor); err == nil {
		if strings.Count(string(b), "\n") < n {
			return path + " has fewer than " + anchor + " lines"
		}
		return ""
	}
	f, err := parser.ParseFile(token.NewFileSet(), full, b, parser.SkipObjectResolution)
	if err != nil {
		return path + ": " + err.Error()
	}
	if !declares(f, anchor) {
		return path + " declares no " + anchor
	}
	return ""
}

// declares reports whether f declares name: a function, a type, a
// variable or constant, or, for "Type.Method", a method or a field of Type.
func declares(f *ast.File, name string) bool {
	typ, member, isMember := strings.Cut(name, ".")
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if !isMember && d.Recv == nil && d.Name.Name == name {
				return true
			}
			if isMember && d.Recv != nil && receiver(d.Recv.List[0].Type) == typ && d.Name.Name == member {
				return true
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.TypeSpec:
					if !isMember && s.Name.Name == name {
						return true
					}
					if isMember && s.Name.Name == typ && hasField(s.Type, member) {
						return true
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if !isMember && n.Name == name {
							return true
						}
					}
				}
			}
		}
	}
	return false
}

// receiver names a method's receiver type, without pointer or type
// parameters.
func receiver(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.StarExpr:
		return receiver(e.X)
	case *ast.IndexExpr:
		return receiver(e.X)
	case *ast.IndexListExpr:
		return receiver(e.X)
	case *ast.Ident:
		return e.Name
	}
	return ""
}

// hasField reports whether a struct or interface type has a field or
// method named name.
func hasField(e ast.Expr, name string) bool {
	var fields *ast.FieldList
	switch e := e.(type) {
	case *ast.StructType:
		fields = e.Fields
	case *ast.InterfaceType:
		fields = e.Methods
	default:
		return false
	}
	for _, f := range fields.List {
		for _, n := range f.Names {
			if n.Name == name {
				return true
			}
		}
	}
	return false
}
