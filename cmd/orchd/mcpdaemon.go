package main

import (
	"bytes"
	"io"
	"net/http"
	"sync"
)

// The HTTP side of orchd mcp: what its requests to the daemon's /mcp
// carry beyond what go-sdk's Streamable HTTP connection puts in them.

// protocolVersionHeader is the header a Streamable HTTP request names its
// MCP protocol version in.
const protocolVersionHeader = "Mcp-Protocol-Version"

// maxRefusalBody bounds what is read of the body of the daemon's refusal
// of the token.
const maxRefusalBody = 16 << 10

// daemonTransport is the http.RoundTripper of orchd mcp's requests to the
// daemon. It adds the bearer token ($ORCHD_TOKEN) to every request, and
// the protocol version an initialize agreed to the requests that lack it:
// go-sdk's connection learns that version only from a client session of
// its own, which a relay does not have. It keeps the daemon's refusal of
// the token (401), for the bridge to say plainly why it stopped.
type daemonTransport struct {
	api  *apiClient
	base http.RoundTripper

	mu      sync.Mutex
	version string    // agreed by initialize; "" before, or without one
	refused *apiError // the daemon's 401, if it answered one
}

// RoundTrip sends req with the token, and the agreed protocol version if
// req names none.
func (t *daemonTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	t.api.authorize(req)
	if v := t.agreed(); v != "" && req.Header.Get(protocolVersionHeader) == "" {
		req.Header.Set(protocolVersionHeader, v)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusUnauthorized {
		b, err := readRefusal(resp)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		t.refused = newAPIError(resp.StatusCode, b)
		t.mu.Unlock()
		resp.Body = io.NopCloser(bytes.NewReader(b))
	}
	return resp, nil
}

// readRefusal reads the body of a refusal, up to maxRefusalBody bytes,
// and closes it.
func readRefusal(resp *http.Response) ([]byte, error) {
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, maxRefusalBody))
}

// agree records the protocol version an initialize agreed.
func (t *daemonTransport) agree(version string) {
	t.mu.Lock()
	t.version = version
	t.mu.Unlock()
}

// agreed returns the protocol version an initialize agreed, or "".
func (t *daemonTransport) agreed() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.version
}

// refusal returns the daemon's refusal of the token, or nil.
func (t *daemonTransport) refusal() *apiError {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.refused
}
