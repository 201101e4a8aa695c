package steering_test

import (
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocSnippets_AreFromTheExample checks that every code snippet of the
// package documentation (doc.go) and of docs/steering.md's section for Go
// agent authors is copied from example_test.go, which go test compiles
// and runs: a snippet that no longer matches the Example, line for line
// (indentation aside), fails here instead of misleading a reader.
func TestDocSnippets_AreFromTheExample(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	example := trimmed(string(src))
	for _, tc := range []struct {
		name     string
		snippets []string
		want     int // snippets the document holds, so none drops out unseen
	}{
		{"doc.go", packageDocCode(t, "doc.go"), 3},
		{"docs/steering.md", markdownGoBlocks(t, filepath.Join("..", "docs", "steering.md"), "## For Go agent authors"), 2},
	} {
		if len(tc.snippets) != tc.want {
			t.Errorf("%s holds %d code snippets, want %d", tc.name, len(tc.snippets), tc.want)
		}
		for i, snippet := range tc.snippets {
			if line := unmatched(trimmed(snippet), example); line != "" {
				t.Errorf("%s snippet %d is not in example_test.go; from this line on it differs:\n%s\nthe snippet:\n%s", tc.name, i+1, line, snippet)
			}
		}
	}
}

// trimmed splits text into lines without their leading and trailing
// blanks, dropping the blank lines at either end.
func trimmed(text string) []string {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimSpace(l)
	}
	return lines
}

// unmatched returns "" when snippet occurs as consecutive lines of src,
// and otherwise the first line of snippet the closest occurrence misses.
func unmatched(snippet, src []string) string {
	best := 0
	for i := range src {
		n := 0
		for n < len(snippet) && i+n < len(src) && src[i+n] == snippet[n] {
			n++
		}
		if n == len(snippet) {
			return ""
		}
		best = max(best, n)
	}
	return snippet[best]
}

// packageDocCode returns the code blocks of the package comment in file.
func packageDocCode(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	var p comment.Parser
	var code []string
	for _, block := range p.Parse(f.Doc.Text()).Content {
		if c, ok := block.(*comment.Code); ok {
			code = append(code, c.Text)
		}
	}
	return code
}

// markdownGoBlocks returns the ```go blocks of the markdown file's section
// that starts with the heading line.
func markdownGoBlocks(t *testing.T, file, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s has no section %q", file, heading)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	var blocks []string
	for {
		_, rest, ok := strings.Cut(section, "```go\n")
		if !ok {
			return blocks
		}
		block, after, ok := strings.Cut(rest, "```")
		if !ok {
			t.Fatalf("%s: a ```go block is not closed", file)
		}
		blocks = append(blocks, block)
		section = after
	}
}
