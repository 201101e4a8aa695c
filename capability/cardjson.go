package capability

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// jsonKind names the JSON type of a decoded value for error messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number, float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return fmt.Sprintf("%T", v)
}

// fields reads typed fields out of a decoded JSON document and remembers the
// first type error, with its path, so the reading code stays linear. A JSON
// null counts as absent, as many card generators emit nulls for unset
// optional fields.
type fields struct {
	err *CardError
}

// join appends key to a JSON path.
func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// index appends an array index to a JSON path.
func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func (f *fields) fail(path, format string, args ...any) {
	if f.err == nil {
		f.err = &CardError{Path: path, Msg: fmt.Sprintf(format, args...)}
	}
}

func (f *fields) wrongType(path, want string, got any) {
	f.fail(path, "want %s, got %s", want, jsonKind(got))
}

// str returns obj[key] as a string; absent and null give "".
func (f *fields) str(obj map[string]any, key, path string) string {
	v, ok := obj[key]
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		f.wrongType(join(path, key), "string", v)
	}
	return s
}

// requiredStr is str for a field that must be present and non-empty.
func (f *fields) requiredStr(obj map[string]any, key, path string) string {
	s := f.str(obj, key, path)
	if s == "" && f.err == nil {
		f.fail(join(path, key), "required field is missing or empty")
	}
	return s
}

// boolean returns obj[key] as a bool; absent and null give false.
func (f *fields) boolean(obj map[string]any, key, path string) bool {
	v, ok := obj[key]
	if !ok || v == nil {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		f.wrongType(join(path, key), "boolean", v)
	}
	return b
}

// object returns obj[key] as an object; absent and null give nil.
func (f *fields) object(obj map[string]any, key, path string) map[string]any {
	v, ok := obj[key]
	if !ok || v == nil {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		f.wrongType(join(path, key), "object", v)
	}
	return m
}

// array returns obj[key] as an array; absent and null give nil.
func (f *fields) array(obj map[string]any, key, path string) []any {
	v, ok := obj[key]
	if !ok || v == nil {
		return nil
	}
	a, ok := v.([]any)
	if !ok {
		f.wrongType(join(path, key), "array", v)
	}
	return a
}

// objects returns obj[key] as an array of objects.
func (f *fields) objects(obj map[string]any, key, path string) []map[string]any {
	arr := f.array(obj, key, path)
	out := make([]map[string]any, 0, len(arr))
	for i, v := range arr {
		m, ok := v.(map[string]any)
		if !ok {
			f.wrongType(index(join(path, key), i), "object", v)
			return nil
		}
		out = append(out, m)
	}
	return out
}

// strs returns obj[key] as an array of strings.
func (f *fields) strs(obj map[string]any, key, path string) []string {
	arr := f.array(obj, key, path)
	if len(arr) == 0 {
		return nil
	}
	out := make([]string, 0, len(arr))
	for i, v := range arr {
		s, ok := v.(string)
		if !ok {
			f.wrongType(index(join(path, key), i), "string", v)
			return nil
		}
		out = append(out, s)
	}
	return out
}

// either returns the first of keys present in obj, for fields cards spell in
// camelCase or snake_case.
func either(obj map[string]any, keys ...string) string {
	for _, k := range keys {
		if v, ok := obj[k]; ok && v != nil {
			return k
		}
	}
	return keys[0]
}

// nestingDepth returns how deeply arrays and objects nest in a JSON text,
// without decoding it, so absurd nesting is refused before the decoder
// recurses into it.
func nestingDepth(b []byte) int {
	depth, max := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			if depth > max {
				max = depth
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return max
}
