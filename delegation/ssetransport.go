package delegation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/google/uuid"
)

// The streaming calls to agents over JSON-RPC and HTTP+JSON (A2A 1.0) are
// made by the transports in this file; every other call is a2a-go's.
//
// a2a-go's transports read each SSE stream with a bufio.Scanner whose
// buffer is 64 KiB from the start (a2a-go v2.4.0 internal/sse/sse.go:97-98,
// used by a2aclient/jsonrpc.go:166 and rest.go:179), so a thousand
// delegations streaming at once hold 64 MiB that their events, a few hundred
// bytes each, never use, and the Go heap goal doubles it. These transports
// send the same requests, with the same headers and the same http.Client
// (so credentials, telemetry and trace headers are the same), read the
// stream with sseReader, decode the events into the same a2a types, and
// leave the mapping of the agent's errors to a2a errors to a2a-go itself
// (a2aError, restError): the wire and the errors callers see are a2a-go's.

// withJSONRPCStreams is the a2a-go factory option that makes the A2A 1.0
// JSON-RPC transport over hc with its streaming calls read by sseReader,
// in place of a2aclient.WithJSONRPCTransport(hc).
func withJSONRPCStreams(hc *http.Client) a2aclient.FactoryOption {
	return a2aclient.WithTransport(a2a.TransportProtocolJSONRPC, a2aclient.TransportFactoryFn(
		func(_ context.Context, _ *a2a.AgentCard, iface *a2a.AgentInterface) (a2aclient.Transport, error) {
			return newJSONRPCStreams(iface.URL, hc), nil
		}))
}

// withRESTStreams is the a2a-go factory option that makes the A2A 1.0
// HTTP+JSON transport over hc with its streaming calls read by sseReader,
// in place of a2aclient.WithRESTTransport(hc).
func withRESTStreams(hc *http.Client) a2aclient.FactoryOption {
	return a2aclient.WithTransport(a2a.TransportProtocolHTTPJSON, a2aclient.TransportFactoryFn(
		func(_ context.Context, _ *a2a.AgentCard, iface *a2a.AgentInterface) (a2aclient.Transport, error) {
			u, err := url.Parse(iface.URL)
			if err != nil {
				return nil, fmt.Errorf("failed to parse endpoint URL: %w", err)
			}
			return newRESTStreams(u, hc), nil
		}))
}

// jsonrpcStreams is a2a-go's JSON-RPC transport with its two streaming
// calls made here.
type jsonrpcStreams struct {
	a2aclient.Transport // a2a-go's, for every other call
	url                 string
	hc                  *http.Client
}

func newJSONRPCStreams(u string, hc *http.Client) *jsonrpcStreams {
	return &jsonrpcStreams{Transport: a2aclient.NewJSONRPCTransport(u, hc), url: u, hc: hc}
}

// SendStreamingMessage implements [a2aclient.Transport].
func (t *jsonrpcStreams) SendStreamingMessage(ctx context.Context, params a2aclient.ServiceParams, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return t.stream(ctx, "SendStreamingMessage", params, req)
}

// SubscribeToTask implements [a2aclient.Transport].
func (t *jsonrpcStreams) SubscribeToTask(ctx context.Context, params a2aclient.ServiceParams, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return t.stream(ctx, "SubscribeToTask", params, req)
}

// rpcRequest is a JSON-RPC 2.0 request as a2a-go's client sends it.
type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params,omitempty"`
	ID      string `json:"id"`
}

// rpcResponse is one JSON-RPC 2.0 response of a stream, as a2a-go's client
// reads it.
type rpcResponse struct {
	JSONRPC string           `json:"jsonrpc"`
	ID      string           `json:"id"`
	Result  json.RawMessage  `json:"result,omitempty"`
	Error   *json.RawMessage `json:"error,omitempty"`
}

// stream calls method with payload and yields the stream's events.
func (t *jsonrpcStreams) stream(ctx context.Context, method string, params a2aclient.ServiceParams, payload any) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", Method: method, Params: payload, ID: uuid.NewString()})
		if err != nil {
			yield(nil, fmt.Errorf("marshal %s request: %w", method, err))
			return
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
		if err != nil {
			yield(nil, fmt.Errorf("create %s request: %w", method, err))
			return
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := openStream(t.hc, req, params)
		if err != nil {
			yield(nil, err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			yield(nil, fmt.Errorf("unexpected HTTP status: %s", resp.Status))
			return
		}
		for data, err := range sseEvents(resp.Body) {
			if err != nil {
				yield(nil, err)
				return
			}
			var r rpcResponse
			if err := json.Unmarshal(data, &r); err != nil {
				yield(nil, fmt.Errorf("parse SSE data: %w", err))
				return
			}
			if r.Error != nil {
				yield(nil, a2aError(ctx, *r.Error))
				return
			}
			var sr a2a.StreamResponse
			if err := json.Unmarshal(r.Result, &sr); err != nil {
				yield(nil, fmt.Errorf("parse %s event: %w", method, err))
				return
			}
			if !yield(sr.Event, nil) {
				return
			}
		}
	}
}

// openStream sends a streaming request over hc, with the call's service
// parameters (A2A-Extensions, A2A-Version, credentials an interceptor
// attached) as headers. The errors are a2a-go's.
func openStream(hc *http.Client, req *http.Request, params a2aclient.ServiceParams) (*http.Response, error) {
	req.Header.Set("Accept", "text/event-stream")
	for k, vals := range params {
		for _, v := range vals {
			req.Header.Add(k, v)
		}
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("failed to send HTTP request: %w", err)
	}
	return resp, nil
}

// sseEvents yields the data of the events of an SSE body, each at most
// maxSSEEvent bytes; the slice is valid until the next one. A read error
// ends it, wrapped as a2a-go wraps it.
func sseEvents(body io.Reader) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		r := newSSEReader(body, maxSSEEvent)
		for {
			data, err := r.next()
			if err == io.EOF {
				return
			}
			if err != nil {
				yield(nil, fmt.Errorf("SSE stream error: %w", err))
				return
			}
			if !yield(data, nil) {
				return
			}
		}
	}
}

