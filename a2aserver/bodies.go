package a2aserver

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/errordetails"

	"github.com/orchd/orchd/httpgate"
)

// The bodies of A2A requests, bounded by httpgate.BodyLimits and refused
// in each binding's own answer shape.

// boundJSONRPC bounds the bodies of an A2A 1.0 JSON-RPC endpoint, refusing
// with a JSON-RPC error as a2a-go writes them.
func boundJSONRPC(l *httpgate.BodyLimits, next http.Handler) http.Handler {
	return l.A2A(next, writeJSONRPCRefusal, jsonRPCStandIn("SendMessage", "SendStreamingMessage"))
}

// boundJSONRPC03 bounds the bodies of the A2A 0.3 JSON-RPC endpoint, as
// boundJSONRPC.
func boundJSONRPC03(l *httpgate.BodyLimits, next http.Handler) http.Handler {
	return l.A2A(next, writeJSONRPCRefusal, jsonRPCStandIn("message/send", "message/stream"))
}

// boundREST bounds the bodies of an A2A 1.0 HTTP+JSON endpoint, refusing
// with a google.rpc.Status body as a2a-go writes them.
func boundREST(l *httpgate.BodyLimits, next http.Handler) http.Handler {
	return l.A2A(next, writeRESTRefusal, restStandIn)
}

// boundREST03 bounds the bodies of the A2A 0.3 HTTP+JSON endpoint; its
// refusals carry the fields every 0.3 client reads, as legacyRESTErrors
// adds them.
func boundREST03(l *httpgate.BodyLimits, next http.Handler) http.Handler {
	return l.A2A(next, writeREST03Refusal, restStandIn)
}

// jsonRPCStandIn is a JSON-RPC request of method, or stream when the
// caller accepts an event stream, with a null id: the id is in the body,
// which is not read.
func jsonRPCStandIn(method, stream string) httpgate.StandIn {
	return func(r *http.Request) []byte {
		m := method
		if acceptsEventStream(r) {
			m = stream
		}
		return []byte(`{"jsonrpc":"2.0","id":null,"method":"` + m + `","params":{}}`)
	}
}

// restStandIn is an HTTP+JSON body with no fields: the operation is in the
// path.
func restStandIn(*http.Request) []byte { return []byte("{}") }

// acceptsEventStream reports whether r asks for server-sent events.
func acceptsEventStream(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept") {
		if strings.Contains(v, "text/event-stream") {
			return true
		}
	}
	return false
}

// The JSON-RPC codes, A2A reasons and google.rpc statuses of refused
// bodies: a request orchd will not read (a2a.ErrInvalidRequest), or one
// it has no room to read now (a2a.ErrServerError).
const (
	jsonRPCInvalidRequest = -32600
	jsonRPCServerError    = -32000
	reasonInvalidRequest  = "INVALID_REQUEST"
	reasonServerError     = "SERVER_ERROR"
)

// refusalRPC returns a refusal's JSON-RPC code, A2A reason and
// google.rpc status.
func refusalRPC(rf *httpgate.Refusal) (code int, reason, status string) {
	if rf.Busy {
		return jsonRPCServerError, reasonServerError, "UNAVAILABLE"
	}
	return jsonRPCInvalidRequest, reasonInvalidRequest, "INVALID_ARGUMENT"
}

// refusalInfo is the google.rpc.ErrorInfo detail a2a-go puts in every
// error answer, with the limit that refused the body in its metadata.
func refusalInfo(rf *httpgate.Refusal) *errordetails.Typed {
	meta := map[string]string{"timestamp": time.Now().UTC().Format(time.RFC3339)}
	if rf.Setting != "" {
		meta["limit"], meta["setting"] = rf.Limit, rf.Setting
	}
	_, reason, _ := refusalRPC(rf)
	return errordetails.NewErrorInfo(reason, a2a.ProtocolDomain, meta)
}

// writeJSONRPCRefusal answers as a2a-go's JSON-RPC handlers answer a
// request they cannot read: HTTP 200 with an Invalid Request error, which
// a2a-go's clients read as a2a.ErrInvalidRequest.
func writeJSONRPCRefusal(w http.ResponseWriter, rf *httpgate.Refusal) {
	type rpcError struct {
		Code    int                   `json:"code"`
		Message string                `json:"message"`
		Data    []*errordetails.Typed `json:"data,omitempty"`
	}
	code, _, _ := refusalRPC(rf)
	httpgate.WriteJSON(w, http.StatusOK, struct {
		JSONRPC string   `json:"jsonrpc"`
		ID      any      `json:"id"`
		Error   rpcError `json:"error"`
	}{"2.0", rf.ID, rpcError{code, rf.Msg, []*errordetails.Typed{refusalInfo(rf)}}}, "")
}

// restRefusal is a google.rpc.Status body as a2a-go's HTTP+JSON handlers
// write them; clients read its reason as a2a.ErrInvalidRequest.
func restRefusal(rf *httpgate.Refusal) any {
	type status struct {
		Code    int                   `json:"code"`
		Status  string                `json:"status"`
		Message string                `json:"message"`
		Details []*errordetails.Typed `json:"details"`
	}
	_, _, st := refusalRPC(rf)
	return struct {
		Error status `json:"error"`
	}{status{rf.Status, st, rf.Msg, []*errordetails.Typed{refusalInfo(rf)}}}
}

func writeRESTRefusal(w http.ResponseWriter, rf *httpgate.Refusal) {
	httpgate.WriteJSON(w, rf.Status, restRefusal(rf), "")
}

func writeREST03Refusal(w http.ResponseWriter, rf *httpgate.Refusal) {
	b, err := json.Marshal(restRefusal(rf))
	if err != nil {
		writeRESTRefusal(w, rf)
		return
	}
	b = withLegacyFields(b)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(rf.Status)
	_, _ = w.Write(b)
}
