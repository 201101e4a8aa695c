package delegation

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/orchd/orchd/internal/ownstack"
)

// jsonrpcStreams is a2a-go's JSON-RPC transport with its two streaming
// methods, SendStreamingMessage and SubscribeToTask, read by orchd: the
// request, the SSE stream and each JSON-RPC response in it. Every other
// method is a2a-go's, and so is every error a stream carries: its JSON-RPC
// response is handed to a2a-go's own transport (rpcError), so codes and
// details map to A2A errors as a2a-go maps them.
//
// Why: a2a-go's SSE reader allocates a 64 KiB line buffer for every
// stream (bufio.MaxScanTokenSize, internal/sse/sse.go:98 in a2a-go
// v2.4.0), most of what a delegation answered at once over a stream
// allocates: on orchd → orchd → agent the garbage collector took a fifth
// of the upstream orchd's CPU, against a tenth of the downstream one's,
// which streams nothing. This reader starts with a 1 KiB buffer
// (streamReadBuffer) and gathers a longer line from several reads.
type jsonrpcStreams struct {
	a2aclient.Transport // a2a-go's JSON-RPC transport to url
	url                 string
	client              *http.Client
	// stacks decodes each event, deep work, off the stream's goroutine
	// (ownstack); nil: a goroutine each.
	stacks *ownstack.Workers
}

// newJSONRPCStreams returns the transport to the JSON-RPC endpoint url,
// decoding events on stacks.
func newJSONRPCStreams(url string, client *http.Client, stacks *ownstack.Workers) *jsonrpcStreams {
	return &jsonrpcStreams{Transport: a2aclient.NewJSONRPCTransport(url, client), url: url, client: client, stacks: stacks}
}

// The JSON-RPC methods read here, as A2A 1.0 names them.
const (
	methodStreamMessage   = "SendStreamingMessage"
	methodSubscribeToTask = "SubscribeToTask"
)

// Bounds of a stream read by jsonrpcStreams.
const (
	// streamReadBuffer is the reader's buffer: enough for a status
	// update's line (a few hundred bytes), so a delegation in flight
	// holds little while its stream waits; a longer line is gathered
	// from several reads.
	streamReadBuffer = 1 << 10
	// maxStreamEvent bounds one event, its data lines together: a2a-go's
	// bound on a line (sse.MaxSSETokenSize).
	maxStreamEvent = 10 << 20
)

// SendStreamingMessage implements a2aclient.Transport.
func (t *jsonrpcStreams) SendStreamingMessage(ctx context.Context, params a2aclient.ServiceParams, req *a2a.SendMessageRequest) iter.Seq2[a2a.Event, error] {
	return t.stream(ctx, methodStreamMessage, params, req)
}

// SubscribeToTask implements a2aclient.Transport.
func (t *jsonrpcStreams) SubscribeToTask(ctx context.Context, params a2aclient.ServiceParams, req *a2a.SubscribeToTaskRequest) iter.Seq2[a2a.Event, error] {
	return t.stream(ctx, methodSubscribeToTask, params, req)
}

// rpcRequest and rpcResponse are a JSON-RPC 2.0 request and response.
type rpcRequest struct {
	JSONRPC string `json:"jsonrpc"`
	Method  string `json:"method"`
	Params  any    `json:"params"`
	ID      string `json:"id"`
}

