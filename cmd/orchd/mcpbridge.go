package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http/httptrace"
	"net/url"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// errRejectedByTransport matches go-sdk's "rejected by transport" error
// (jsonrpc.Error's Is compares codes). The connection wraps the failure
// of a message in it when the connection itself goes on: the daemon could
// not be reached, answered 5xx, or answered the message with a JSON-RPC
// error, which then comes first in the error. Any other failure of a
// message broke the connection.
var errRejectedByTransport = &jsonrpc.Error{Code: -32005}

// bridge relays JSON-RPC messages between an MCP host on stdio (local)
// and a daemon's /mcp over Streamable HTTP (remote), both go-sdk
// connections: every message from the host goes to the daemon as it came,
// and every message from the daemon (answers, progress, its requests to
// the host such as elicitation/create) to the host. It is not an MCP peer
// itself: it keeps no session, capabilities or tool list of its own, so
// whatever protocol version, method or extension the host and the daemon
// agree on passes through. What it keeps is transport bookkeeping: the
// host's calls not yet answered, so that it can answer one the daemon
// could not be asked, and the version an initialize agreed
// (daemonTransport).
type bridge struct {
	endpoint string
	local    mcp.Connection
	remote   mcp.Connection
	daemon   *daemonTransport
	log      *slog.Logger

	// stop ends the bridge with a cause.
	stop context.CancelCauseFunc
	// calls are the goroutines sending the host's calls.
	calls sync.WaitGroup

	mu sync.Mutex
	// open are the host's calls not yet answered, each with a channel
	// closed once its answer went to the host.
	open map[jsonrpc.ID]*openCall
}

// openCall is a call of the host's waiting for its answer.
type openCall struct {
	initialize bool
	answered   chan struct{}
}

// run relays until the host closes stdin and its open calls are answered
// (nil), ctx ends (nil: a signal asked it to stop) or the relay cannot go
// on (the daemon refused the token, lost the session, stdout is gone).
func (b *bridge) run(ctx context.Context) error {
	ctx, b.stop = context.WithCancelCause(ctx)
	b.open = map[jsonrpc.ID]*openCall{}
	var down sync.WaitGroup
	down.Go(func() { b.stop(b.down(ctx)) })
	b.stop(b.up(ctx))
	// Closing the remote connection ends its streams and, with a
	// session, asks the daemon to end it (DELETE).
	_ = b.remote.Close()
	down.Wait()
	b.calls.Wait()
	_ = b.local.Close()
	if err := context.Cause(ctx); !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// up relays the host's messages to the daemon until stdin ends or ctx
// does. A call is sent on a goroutine of its own, as its HTTP request
// lasts until the daemon answers it, and the next message is read once
// the call's request was written, so the daemon gets the host's messages
// in the order the host sent them. Nothing follows an initialize until it
// is answered: its answer holds the session the next messages belong to.
// Ending at the end of stdin, up first waits for the answers to the
// host's open calls: a host that wrote its requests and closed stdin
// still gets them.
func (b *bridge) up(ctx context.Context) error {
	for {
		msg, err := b.local.Read(ctx)
		if errors.Is(err, io.EOF) {
			b.drain(ctx)
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil //nolint:nilerr // the bridge was asked to stop: not a failure
			}
			return fmt.Errorf("read the host's messages on stdin: %w", err)
		}
		req, ok := msg.(*jsonrpc.Request)
		if !ok || !req.IsCall() {
			// A notification, or the host's answer to the daemon.
			err := b.remote.Write(ctx, msg)
			switch {
			case err == nil || ctx.Err() != nil:
			case !errors.Is(err, errRejectedByTransport):
				return b.explain(err)
			default:
				b.log.Warn("orchd mcp: a message from the host did not reach the daemon", "err", b.explain(err))
			}
			continue
		}
		call := b.track(req)
		sent := make(chan struct{})
		b.calls.Go(func() { b.send(ctx, req, sent) })
		select {
		case <-sent:
		case <-ctx.Done():
			return nil
		}
		if call.initialize {
			select {
			case <-call.answered:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// send sends the host's call req to the daemon, closing sent once its
// request was written (or could not be), and answers the host with an
// error when the daemon could not be asked.
func (b *bridge) send(ctx context.Context, req *jsonrpc.Request, sent chan struct{}) {
	var once sync.Once
	written := func() { once.Do(func() { close(sent) }) }
	defer written()
	tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) { written() }})
	err := b.remote.Write(tctx, req)
	if err == nil {
		return
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		// Stopped before the daemon answered: the bridge is stopping.
		b.forget(req.ID)
		return
	}
	var werr *jsonrpc.Error
	switch {
	case !errors.Is(err, errRejectedByTransport):
		// The connection to the daemon broke: the bridge stops, and the
		// answer tells the host why. The stop comes first, so that it is
		// the bridge's outcome whatever the host does once answered.
		broke := b.explain(err)
		werr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: broke.Error()}
		b.stop(broke)
	case errors.As(err, &werr) && werr.Code != errRejectedByTransport.Code:
		// The daemon's own JSON-RPC error: passed on as it is.
	default:
		werr = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: b.explain(err).Error()}
		b.log.Warn("orchd mcp: a call from the host did not reach the daemon", "method", req.Method, "err", werr.Message)
	}
	// The answer goes out even when the bridge is stopping: it tells the
	// host why.
	if err := b.answer(context.WithoutCancel(ctx), &jsonrpc.Response{ID: req.ID, Error: werr}); err != nil {
		b.stop(fmt.Errorf("write to the host on stdout: %w", err))
	}
}

