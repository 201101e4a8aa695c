package delegation

import (
	"mime"
	"net/http"
)

// a2aJSON is the media type A2A 1.0.1 (§11.1) says HTTP+JSON requests and
// answers SHOULD carry. An agent's error answer in it is the same
// google.rpc.Status body as one labelled application/json.
const a2aJSON = "application/a2a+json"

// typedErrors returns hc with an agent's HTTP+JSON error answers labelled
// application/a2a+json relabelled application/json, so that a2a-go's REST
// clients read the A2A error they carry. a2a-go v2.4.0 reads an error
// body only when its type starts with application/json
// (internal/rest.FromRESTError) and takes any other for a server error
// (-32000): a refusal of the message (task not found, unsupported
// operation, ...) would then count against the agent as a failure of its
// own, and the caller would not get the agent's error. Answers that are
// not errors are read whatever their type, and pass as they are.
func typedErrors(hc *http.Client) *http.Client {
	return withTransport(hc, func(rt http.RoundTripper) http.RoundTripper { return typedErrorsTransport{rt: rt} })
}

// typedErrorsTransport relabels the error answers rt gets (typedErrors).
type typedErrorsTransport struct {
	rt http.RoundTripper
}

func (t typedErrorsTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if err != nil || resp.StatusCode == http.StatusOK {
		return resp, err
	}
	if mt, params, perr := mime.ParseMediaType(resp.Header.Get("Content-Type")); perr == nil && mt == a2aJSON {
		resp.Header.Set("Content-Type", mime.FormatMediaType("application/json", params))
	}
	return resp, nil
}

// CloseIdleConnections closes the idle connections of the transport
// underneath, as http.Client.CloseIdleConnections expects.
func (t typedErrorsTransport) CloseIdleConnections() { closeIdle(t.rt) }
