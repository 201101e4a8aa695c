package a2aserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// FuzzJSONNames checks the proto-name rewriting of 0.3 HTTP+JSON request
// bodies, which come from any client. No input panics, and a body it
// rewrites
//   - is still JSON, which encoding/json (as the handler uses it) decodes
//     exactly when it decoded the body as sent: numbers pass through as
//     written, so one out of float64's range (2.5e700) fails both;
//   - holds the same keys, compared without underscores or case (so the
//     proto and the JSON name of a field match), and the same values,
//     numbers compared as written;
//   - keeps every free-form value (metadata, a data part's data) exactly
//     as sent;
//   - is left alone by a second pass.
//
// testdata/fuzz/FuzzJSONNames holds inputs that once failed here.
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
		if !json.Valid(out) {
			t.Fatalf("rewrote %q into invalid JSON %q", body, out)
		}
		if sent, rewritten := decodes(body), decodes(out); sent != rewritten {
			t.Fatalf("encoding/json decodes %q: %v, but its rewrite %q: %v", body, sent, out, rewritten)
		}
		sent, sentFree := contents(exactly(t, body))
		got, gotFree := contents(exactly(t, out))
		if !slices.Equal(sent, got) {
			t.Fatalf("rewriting %q into %q changed what it holds:\n sent %q\n got  %q", body, out, sent, got)
		}
		if !slices.Equal(sentFree, gotFree) {
			t.Fatalf("rewriting %q into %q changed free-form values:\n sent %q\n got  %q", body, out, sentFree, gotFree)
		}
		if again, changed := jsonNames(out); changed {
			t.Fatalf("a second pass changed %q into %q", out, again)
		}
	})
}

// decodes reports whether encoding/json decodes b, as the 0.3 handler
// would.
func decodes(b []byte) bool {
	var v any
	return json.Unmarshal(b, &v) == nil
}

// exactly decodes b with numbers kept as written.
func exactly(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// contents lists, sorted, what v holds apart from its shape: every key,
// spelled without underscores or case (the proto and the JSON name of a
// field look alike then, and request stands for message), and every scalar
// value, numbers as written. Apart from those it lists every free-form
// value (a metadata or data field outside another free-form value) as
// canonical JSON.
func contents(v any) (items, free []string) {
	var walk func(v any, inFree bool)
	walk = func(v any, inFree bool) {
		switch v := v.(type) {
		case map[string]any:
			for k, c := range v {
				freeHere := !inFree && (k == "metadata" || k == "data")
				if freeHere {
					b, err := json.Marshal(c)
					if err != nil {
						b = []byte("unmarshalable: " + err.Error())
					}
					free = append(free, k+" "+string(b))
				}
				k = strings.ToLower(strings.ReplaceAll(k, "_", ""))
				if k == "request" {
					k = "message"
				}
				items = append(items, "key "+k)
				walk(c, inFree || freeHere)
			}
		case []any:
			for _, c := range v {
				walk(c, inFree)
			}
		default:
			items = append(items, fmt.Sprintf("%T %v", v, v))
		}
	}
	walk(v, false)
	slices.Sort(items)
	slices.Sort(free)
	return items, free
}
