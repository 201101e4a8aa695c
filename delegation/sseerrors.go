package delegation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
)

// The errors an agent sends on a stream are turned into a2a errors by
// a2a-go itself, so that callers see what a2a-go's own transports would
// give them (the sentinel for the code, the message, the details and the
// ErrorInfo metadata). a2a-go exports no decoder for them (its mapping is
// in internal/jsonrpc and internal/rest), but its transports run it on any
// error answer: a2aError and restError hand one of them the error as the
// answer to a unary call, through an http.Client that answers from memory
// and never dials.

// answered is an http.RoundTripper that answers every request with resp,
// once.
type answered struct{ resp *http.Response }

// RoundTrip implements [http.RoundTripper].
func (a *answered) RoundTrip(req *http.Request) (*http.Response, error) {
	resp := a.resp
	if resp == nil {
		return nil, errors.New("decode an agent's error: asked twice")
	}
	a.resp = nil
	resp.Request = req
	return resp, nil
}

// answering is an http.Client that gives resp to a2a-go and follows no
// redirect.
func answering(resp *http.Response) *http.Client {
	return &http.Client{
		Transport:     &answered{resp: resp},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// errorHost is the host the decoding calls are addressed to; nothing dials
// it.
const errorHost = "a2a.invalid"

// a2aError is the a2a error for the JSON-RPC error object raw that an
// agent sent in a stream.
func a2aError(ctx context.Context, raw json.RawMessage) error {
	body := make([]byte, 0, len(raw)+40)
	body = append(body, `{"jsonrpc":"2.0","id":"","error":`...)
	body = append(append(body, raw...), '}')
	t := a2aclient.NewJSONRPCTransport("http://"+errorHost, answering(&http.Response{
		StatusCode: http.StatusOK,
		Status:     "200 OK",
		Header:     http.Header{"Content-Type": {"application/json"}},
		Body:       io.NopCloser(bytes.NewReader(body)),
	}))
	_, err := t.GetTask(ctx, nil, &a2a.GetTaskRequest{})
	if err == nil { // an error object a2a-go reads as none
		return fmt.Errorf("agent sent an unreadable error %.200s: %w", raw, a2a.ErrInternalError)
	}
	return err
}

// restError is the a2a error for an HTTP+JSON error answer (not 200 OK),
// at most maxSSEEvent bytes of it read. It closes resp's body.
func restError(ctx context.Context, resp *http.Response) error {
	defer resp.Body.Close()
	limited := *resp
	limited.Body = io.NopCloser(io.LimitReader(resp.Body, maxSSEEvent))
	t := a2aclient.NewRESTTransport(&url.URL{Scheme: "http", Host: errorHost}, answering(&limited))
	_, err := t.GetTask(ctx, nil, &a2a.GetTaskRequest{ID: "error"})
	if err == nil { // cannot be: a2a-go maps every such answer to an error
		return fmt.Errorf("unexpected HTTP status: %s: %w", resp.Status, a2a.ErrServerError)
	}
	return err
}
