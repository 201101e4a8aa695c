package delegation

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// maxAgentAnswer bounds an agent's answer that orchd reads whole (a task
// read by a poll, a message, an error), as maxStreamEvent bounds one
// event of a stream: an agent cannot make orchd hold more of either.
const maxAgentAnswer = maxStreamEvent

// ErrAnswerTooLarge is an agent's answer over maxAgentAnswer. A poll that
// meets it fails the delegation at once: reading the task again would
// bring the same.
var ErrAnswerTooLarge = errors.New("the agent's answer is larger than orchd reads")

// boundedAnswers returns hc with its answers read whole bounded by limit:
// one that declares a larger length is refused before its body is read,
// and one that runs past limit fails the read. Event streams pass as they
// are; their reader bounds each event.
func boundedAnswers(hc *http.Client, limit int64) *http.Client {
	return withTransport(hc, func(rt http.RoundTripper) http.RoundTripper {
		return boundedTransport{rt: rt, limit: limit}
	})
}

// boundedTransport bounds the bodies of the answers rt gets.
type boundedTransport struct {
	rt    http.RoundTripper
	limit int64
}

func (t boundedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(r)
	if err != nil || eventStream(resp) {
		return resp, err
	}
	if resp.ContentLength > t.limit {
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s: %w: %d bytes declared, over %d", r.Method, r.URL.Redacted(), ErrAnswerTooLarge, resp.ContentLength, t.limit)
	}
	resp.Body = &boundedBody{rc: resp.Body, left: t.limit, limit: t.limit}
	return resp, nil
}

// CloseIdleConnections closes the idle connections of the transport
// underneath, as http.Client.CloseIdleConnections expects.
func (t boundedTransport) CloseIdleConnections() { closeIdle(t.rt) }

// eventStream reports whether an answer is a stream of server-sent
// events.
func eventStream(resp *http.Response) bool {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

// boundedBody is an answer's body that fails once more than limit bytes
// were read from it; left are the bytes it may still give.
type boundedBody struct {
	rc          io.ReadCloser
	left, limit int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, b.tooLarge()
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n, b.tooLarge()
	}
	return n, err
}

func (b *boundedBody) Close() error { return b.rc.Close() }

func (b *boundedBody) tooLarge() error {
	return fmt.Errorf("%w: over %d bytes", ErrAnswerTooLarge, b.limit)
}