type rpcResponse struct {
	Result json.RawMessage `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// stream calls method with payload and yields the events of the SSE
// stream that answers, ending with the first error. Its errors read as
// a2a-go's transport words them, which unreachable relies on (classify.go).
func (t *jsonrpcStreams) stream(ctx context.Context, method string, params a2aclient.ServiceParams, payload any) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		body, err := json.Marshal(rpcRequest{JSONRPC: "2.0", Method: method, Params: payload, ID: rand.Text()})
		if err != nil {
			yield(nil, fmt.Errorf("failed to marshal request: %w", err))
			return
		}
		req, err := http.NewRequestWithContext(withOwnConn(ctx), http.MethodPost, t.url, bytes.NewReader(body))
		if err != nil {
			yield(nil, fmt.Errorf("failed to create HTTP request: %w", err))
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "text/event-stream")
		for k, vs := range params {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
		resp, err := t.client.Do(req)
		if err != nil {
			yield(nil, fmt.Errorf("failed to send HTTP request: %w", err))
			return
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			yield(nil, fmt.Errorf(httpStatusText+"%s", resp.Status)) // as a2a-go words it (classify.go)
			return
		}
		// The body is read for as long as the work lasts, and it keeps
		// the answer alive (for its trailers): not its headers nor the
		// request, with the request's body, none of which is read again.
		resp.Header, resp.Request = nil, nil
		for data, err := range sseData(resp.Body, maxStreamEvent) {
			if err != nil {
				yield(nil, err)
				return
			}
			var ev a2a.Event
			t.stacks.Run(func() { ev, err = streamEvent(ctx, data) })
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

// streamEvent decodes one SSE event's data: a JSON-RPC response holding a
// stream response, or an error. The stream's goroutine waits in a shallow
// read between events, and decoding is deep: it runs on a stack of its
// own (ownstack), so that the goroutine's stays small.
func streamEvent(ctx context.Context, data []byte) (a2a.Event, error) {
	var r rpcResponse
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("failed to parse SSE data: %w", err)
	}
	if len(r.Error) > 0 && !bytes.Equal(r.Error, []byte("null")) {
		return nil, rpcError(ctx, data)
	}
	var sr a2a.StreamResponse
	if err := json.Unmarshal(r.Result, &sr); err != nil {
		return nil, err
	}
	return sr.Event, nil
}

// rpcError returns the error a2a-go makes of resp, a JSON-RPC response
// holding an error: a2a-go's JSON-RPC transport reads it as the answer to
// a call, so its code and details become the A2A error a2a-go would have
// returned. Streams rarely end with an error; the cost does not matter.
func rpcError(ctx context.Context, resp []byte) error {
	replay := &http.Client{Transport: replayedResponse(resp)}
	_, err := a2aclient.NewJSONRPCTransport("http://a2a-error.invalid/", replay).GetTask(ctx, nil, &a2a.GetTaskRequest{})
	if err == nil {
		return errors.New("the stream ended with an error response a2a-go reads as none")
	}
	return err
}

// replayedResponse is an http.RoundTripper answering any request with a
// JSON body of its bytes.
type replayedResponse []byte

func (b replayedResponse) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(bytes.NewReader(b)), Request: r}, nil
}

// errStreamEventTooLong ends a stream with an event over its bound.
var errStreamEventTooLong = errors.New("SSE event too long")

// sseData yields the data of each event of an SSE stream, as a2a-go's
// reader does: the values of an event's "data:" lines (less one space
// after the colon) joined by "\n", an event ending at a blank line or at
// the end of the stream, and yielded unless its data is empty; other
// lines are skipped. Lines end with "\n" or "\r\n". An event over max
// bytes, or a read that fails, ends it with an error. The data yielded is
// valid until the next event is read.
func sseData(body io.Reader, max int) iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		br := bufio.NewReaderSize(body, streamReadBuffer)
		var event, long []byte
		for {
			line, err := br.ReadSlice('\n')
			if errors.Is(err, bufio.ErrBufferFull) {
				long = append(long[:0], line...)
				for errors.Is(err, bufio.ErrBufferFull) && len(long) <= max {
					line, err = br.ReadSlice('\n')
					long = append(long, line...)
				}
				line = long
			}
			if len(line) > max {
				yield(nil, fmt.Errorf("SSE stream error: %w", errStreamEventTooLong))
				return
			}
			if err != nil && !errors.Is(err, io.EOF) {
				yield(nil, fmt.Errorf("SSE stream error: %w", err))
				return
			}
			eof := err != nil
			line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
			switch {
			case len(line) == 0 && !eof:
				if len(event) > 0 && !yield(event, nil) {
					return
				}
				// Let the event go: the stream may wait hours for the
				// next, and 10,000 streams would hold a buffer each.
				event = nil
			case bytes.HasPrefix(line, []byte("data:")):
				v := bytes.TrimPrefix(line[len("data:"):], []byte(" "))
				if len(event) > 0 {
					event = append(event, '\n')
				}
				if len(event)+len(v) > max {
					yield(nil, fmt.Errorf("SSE stream error: %w", errStreamEventTooLong))
					return
				}
				event = append(event, v...)
			}
			long = nil // gathered for this line only
			if eof {
				if len(event) > 0 {
					yield(event, nil)
				}
				return
			}
		}
	}
}
