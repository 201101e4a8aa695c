package delegation

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// TestTypedErrors has a real a2a-go REST client read an agent's
// google.rpc.Status answer for an unknown task, labelled with each media
// type, through typedErrors: the A2A error survives the types A2A uses,
// with or without parameters, and any other type is left as it is (a2a-go
// then reads a server error, as without typedErrors).
func TestTypedErrors(t *testing.T) {
	t.Parallel()
	const body = `{"error": {"code": 404, "status": "NOT_FOUND", "message": "task t-1 not found", "details": [` +
		`{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND", "domain": "a2a-protocol.org"}]}}`
	for _, tc := range []struct {
		contentType string
		want        error
	}{
		{"application/json", a2a.ErrTaskNotFound},
		{"application/a2a+json", a2a.ErrTaskNotFound},
		{"application/a2a+json; charset=utf-8", a2a.ErrTaskNotFound},
		{"Application/A2A+JSON", a2a.ErrTaskNotFound},
		{"application/problem+json", a2a.ErrServerError},
		{"text/plain", a2a.ErrServerError},
	} {
		t.Run(tc.contentType, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tc.contentType)
				w.WriteHeader(http.StatusNotFound)
				_, _ = w.Write([]byte(body))
			}))
			defer srv.Close()
			u, err := url.Parse(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			tr := a2aclient.NewRESTTransport(u, typedErrors(srv.Client()))
			_, err = tr.GetTask(t.Context(), a2aclient.ServiceParams{}, &a2a.GetTaskRequest{ID: "t-1"})
			if !errors.Is(err, tc.want) {
				t.Errorf("GetTask: %v, want %v", err, tc.want)
			}
		})
	}
}
