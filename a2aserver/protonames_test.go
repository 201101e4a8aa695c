package a2aserver

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestJSONNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
	}{
		{"proto names", `{"request": {"message_id": "m1", "context_id": "c", "role": "ROLE_USER", "content": [{"text": "hi"}],
			"metadata": {"keep_me": 1, "https://x/y_z": {"a_b": 2}}}, "configuration": {"accepted_output_modes": ["text/plain"], "history_length": 3}}`,
			`{"message": {"messageId": "m1", "contextId": "c", "role": "ROLE_USER", "content": [{"text": "hi"}],
			"metadata": {"keep_me": 1, "https://x/y_z": {"a_b": 2}}}, "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 3}}`},
		{"data parts keep their keys", `{"message": {"content": [{"data": {"data": {"snake_key": 12345678901234567890}}}], "task_id": "t"}}`,
			`{"message": {"content": [{"data": {"data": {"snake_key": 12345678901234567890}}}], "taskId": "t"}}`},
		{"both spellings: the JSON name wins", `{"request": {"messageId": "a"}, "message": {"messageId": "b"}}`, ""},
		{"two spellings of one name are left alone", `{"message": {"message_id": "a", "message__id": "b", "task_id": "t"}}`,
			`{"message": {"message_id": "a", "message__id": "b", "taskId": "t"}}`},
		{"JSON names already", `{"message": {"messageId": "m1"}}`, ""},
		{"not an object", `[1, 2]`, ""},
		{"not JSON", `{"message":`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, changed := jsonNames([]byte(tc.in))
			if tc.want == "" {
				if changed {
					t.Fatalf("rewrote %s to %s", tc.in, got)
				}
				return
			}
			if !changed {
				t.Fatalf("left %s as it was", tc.in)
			}
			var g, w any
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(tc.want), &w); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
