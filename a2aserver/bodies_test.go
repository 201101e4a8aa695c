package a2aserver

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

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
		if err := json.Unmarshal(rec.Body.Bytes(), &rpc); err != nil || rec.Code != 200 || rpc.Error.Code != tc.code || rpc.Error.Message != tc.rf.Msg ||
			rpc.ID != tc.rf.ID || len(rpc.Error.Data) != 1 || rpc.Error.Data[0].Reason != tc.reason || rpc.Error.Data[0].Metadata["setting"] != tc.rf.Setting {
			t.Errorf("%s: JSON-RPC %d %s (%v)", tc.name, rec.Code, rec.Body, err)
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
			if err := json.Unmarshal(rec.Body.Bytes(), &st); err != nil || rec.Code != tc.rf.Status || st.Error.Code != tc.rf.Status || st.Error.Status != tc.status ||
				len(st.Error.Details) != 1 || st.Error.Details[0].Reason != tc.reason || st.Error.Details[0].Metadata["limit"] != tc.rf.Limit {
				t.Errorf("%s (0.3 %v): HTTP+JSON %d %s (%v)", tc.name, legacy, rec.Code, rec.Body, err)
			}
			if !tc.rf.Busy && legacy != strings.Contains(rec.Body.String(), `"type":"InvalidRequestError"`) {
				t.Errorf("%s (0.3 %v): %s, want the 0.3 fields only for 0.3", tc.name, legacy, rec.Body)
			}
		}
	}
}
