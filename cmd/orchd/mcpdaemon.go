package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
// the token (401), for the bridge to say plainly why it stopped, and
// makes the daemon's refusal of one message what it is in MCP
// (refusedMessage).
type daemonTransport struct {
	api  *apiClient
	base http.RoundTripper
	log  *slog.Logger

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
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		b, err := readRefusal(resp)
		if err != nil {
			return nil, err
		}
		t.mu.Lock()
		t.refused = newAPIError(resp.StatusCode, b)
		t.mu.Unlock()
		resp.Body = io.NopCloser(bytes.NewReader(b))
	case req.Method == http.MethodPost && resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusNotFound &&
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json"):
		return t.refusedMessage(req, resp)
	}
	return resp, nil
}

// refusedMessage turns the daemon's refusal of one message in plain HTTP
// (go-sdk's handler answers 400 and a line of text to a method it does
// not serve, or headers it finds wrong) into what it means in MCP. go-sdk's
// connection takes such an answer for a broken connection, and would end
// the bridge for one message the host should not have sent: the refusal
// of a call becomes the JSON-RPC error answering it, and the refusal of a
// notification, or of the host's answer to the daemon, is told on stderr.
// (A 404 is not one message's refusal: without the JSON-RPC error of a
// method the daemon does not serve, it says the session is gone.)
func (t *daemonTransport) refusedMessage(req *http.Request, resp *http.Response) (*http.Response, error) {
	text, err := readRefusal(resp)
	if err != nil {
		return nil, err
	}
	msg := fmt.Sprintf("orchd refused the message (HTTP %d): %s", resp.StatusCode, strings.TrimSpace(string(text)))
	var sent struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			_ = json.NewDecoder(body).Decode(&sent)
			body.Close()
		}
	}
	if sent.Method == "" || len(sent.ID) == 0 || string(sent.ID) == "null" {
		t.log.Warn("orchd mcp: "+msg, "method", sent.Method)
		resp.StatusCode, resp.Status = http.StatusAccepted, http.StatusText(http.StatusAccepted)
		resp.Body = http.NoBody
		resp.Header.Del("Content-Type")
		return resp, nil
	}
	answer, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": sent.ID,
		"error": map[string]any{"code": jsonrpc.CodeInvalidRequest, "message": msg}})
	if err != nil {
		return nil, err
	}
	resp.Header.Set("Content-Type", "application/json")
	resp.Body = io.NopCloser(bytes.NewReader(answer))
	resp.ContentLength = int64(len(answer))
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
