package orchestrator

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// FuzzLoadConfig checks that no config file makes LoadConfig panic, seeded
// with the embedded defaults and the example configs.
func FuzzLoadConfig(f *testing.F) {
	f.Add(DefaultsYAML())
	examples, _ := filepath.Glob(filepath.Join("..", "examples", "*.yaml"))
	for _, p := range examples {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("registry:\n  timeout: 1s\nagents:\n  - url: http://a.example.com\n"))
	f.Add([]byte("listen: [\n"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body []byte) {
		p := filepath.Join(dir, "c.yaml")
		if err := os.WriteFile(p, body, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadConfig(p)
		if err == nil {
			_ = cfg.RegistryConfig()
		}
	})
}

// FuzzJSONNames checks the proto-name rewriting of 0.3 HTTP+JSON request
// bodies, which come from any client: no input panics, a rewritten body is
// JSON, a second pass changes nothing, and free-form values survive as
// sent.
func FuzzJSONNames(f *testing.F) {
	f.Add([]byte(`{"request": {"message_id": "m1", "role": "ROLE_USER", "content": [{"text": "hi"}], "metadata": {"a_b": 1}}}`))
	f.Add([]byte(`{"message": {"messageId": "m1", "content": [{"data": {"data": {"x_y": [1, 2.5e300]}}}]}, "configuration": {"history_length": 3}}`))
	f.Add([]byte(`{"a_": {"_b": {"c__d": null}}, "request": 7, "message": "x"}`))
	f.Add([]byte(`[{"a_b": 1}]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		out, changed := jsonNames(body)
		if !changed {
			return
		}
		var doc map[string]any
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("rewrote %q into invalid JSON %q: %v", body, out, err)
		}
		if keys(out) != keys(body) {
			t.Fatalf("rewriting %q into %q lost or added keys", body, out)
		}
		if again, changed := jsonNames(out); changed {
			t.Fatalf("a second pass changed %q into %q", out, again)
		}
		var in map[string]any
		if err := json.Unmarshal(body, &in); err == nil {
			if m, ok := in["request"].(map[string]any); ok && in["message"] == nil {
				in = m
				doc, _ = doc["message"].(map[string]any)
			}
			if md, ok := in["metadata"]; ok && doc != nil && !reflect.DeepEqual(md, doc["metadata"]) {
				t.Fatalf("metadata changed: %v → %v", md, doc["metadata"])
			}
		}
	})
}

// keys counts the object keys in a JSON document, or -1 if it is not JSON.
func keys(b []byte) int {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return -1
	}
	var count func(any) int
	count = func(v any) int {
		n := 0
		switch v := v.(type) {
		case map[string]any:
			for _, c := range v {
				n += 1 + count(c)
			}
		case []any:
			for _, c := range v {
				n += count(c)
			}
		}
		return n
	}
	return count(v)
}
