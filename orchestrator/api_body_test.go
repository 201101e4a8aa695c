package orchestrator

import (
	"net/http"
	"testing"

	"github.com/orchd/orchd/httpapi"
)

// TestAPI_BadBody checks that a body the API cannot decode is told in
// JSON's terms, without the decoder's package or Go's types.
func TestAPI_BadBody(t *testing.T) {
	t.Parallel()
	base := startDaemon(t, loadDefaults(t))
	for _, tc := range []struct{ path, body, want string }{
		{"/v1/agents", `{"url":`, "bad JSON body: unexpected EOF"},
		{"/v1/agents", `{"uri":"x"}`, `bad JSON body: unknown field "uri"`},
		{"/v1/agents", `{"url": 7}`, `bad JSON body: "url" is a number, want a string`},
		{"/v1/agents", `{"url":"x"}x`, "bad JSON body: more than one JSON value"},
		{"/v1/delegations", `{"text": "x", "requires": "streaming"}`, `bad JSON body: "requires" is a string, want an array`},
		{"/v1/delegations", `{"message": []}`, `bad JSON body: "message" is an array, want an object`},
	} {
		var eb httpapi.ErrorBody
		if status := call(t, "POST", base+tc.path, tc.body, &eb); status != http.StatusBadRequest || eb.Error.Message != tc.want {
			t.Errorf("%s %s: %d %q; want 400 %q", tc.path, tc.body, status, eb.Error.Message, tc.want)
		}
	}
}
