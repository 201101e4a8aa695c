package policies

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Diagnostic is one problem found while loading policies, with its place
// in the YAML file. Line and Col are 1-based; 0 means unknown.
type Diagnostic struct {
	// File is the policy file.
	File string `json:"file"`
	// Line and Col locate the problem.
	Line int `json:"line"`
	Col  int `json:"col"`
	// Msg says what is wrong.
	Msg string `json:"message"`
}

// String returns "file:line:col: message".
func (d Diagnostic) String() string {
	switch {
	case d.Line == 0:
		return fmt.Sprintf("%s: %s", d.File, d.Msg)
	case d.Col == 0:
		return fmt.Sprintf("%s:%d: %s", d.File, d.Line, d.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", d.File, d.Line, d.Col, d.Msg)
}

// Diagnostics is every problem found in a set of policy files, sorted by
// file and position. It is the error Compile returns.
type Diagnostics []Diagnostic //nolint:errname // a list of problems, named for what it holds; renaming would break callers

// Error lists the diagnostics one per line.
func (ds Diagnostics) Error() string {
	lines := make([]string, len(ds))
	for i, d := range ds {
		lines[i] = d.String()
	}
	return strings.Join(lines, "\n")
}

func (ds Diagnostics) sort() {
	slices.SortStableFunc(ds, func(a, b Diagnostic) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.Line, b.Line), cmp.Compare(a.Col, b.Col))
	})
}
