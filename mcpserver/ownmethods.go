package mcpserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchd/orchd/steering"
)

// orchd's own methods without the SDK's session.
//
// The Tasks extension's methods and the steering extension's are orchd's
// own: go-sdk only carries them (AddReceivingCustomMethod). For a
// 2026-07-28 request it carries each on a session made for that request,
// decoding the request a dozen times on the way (each decode taking a
// 32 KiB buffer): a tasks/get cost 7× the CPU of GET /v1/delegations/{id}
// and its p99 at 64 pollers was over 5 ms, almost all of it the SDK's.
// Those requests stand alone, so ownMethods answers them itself, from the
// bytes the body limits already hold, with the same checks
// (checkExtension) and the same handlers as the SDK's route, which still
// serves them for anything else (and is where an SDK implementation of
// Tasks would take over). A request ownMethods does not take as written
// (its method not in its Mcp-Method header, no id, malformed JSON, an
// Accept header not naming application/json) goes to the SDK, which
// answers it as it answers every other request.

// rpcRequest is a JSON-RPC request as ownMethods reads it.
type rpcRequest struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Params  json.RawMessage `json:"params"`
}

// metaOnly is the part of any params ownMethods reads before the
// method's own: the request's _meta.
type metaOnly struct {
	Meta struct {
		Version      string          `json:"io.modelcontextprotocol/protocolVersion"`
		Capabilities json.RawMessage `json:"io.modelcontextprotocol/clientCapabilities"`
	} `json:"_meta"`
}

// ownMethod reports whether method is one ownMethods answers.
func ownMethod(method string) bool {
	switch method {
	case MethodTaskGet, MethodTaskUpdate, MethodTaskCancel, MethodSteer, MethodInterrupt:
		return true
	}
	return false
}

// ownMethods answers the requests of 2026-07-28 and later for orchd's own
// methods and passes every other request on to next, the SDK.
func (s *Server) ownMethods(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		method, version := r.Header.Get("Mcp-Method"), r.Header.Get("MCP-Protocol-Version")
		if r.Method != http.MethodPost || version < firstSessionless || !ownMethod(method) ||
			!strings.Contains(r.Header.Get("Accept"), "application/json") {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(r.Body) // held whole by the body limits already
		r.Body = io.NopCloser(bytes.NewReader(body))
		var req rpcRequest
		var meta metaOnly
		if err != nil || json.Unmarshal(body, &req) != nil || req.JSONRPC != "2.0" || len(req.ID) == 0 || req.Method != method ||
			json.Unmarshal(req.Params, &meta) != nil || meta.Meta.Version != version || len(meta.Meta.Capabilities) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		var caps mcp.ClientCapabilities
		if err := json.Unmarshal(meta.Meta.Capabilities, &caps); err != nil {
			writeAnswer(w, req.ID, nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "_meta clientCapabilities: " + err.Error()})
			return
		}
		ctx := context.WithValue(r.Context(), capsKey{}, func() *mcp.ClientCapabilities { return &caps })
		res, err := s.callOwn(ctx, req, version, &caps, r.Header.Get("Mcp-Name"))
		if err == nil {
			// Every result names the server, as the SDK's do.
			m := res.GetMeta()
			if m == nil {
				m = map[string]any{}
			}
			m[mcp.MetaKeyServerInfo] = s.impl
			res.SetMeta(m)
		}
		writeAnswer(w, req.ID, res, err)
	})
}

// callOwn calls the handler of req's method with its params, after the
// checks of its extension.
func (s *Server) callOwn(ctx context.Context, req rpcRequest, version string, caps *mcp.ClientCapabilities, mcpName string) (mcp.Result, error) {
	switch req.Method {
	case MethodTaskGet, MethodTaskCancel:
		var p TaskParams
		if err := s.ownParams(req, version, caps, mcpName, &p); err != nil {
			return nil, err
		}
		if req.Method == MethodTaskGet {
			return s.taskGet(ctx, nil, &p)
		}
		return s.taskCancel(ctx, nil, &p)
	case MethodTaskUpdate:
		var p TaskUpdateParams
		if err := s.ownParams(req, version, caps, mcpName, &p); err != nil {
			return nil, err
		}
		return s.taskUpdate(ctx, nil, &p)
	default: // MethodSteer, MethodInterrupt
		var p SteerParams
		if err := s.ownParams(req, version, caps, mcpName, &p); err != nil {
			return nil, err
		}
		c := steering.Steer
		if req.Method == MethodInterrupt {
			c = steering.Interrupt
		}
		return s.steerMethod(c)(ctx, nil, &p)
	}
}

// ownParams decodes req's params into p and checks them as the SDK's
// route does (extensionsMiddleware).
func (s *Server) ownParams(req rpcRequest, version string, caps *mcp.ClientCapabilities, mcpName string, p named) error {
	if err := json.Unmarshal(req.Params, p); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "params: " + err.Error()}
	}
	return checkExtension(req.Method, extensionOf(req.Method), version, caps, mcpName, p.taskName())
}

// writeAnswer writes the JSON-RPC answer to the request id: res, or err
// as a JSON-RPC error.
func writeAnswer(w http.ResponseWriter, id json.RawMessage, res mcp.Result, err error) {
	answer := map[string]any{"jsonrpc": "2.0", "id": id}
	var je *jsonrpc.Error
	switch {
	case err == nil:
		answer["result"] = res
	case errors.As(err, &je):
		answer["error"] = je
	default:
		answer["error"] = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(answer)
}
