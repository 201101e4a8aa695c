package orchestrator

import (
	"fmt"
	"regexp"
	"strings"
)

// The YAML decoder's type errors name Go types ("field x not found in
// type orchestrator.Config", "cannot unmarshal !!str `many` into int").
// decodeProblem says the same in the config file's own terms, for the
// person who wrote it.

var (
	unknownField = regexp.MustCompile("^field (.+) not found in type .+$")
	wrongType    = regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (.+)$")
)

// decodeProblem rewrites one of the decoder's messages (the part after
// "line N: "); a message it does not know is returned as it is.
func decodeProblem(msg string) string {
	if m := unknownField.FindStringSubmatch(msg); m != nil {
		return fmt.Sprintf("unknown key %q", m[1])
	}
	m := wrongType.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	got := map[string]string{"str": "text", "int": "a whole number", "float": "a number", "bool": "a boolean",
		"seq": "a list", "map": "a mapping", "null": "empty", "binary": "binary data", "timestamp": "a timestamp"}[m[1]]
	if got == "" {
		got = m[1]
	}
	switch {
	case m[1] == "str":
		got = fmt.Sprintf("%q", m[2])
	case m[2] != "":
		got = m[2]
	}
	return fmt.Sprintf("%s given, want %s", got, wantOf(m[3]))
}

// wantOf names what a Go type holds in YAML's terms.
func wantOf(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["):
		return "a mapping"
	case goType == "string":
		return "text"
	case goType == "bool":
		return "true or false"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	}
	return "a mapping" // a section: a struct
}
