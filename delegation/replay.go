package delegation

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"

	"github.com/orchd/orchd/steering"
)

// A steering signal sent again when its connection failed.
//
// An agent's HTTP server may close a kept-alive connection just as the
// next request goes out on it (its idle timeout; a connection the client
// dialed and did not use yet, which net/http's server gives only its
// header timeout): the request meets EOF before any answer.
// net/http sends such a request again on a new connection only when it
// is idempotent: GET and the like, or a request with an Idempotency-Key
// header. A steer or an interrupt is: every hop takes a signal once by
// its message id and answers a repeat with the first one's receipt
// (Engine.Steer, steering.Inbox). So it carries that header, and a
// signal is not lost to a connection that the agent closed under it.
// Measured before: in 2 of 18 runs of 1,000 steers through two orchd hops
// under load, a steer failed with "Post …: EOF", on connections the
// downstream orchd closed unused after 10 s (which it no longer does:
// httpgate.AwaitFirstByte).

// idempotencyHeader is the header net/http takes for a request that may
// be sent again (http.Transport's documentation).
const idempotencyHeader = "Idempotency-Key"

// replayableSignals marks each steering signal's request idempotent.
type replayableSignals struct {
	a2aclient.PassthroughInterceptor
}

// Before implements a2aclient.CallInterceptor. The key is a digest of
// the message id, not the id itself, which may hold bytes a header
// cannot.
func (replayableSignals) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	m, ok := req.Payload.(*a2a.SendMessageRequest)
	if !ok || m.Message == nil || m.Message.ID == "" || req.ServiceParams == nil {
		return ctx, nil, nil
	}
	if _, signal := m.Message.Metadata[steering.ControlKey]; signal {
		sum := sha256.Sum256([]byte(m.Message.ID))
		req.ServiceParams.Append(idempotencyHeader, hex.EncodeToString(sum[:16]))
	}
	return ctx, nil, nil
}
