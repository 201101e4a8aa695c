package a2aserver

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/orchd/orchd/httpgate"
)

// TestBodyRefusals: a body refused for what it is, and one refused for
// want of room (busy), are answered in each binding's shape as a2a-go
// answers an invalid request and a server error: JSON-RPC codes -32600
// and -32000, google.rpc statuses INVALID_ARGUMENT and UNAVAILABLE, with
// the A2A reason and the limit in the ErrorInfo.
func TestBodyRefusals(t *testing.T) {
	t.Parallel()
	type info struct {
		Reason   string            `json:"reason"`
		Metadata map[string]string `json:"metadata"`
	}
	for _, tc := range []struct {
		name           string
		rf             httpgate.Refusal
		code           int
		status, reason string
	}{
		{"too large", httpgate.Refusal{Status: 413, Code: "invalid_argument", Msg: "over the limit", Limit: "10", Setting: "http.maxBodyBytes", ID: "req-1"},
			-32600, "INVALID_ARGUMENT", "INVALID_REQUEST"},
		{"busy", httpgate.Refusal{Status: 503, Code: "unavailable", Msg: "no room", Limit: "20", Setting: "http.maxBufferedBodyBytes", Busy: true},
			-32000, "UNAVAILABLE", "SERVER_ERROR"},
	} {
		rec := httptest.NewRecorder()
		writeJSONRPCRefusal(rec, &tc.rf)
		var rpc struct {
			ID    any `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
				Data    []info `json:"data"`
			} `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &rpc); err != nil {
			t.Fatalf("%s: JSON-RPC %d %s: %v", tc.name, rec.Code, rec.Body, err)
		}
		type rpcAnswer struct {
			Status, Code int
			Message      string
			ID           any
			Data         []info
		}
		want := rpcAnswer{200, tc.code, tc.rf.Msg, tc.rf.ID, []info{{Reason: tc.reason, Metadata: map[string]string{"setting": tc.rf.Setting}}}}
		got := rpcAnswer{rec.Code, rpc.Error.Code, rpc.Error.Message, rpc.ID, rpc.Error.Data}
		if diff := cmp.Diff(want, got, cmpopts.IgnoreMapEntries(func(k, _ string) bool { return k != "setting" })); diff != "" {
			t.Errorf("%s: JSON-RPC (-want +got):\n%s", tc.name, diff)
		}
		for _, legacy := range []bool{false, true} {
			rec := httptest.NewRecorder()
			if legacy {
				writeREST03Refusal(rec, &tc.rf)
			} else {
				writeRESTRefusal(rec, &tc.rf)
			}
			var st struct {
				Error struct {
					Code    int    `json:"code"`
					Status  string `json:"status"`
					Details []info `json:"details"`
				} `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil {
				t.Fatalf("%s (0.3 %v): HTTP+JSON %d %s: %v", tc.name, legacy, rec.Code, rec.Body, err)
			}
			type restAnswer struct {
				Status, Code int
				CodeStatus   string
				Details      []info
			}
			want := restAnswer{tc.rf.Status, tc.rf.Status, tc.status, []info{{Reason: tc.reason, Metadata: map[string]string{"limit": tc.rf.Limit}}}}
			got := restAnswer{rec.Code, st.Error.Code, st.Error.Status, st.Error.Details}
			if diff := cmp.Diff(want, got, cmpopts.IgnoreMapEntries(func(k, _ string) bool { return k != "limit" })); diff != "" {
				t.Errorf("%s (0.3 %v): HTTP+JSON (-want +got):\n%s", tc.name, legacy, diff)
			}
			if !tc.rf.Busy && legacy != strings.Contains(rec.Body.String(), `"type":"InvalidRequestError"`) {
				t.Errorf("%s (0.3 %v): %s, want the 0.3 fields only for 0.3", tc.name, legacy, rec.Body)
			}
		}
	}
}
