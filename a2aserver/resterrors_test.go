package a2aserver

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestWithLegacyFields(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in, want string
	}{
		{"A2A reason", `{"error": {"code": 404, "status": "NOT_FOUND", "message": "task not found", "details": [{"@type": "x", "reason": "TASK_NOT_FOUND"}]}}`,
			`{"error": {"code": 404, "status": "NOT_FOUND", "message": "task not found", "details": [{"@type": "x", "reason": "TASK_NOT_FOUND"}]},
			"code": -32001, "message": "task not found", "type": "TaskNotFoundError"}`},
		{"fields already there are kept", `{"error": {"message": "m", "details": [{"reason": "UNSUPPORTED_OPERATION"}]}, "type": "Mine"}`,
			`{"error": {"message": "m", "details": [{"reason": "UNSUPPORTED_OPERATION"}]}, "type": "Mine", "code": -32004, "message": "m"}`},
		{"unknown reason", `{"error": {"details": [{"reason": "CANCELLED"}]}}`, `{"error": {"details": [{"reason": "CANCELLED"}]}}`},
		{"not google.rpc.Status", `{"code": 7}`, `{"code": 7}`},
		{"not JSON", `oops`, `oops`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := withLegacyFields([]byte(tc.in))
			var g, w any
			if json.Unmarshal(got, &g) != nil || json.Unmarshal([]byte(tc.want), &w) != nil {
				if string(got) != tc.want {
					t.Errorf("got %s, want %s", got, tc.want)
				}
				return
			}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}
