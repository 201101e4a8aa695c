package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
)

// mcpVersion is the MCP protocol version the harness speaks: each request
// stands alone, with no session and no initialize.
const mcpVersion = "2026-07-28"

// mcpClient is the MCP client of the MCP run: JSON-RPC over plain HTTP to
// orchd's /mcp, one POST per request, each carrying the protocol version,
// the client's name and its capabilities in its _meta as 2026-07-28
// requests do. It is the thinnest client the protocol allows, so what the
// run measures is orchd's side.
type mcpClient struct {
	hc  *http.Client
	url string
	// caps is the capabilities every request declares.
	caps map[string]any
	ids  atomic.Int64
}

// newMCPClient returns a client of the MCP endpoint at url declaring the
// extensions exts.
func newMCPClient(hc *http.Client, url string, exts ...string) *mcpClient {
	declared := map[string]any{}
	for _, e := range exts {
		declared[e] = map[string]any{}
	}
	return &mcpClient{hc: hc, url: url, caps: map[string]any{"extensions": declared}}
}

// mcpError is a JSON-RPC error answer.
type mcpError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *mcpError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// call sends method with params (which it adds its _meta to), name in the
// Mcp-Name header when not empty, and decodes the result into out, which
// may be nil. An error answer is an *mcpError.
func (c *mcpClient) call(ctx context.Context, method, name string, params map[string]any, out any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion":    mcpVersion,
		"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "benchreport", "version": "1"},
		"io.modelcontextprotocol/clientCapabilities": c.caps,
	}
	id := c.ids.Add(1)
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", mcpVersion)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	defer resp.Body.Close()
	msg, err := readAnswer(io.LimitReader(resp.Body, maxJSON), resp.Header.Get("Content-Type"), id)
	if err != nil {
		return fmt.Errorf("%s: HTTP %d: %w", method, resp.StatusCode, err)
	}
	if msg.Error != nil {
		return msg.Error
	}
	if out != nil {
		if err := json.Unmarshal(msg.Result, out); err != nil {
			return fmt.Errorf("%s: result: %w", method, err)
		}
	}
	return nil
}

// rpcAnswer is a JSON-RPC response.
type rpcAnswer struct {
	ID     int64           `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *mcpError       `json:"error"`
}

// readAnswer reads the response to request id from an answer of content
// type ctype: one JSON message, or server-sent events, read to their end
// so the connection is kept, whose data lines are JSON-RPC messages
// (progress notifications before the response among them).
func readAnswer(r io.Reader, ctype string, id int64) (rpcAnswer, error) {
	var found *rpcAnswer
	if !strings.HasPrefix(ctype, "text/event-stream") {
		var msg rpcAnswer
		if err := json.NewDecoder(r).Decode(&msg); err != nil {
			return msg, err
		}
		if msg.ID != id || msg.Result == nil && msg.Error == nil {
			return msg, fmt.Errorf("the answer is not the response to request %d", id)
		}
		_, _ = io.Copy(io.Discard, r)
		return msg, nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxEventLine)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok || found != nil {
			continue
		}
		var msg rpcAnswer
		if err := json.Unmarshal(data, &msg); err != nil {
			return msg, err
		}
		if msg.ID == id && (msg.Result != nil || msg.Error != nil) {
			found = &msg
		}
	}
	if err := sc.Err(); err != nil {
		return rpcAnswer{}, err
	}
	if found == nil {
		return rpcAnswer{}, fmt.Errorf("the event stream ended without the response to request %d", id)
	}
	return *found, nil
}