// down relays the daemon's messages to the host until ctx ends or the
// connection to the daemon fails, and returns why it stopped.
func (b *bridge) down(ctx context.Context) error {
	for {
		msg, err := b.remote.Read(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil //nolint:nilerr // the bridge was asked to stop: not a failure
			}
			return b.explain(err)
		}
		if resp, ok := msg.(*jsonrpc.Response); ok {
			err = b.answer(ctx, resp)
		} else {
			err = b.local.Write(ctx, msg)
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil //nolint:nilerr // the bridge was asked to stop: not a failure
			}
			return fmt.Errorf("write to the host on stdout: %w", err)
		}
	}
}

// answer writes resp, the answer to a call of the host's, to the host. The
// answer to an initialize gives the protocol version the later requests
// name.
func (b *bridge) answer(ctx context.Context, resp *jsonrpc.Response) error {
	b.mu.Lock()
	call := b.open[resp.ID]
	delete(b.open, resp.ID)
	b.mu.Unlock()
	if call != nil {
		defer close(call.answered)
		if call.initialize && resp.Error == nil {
			var r struct {
				ProtocolVersion string `json:"protocolVersion"`
			}
			if json.Unmarshal(resp.Result, &r) == nil {
				b.daemon.agree(r.ProtocolVersion)
			}
		}
	}
	return b.local.Write(ctx, resp)
}

// track records req, a call of the host's, as open.
func (b *bridge) track(req *jsonrpc.Request) *openCall {
	c := &openCall{initialize: req.Method == "initialize", answered: make(chan struct{})}
	b.mu.Lock()
	old := b.open[req.ID]
	b.open[req.ID] = c
	b.mu.Unlock()
	if old != nil {
		// The host reused the id of a call still open: only one of the
		// two can be told apart from the answers, so stop waiting for
		// the earlier.
		close(old.answered)
	}
	return c
}

// forget drops the open call id, which will not be answered.
func (b *bridge) forget(id jsonrpc.ID) {
	b.mu.Lock()
	c := b.open[id]
	delete(b.open, id)
	b.mu.Unlock()
	if c != nil {
		close(c.answered)
	}
}

// drain waits until the host's open calls are answered, or ctx ends.
func (b *bridge) drain(ctx context.Context) {
	b.mu.Lock()
	waits := make([]chan struct{}, 0, len(b.open))
	for _, c := range b.open {
		waits = append(waits, c.answered)
	}
	b.mu.Unlock()
	for _, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			return
		}
	}
}

// explain says why a message could not go to the daemon, or why the
// connection to it failed, in the terms a person fixes it in.
func (b *bridge) explain(err error) error {
	if r := b.daemon.refusal(); r != nil {
		return fmt.Errorf("orchd at %s refused the call: %w", b.endpoint, r)
	}
	if errors.Is(err, mcp.ErrSessionMissing) {
		return fmt.Errorf("orchd at %s no longer has this MCP session (it restarted, or the session ended); start orchd mcp again", b.endpoint)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("reach orchd at %s: %w", b.endpoint, ue.Err)
	}
	return fmt.Errorf("orchd at %s: %w", b.endpoint, err)
}
