package a2aserver

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// acceptProtoNames lets A2A 0.3 HTTP+JSON clients that write proto-JSON
// with the proto field names reach a2a-go's 0.3 REST handler, which reads
// only the JSON names. Proto3 JSON parsers must accept both spellings, and
// the Python a2a-sdk's 0.3 client sends the proto ones
// ({"request": {"message_id": …}}); see docs/interop.md. Request bodies are
// rewritten to the JSON names; free-form values (metadata, a data part's
// data) are left exactly as sent. Bodies that need no rewriting, and those
// that are not JSON objects, pass through untouched for the handler to
// judge. The body limits have bounded its size and depth before.
func acceptProtoNames(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			http.Error(w, "read request body: "+err.Error(), http.StatusBadRequest)
			return
		}
		if renamed, ok := jsonNames(body); ok {
			body = renamed
			r.ContentLength = int64(len(body))
			r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

// jsonNames rewrites a proto-JSON request body to the JSON field names and
// reports whether anything changed.
func jsonNames(body []byte) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers pass through as written
	var doc map[string]any
	if err := dec.Decode(&doc); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false // trailing data: not one JSON object, leave it to the handler
	}
	changed := false
	if m, ok := doc["request"]; ok {
		// SendMessageRequest.request is the message (json_name "message").
		if _, clash := doc["message"]; !clash {
			delete(doc, "request")
			doc["message"] = m
			changed = true
		}
	}
	if !renameKeys(doc) && !changed {
		return nil, false
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, false
	}
	return out, true
}

// renameKeys renames snake_case keys to lowerCamelCase in v and in what
// it holds, except under free-form fields, and reports whether it renamed
// any.
func renameKeys(v any) bool {
	changed := false
	switch v := v.(type) {
	case map[string]any:
		renames := map[string]string{}
		for k, child := range v {
			if k == "metadata" || k == "data" {
				continue // free-form: keys are the sender's
			}
			if renameKeys(child) {
				changed = true
			}
			if c := lowerCamel(k); c != k && !reservedName(c) {
				if _, clash := v[c]; !clash {
					renames[k] = c
				}
			}
		}
		targets := map[string]int{}
		for _, to := range renames {
			targets[to]++
		}
		for from, to := range renames {
			if targets[to] > 1 {
				continue // two spellings of one name: leave both for the handler to judge
			}
			v[to] = v[from]
			delete(v, from)
			changed = true
		}
	case []any:
		for _, child := range v {
			if renameKeys(child) {
				changed = true
			}
		}
	}
	return changed
}

// reservedName reports whether a key may not be made by renaming: the
// free-form fields, whose contents would already have been rewritten, and
// the proto name of the message, which jsonNames renames first.
func reservedName(k string) bool { return k == "metadata" || k == "data" || k == "request" }

// lowerCamel turns a proto field name (message_id) into its JSON name
// (messageId).
func lowerCamel(s string) string {
	if !strings.Contains(s, "_") {
		return s
	}
	var b strings.Builder
	up := false
	for _, c := range s {
		switch {
		case c == '_':
			up = true
		case up && 'a' <= c && c <= 'z':
			b.WriteRune(c - 'a' + 'A')
			up = false
		default:
			b.WriteRune(c)
			up = false
		}
	}
	return b.String()
}