// restStreams is a2a-go's HTTP+JSON transport with its two streaming calls
// made here.
type restStreams struct {
	a2aclient.Transport // a2a-go's, for every other call
	url                 *url.URL
	hc                  *http.Client
}

func newRESTStreams(u *url.URL, hc *http.Client) *restStreams {
	return &restStreams{Transport: a2aclient.NewRESTTransport(u, hc), url: u, hc: hc}
}

// SendStreamingMessage implements [a2aclient.Transport].
func (t *restStreams) SendStreamingMessage(ctx context.Context, params a2aclient.ServiceParams, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return t.stream(ctx, "/message:stream", req.Tenant, params, req)
}

// SubscribeToTask implements [a2aclient.Transport].
func (t *restStreams) SubscribeToTask(ctx context.Context, params a2aclient.ServiceParams, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return t.stream(ctx, "/tasks/"+string(req.ID)+":subscribe", req.Tenant, params, nil)
}

// restEvent is one event of an HTTP+JSON stream: exactly one of its fields.
type restEvent struct {
	Message        *a2a.Message                 `json:"message,omitempty"`
	Task           *a2a.Task                    `json:"task,omitempty"`
	StatusUpdate   *a2a.TaskStatusUpdateEvent   `json:"statusUpdate,omitempty"`
	ArtifactUpdate *a2a.TaskArtifactUpdateEvent `json:"artifactUpdate,omitempty"`
	Error          *json.RawMessage             `json:"error,omitempty"`
}

// stream POSTs payload (nil for none) to path under the tenant, as
// a2a-go's HTTP+JSON transport does, and yields the stream's events.
func (t *restStreams) stream(ctx context.Context, path, tenant string, params a2aclient.ServiceParams, payload any) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		var body io.Reader
		var n int
		if payload != nil {
			b, err := json.Marshal(payload)
			if err != nil {
				yield(nil, fmt.Errorf("marshal request: %w: %w", err, a2a.ErrInvalidRequest))
				return
			}
			body, n = bytes.NewReader(b), len(b)
		}
		rel, err := url.Parse(path)
		if err != nil {
			yield(nil, fmt.Errorf("parse path: %w", err))
			return
		}
		u := t.url.JoinPath(rel.Path)
		if tenant != "" {
			u = t.url.JoinPath(tenant, rel.Path)
		}
		u.RawQuery = rel.RawQuery
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), body)
		if err != nil {
			yield(nil, fmt.Errorf("create request: %w", err))
			return
		}
		if n > 0 {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := openStream(t.hc, req, params)
		if err != nil {
			yield(nil, err)
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			yield(nil, restError(ctx, resp))
			return
		}
		for data, err := range sseEvents(resp.Body) {
			if err != nil {
				yield(nil, err)
				return
			}
			ev, err := decodeRESTEvent(ctx, data)
			if err != nil {
				yield(nil, err)
				return
			}
			if !yield(ev, nil) {
				return
			}
		}
	}
}

// decodeRESTEvent reads one event of an HTTP+JSON stream.
func decodeRESTEvent(ctx context.Context, data []byte) (a2a.Event, error) {
	var w restEvent
	if err := json.Unmarshal(data, &w); err != nil {
		return nil, fmt.Errorf("failed to unmarshal stream response: %w", err)
	}
	var n int
	var ev a2a.Event
	if w.Message != nil {
		ev, n = w.Message, n+1
	}
	if w.Task != nil {
		ev, n = w.Task, n+1
	}
	if w.StatusUpdate != nil {
		ev, n = w.StatusUpdate, n+1
	}
	if w.ArtifactUpdate != nil {
		ev, n = w.ArtifactUpdate, n+1
	}
	if w.Error != nil {
		n++
	}
	switch {
	case n == 0:
		return nil, errors.New("unknown stream response type")
	case n != 1:
		return nil, fmt.Errorf("expected exactly one stream response type, got %d", n)
	case w.Error != nil:
		body := append(append([]byte(`{"error":`), *w.Error...), '}')
		return nil, restError(ctx, &http.Response{
			StatusCode: http.StatusInternalServerError,
			Header:     http.Header{"Content-Type": {"application/json"}},
			Body:       io.NopCloser(bytes.NewReader(body)),
		})
	}
	return ev, nil
}
