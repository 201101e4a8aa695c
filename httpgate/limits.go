package httpgate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
)

// Limits are the bounds BodyLimits keeps; every field must be positive.
type Limits struct {
	// MaxBodyBytes bounds an A2A request body; refusals name it
	// http.maxBodyBytes.
	MaxBodyBytes int64
	// MaxAPIBodyBytes bounds an HTTP API request body; refusals name it
	// http.maxAPIBodyBytes.
	MaxAPIBodyBytes int64
	// MaxJSONDepth bounds how deeply a body's JSON objects and arrays
	// nest (http.maxJSONDepth).
	MaxJSONDepth int
	// MaxBufferedBodyBytes bounds the body bytes held at once across
	// every request (http.maxBufferedBodyBytes).
	MaxBufferedBodyBytes int64
	// ReadTimeout is the server's (http.readTimeout): named in the
	// refusal of a body that did not arrive within it, it also bounds a
	// wait for room among the buffered bytes.
	ReadTimeout time.Duration
}

// BodyLimits reads request bodies whole, bounded in size, before the
// endpoint sees them, and refuses those nested too deeply; a2a-go's
// handlers and the API's decoder then read the checked copy. The bytes
// held across all requests are bounded by budget.
type BodyLimits struct {
	maxBytes    int64
	maxAPIBytes int64
	maxDepth    int
	// readTimeout is the server's, named in the refusal of a body that
	// did not arrive within it; it also bounds a wait for budget.
	readTimeout time.Duration
	// budget holds budgetBytes, taken by the bodies being held;
	// refusedRoom, maxRefusedBodies bytes, the bodies of refused callers.
	budget      *semaphore.Weighted
	budgetBytes int64
	refusedRoom *semaphore.Weighted
	log         *slog.Logger
}

// NewBodyLimits returns the body limits c sets; log gets the refusals.
func NewBodyLimits(c Limits, log *slog.Logger) *BodyLimits {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &BodyLimits{maxBytes: c.MaxBodyBytes, maxAPIBytes: c.MaxAPIBodyBytes, maxDepth: c.MaxJSONDepth,
		readTimeout: c.ReadTimeout, budget: semaphore.NewWeighted(c.MaxBufferedBodyBytes), budgetBytes: c.MaxBufferedBodyBytes,
		refusedRoom: semaphore.NewWeighted(maxRefusedBodies), log: log}
}

// A2A bounds the bodies of an A2A endpoint by MaxBodyBytes, refusing with
// write, in the endpoint's own answer shape. The body of a caller the gate
// refused and admitted (Gate.Admit) is read only up to
// MaxRefusedBodyBytes; a larger one is never read, and the endpoint gets
// stand's body instead, to refuse the caller itself.
func (l *BodyLimits) A2A(next http.Handler, write RefusalWriter, stand StandIn) http.Handler {
	return l.wrap(next, l.maxBytes, "http.maxBodyBytes", write, stand, false)
}

// API bounds the bodies of the HTTP API by MaxAPIBodyBytes, refusing with
// write. The gate answers the API's refused callers itself (Gate.Wrap),
// before any of this.
func (l *BodyLimits) API(next http.Handler, write RefusalWriter) http.Handler {
	return l.wrap(next, l.maxAPIBytes, "http.maxAPIBodyBytes", write, nil, false)
}

// JSONRPC bounds the bodies of a JSON-RPC endpoint the gate guards
// itself (the MCP endpoint) as API does. Its clients match an answer to
// its request by id, so the refusal of a body declared too large names
// the request's id, read from the body's first IDPrefixBytes; the rest
// is never read.
func (l *BodyLimits) JSONRPC(next http.Handler, write RefusalWriter) http.Handler {
	return l.wrap(next, l.maxAPIBytes, "http.maxAPIBodyBytes", write, nil, true)
}

// IDPrefixBytes is how much of a body declared too large JSONRPC reads to
// find its request's id.
const IDPrefixBytes = 1024

// Refusal is why a request body was not passed on.
type Refusal struct {
	// Status is the HTTP status REST and API answers carry.
	Status int
	// Code is the API error code.
	Code string
	// Msg says why, for a person.
	Msg string
	// Limit and Setting name the limit that refused the body (the read
	// timeout for a body that did not arrive in time); empty when the
	// body could not be read for another reason.
	Limit, Setting string
	// ID is the JSON-RPC request id, when the body's prefix held one.
	ID any
	// Busy marks a body refused for want of budget, not for anything in
	// it: a server error, where the others are invalid requests.
	Busy bool
}

// RefusalWriter writes a refusal in one endpoint's answer shape.
type RefusalWriter func(w http.ResponseWriter, rf *Refusal)

// MaxRefusedBodyBytes is the most of a body orchd reads from a caller the
// gate refused at an A2A endpoint, where the refusal is the endpoint's own
// A2A error: enough for any ordinary request, whose method and id the
// answer then names; a larger body is never read (StandIn).
const MaxRefusedBodyBytes = 16 << 10

// maxRefusedBodies bounds the bytes of refused callers' bodies read at
// once: 64 of the largest. Past it, their bodies are not read.
const maxRefusedBodies = 64 * (MaxRefusedBodyBytes + 1)

// StandIn is what an A2A endpoint reads in place of the body of a caller
// the gate refused, when that body is too large to read: the smallest
// request a2a-go decodes and passes to the interceptors, which answer it
// with A2A's unauthenticated error in the endpoint's own shape (an SSE
// event, when the caller asked for a stream).
type StandIn func(r *http.Request) []byte

// wrap reads r's body into a pooled buffer, at most limit+1 bytes of it,
// and passes the checked copy on. A declared Content-Length over limit is
// refused before anything is read (but the id's prefix, with peekID); a longer chunked body is cut at
// limit+1. The body's bytes are held under l.budget while they are
// needed. At an A2A endpoint (stand is set), the body of a caller the gate
// refused is read only up to MaxRefusedBodyBytes; a larger one is never
// read, and a2a-go gets stand's request instead, to refuse.
func (l *BodyLimits) wrap(next http.Handler, limit int64, setting string, write RefusalWriter, stand StandIn, peekID bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		limit := limit
		refused := stand != nil && Refused(r.Context()) != ""
		var reserve func(total int64) error // nil: from the budget
		if refused {
			// Refused callers read within room of their own, never waiting
			// for it, so they cannot hold the budget authenticated bodies
			// need; with none left, their bodies are not read at all.
			limit = min(limit, MaxRefusedBodyBytes)
			if r.ContentLength > limit || !l.refusedRoom.TryAcquire(limit+1) {
				l.standIn(w, r, next, stand)
				return
			}
			defer l.refusedRoom.Release(limit + 1)
			reserve = func(int64) error { return nil }
		}
		if r.ContentLength > limit {
			rf := &Refusal{Status: http.StatusRequestEntityTooLarge, Code: "invalid_argument",
				Msg:   fmt.Sprintf("request body of %d bytes is over the limit of %d bytes (%s)", r.ContentLength, limit, setting),
				Limit: strconv.FormatInt(limit, 10), Setting: setting}
			if peekID {
				prefix := make([]byte, IDPrefixBytes)
				n, _ := io.ReadFull(r.Body, prefix)
				rf.ID = JSONRPCID(prefix[:n])
			}
			l.refuse(w, r, write, rf)
			return
		}
		body := bodyPool.Get().(*pooledBody)
		defer body.release()
		if reserve == nil {
			reserve = l.reserver(r.Context(), body)
		}
		err := body.readFrom(r.Body, limit, r.ContentLength, reserve)
		n := int64(len(body.buf))
		switch {
		case errors.Is(err, errBusy):
			l.refuse(w, r, write, &Refusal{Status: http.StatusServiceUnavailable, Code: "unavailable", Busy: true,
				Msg:   fmt.Sprintf("orchd holds as many request body bytes as it may (http.maxBufferedBodyBytes) and none made room within %s: try again", l.readTimeout),
				Limit: strconv.FormatInt(l.budgetBytes, 10), Setting: "http.maxBufferedBodyBytes"})
			return
		case err != nil:
			rf := &Refusal{Status: http.StatusBadRequest, Code: "invalid_argument", Msg: "read request body: " + err.Error()}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				rf.Status, rf.Code = http.StatusRequestTimeout, "timeout"
				rf.Msg = "request body not received in time (http.readTimeout): " + err.Error()
				rf.Limit, rf.Setting = l.readTimeout.String(), "http.readTimeout"
			}
			l.refuse(w, r, write, rf)
			return
		case n > limit && refused:
			l.standIn(w, r, next, stand)
			return
		case n > limit:
			l.refuse(w, r, write, &Refusal{Status: http.StatusRequestEntityTooLarge, Code: "invalid_argument",
				Msg:   fmt.Sprintf("request body is over the limit of %d bytes (%s)", limit, setting),
				Limit: strconv.FormatInt(limit, 10), Setting: setting, ID: JSONRPCID(body.buf)})
			return
		}
		if depth, idAt := scanJSON(body.buf); depth > l.maxDepth {
			l.refuse(w, r, write, &Refusal{Status: http.StatusBadRequest, Code: "invalid_argument",
				Msg:   fmt.Sprintf("request body nests JSON %d levels deep, over the limit of %d (http.maxJSONDepth)", depth, l.maxDepth),
				Limit: strconv.Itoa(l.maxDepth), Setting: "http.maxJSONDepth", ID: jsonRPCIDAt(body.buf, idAt)})
			return
		}
		body.rd.Reset(body.buf)
		r.Body, r.ContentLength = body, n
		next.ServeHTTP(&answerWriter{ResponseWriter: w, body: body}, r)
	})
}

// answerWriter gives a body's budget back once the endpoint starts its
// answer: by then it has read and decoded the body (the decoding, which
// holds copies of it, is what the budget must also cover; a2a-go reads a
// streamed call's parameters from the decoded request after it starts
// the stream, so that last copy is not), and an answer that streams may
// last far longer than the body is needed, so a stream read to its end
// lets its buffer go too rather than holding it until the stream ends.
type answerWriter struct {
	http.ResponseWriter
	body *pooledBody
	done bool
}

func (a *answerWriter) WriteHeader(code int) {
	a.answered()
	a.ResponseWriter.WriteHeader(code)
}

func (a *answerWriter) Write(p []byte) (int, error) {
	a.answered()
	return a.ResponseWriter.Write(p)
}

// Flush passes a flush on, as a2a-go's event streams ask for one.
func (a *answerWriter) Flush() {
	a.answered()
	_ = http.NewResponseController(a.ResponseWriter).Flush()
}

// answered gives the body's budget back, and its buffer too when the
// answer is an event stream and the body was read to its end.
func (a *answerWriter) answered() {
	if a.done {
		return
	}
	a.done = true
	a.body.giveBack()
	if eventStream(a.Header()) && a.body.rd.Len() == 0 {
		a.body.buf = nil
		a.body.rd.Reset(nil)
	}
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (a *answerWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// standIn passes r on with stand's body in place of its own, which is not
// read; the connection closes after the answer.
func (l *BodyLimits) standIn(w http.ResponseWriter, r *http.Request, next http.Handler, stand StandIn) {
	b := stand(r)
	w.Header().Set("Connection", "close")
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
	next.ServeHTTP(w, r)
}

// errBusy is a body's wait for budget that ran out.
var errBusy = errors.New("no budget for the body")

// reserver returns how a body of a request with ctx takes budget: total is
// how many bytes the body holds once the next read is in; the wait for
// room is bounded by the read timeout. What it takes, body.release gives
// back.
func (l *BodyLimits) reserver(ctx context.Context, body *pooledBody) func(total int64) error {
	body.budget = l.budget
	return func(total int64) error {
		more := total - body.held
		if more <= 0 {
			return nil
		}
		if !l.budget.TryAcquire(more) {
			wait, cancel := context.WithTimeout(ctx, l.readTimeout)
			defer cancel()
			if err := l.budget.Acquire(wait, more); err != nil {
				return errBusy
			}
		}
		body.held += more
		return nil
	}
}

// refuse logs a refused body and answers it; the connection closes after
// the answer, as the rest of the body may still be on its way.
func (l *BodyLimits) refuse(w http.ResponseWriter, r *http.Request, write RefusalWriter, rf *Refusal) {
	l.log.InfoContext(r.Context(), "request body refused", "method", r.Method, "path", r.URL.Path, "error", rf.Msg)
	w.Header().Set("Connection", "close")
	write(w, rf)
}

// pooledBody is a request body read whole, reused across requests so a
// typical one costs no allocation.
type pooledBody struct {
	buf []byte
	rd  bytes.Reader
	// held is how many bytes of budget the body holds.
	held   int64
	budget *semaphore.Weighted
}

// maxPooledBody is the largest buffer kept for reuse; larger ones, for
// rare large bodies, are left to the garbage collector.
const maxPooledBody = 1 << 20

var bodyPool = sync.Pool{New: func() any { return new(pooledBody) }}

// readFrom reads src into the buffer until EOF or past limit: limit+1
// bytes at most. declared is the Content-Length, at most limit, or -1 when
// the body is chunked. The buffer doubles as it fills, from firstRead, and
// never grows past what the body may hold, so memory follows the bytes
// that arrived, not the bytes a client declared, and a body cut at the
// limit holds limit+1 bytes. reserve is called with the bytes the body
// will hold before each read that may hold more: a declared body's whole
// size at once, a chunked one's as its buffer grows.
func (b *pooledBody) readFrom(src io.Reader, limit, declared int64, reserve func(total int64) error) error {
	ceiling := int(min(limit, math.MaxInt-1) + 1) // no overflow for the largest limit
	if declared >= 0 {
		ceiling = min(ceiling, int(min(declared, math.MaxInt-1))+1) // +1: room to read EOF
		if err := reserve(int64(ceiling)); err != nil {
			return err
		}
	}
	buf := b.buf[:0]
	for len(buf) < ceiling {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(max(cap(buf), firstRead), ceiling-len(buf)))
		}
		to := min(cap(buf), ceiling)
		if err := reserve(int64(to)); err != nil {
			b.buf = buf
			return err
		}
		n, err := src.Read(buf[len(buf):to])
		buf = buf[:len(buf)+n]
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			b.buf = buf
			return err
		}
	}
	b.buf = buf
	return nil
}

// firstRead is the first buffer a body is read into when it may be
// larger.
const firstRead = 64 << 10

// Read reads the body. Once its last byte is read, a buffer too large to
// be pooled is let go (the reader has its own copy), so a request that
// goes on long after its body was decoded (an event stream) does not hold
// it; its budget is given back with the answer (answerWriter).
func (b *pooledBody) Read(p []byte) (int, error) {
	n, err := b.rd.Read(p)
	if b.rd.Len() == 0 && cap(b.buf) > maxPooledBody {
		b.buf = nil
		b.rd.Reset(nil)
	}
	return n, err
}

// Close does nothing: the buffer goes back to the pool once the handler
// has returned.
func (b *pooledBody) Close() error { return nil }

// giveBack returns the body's budget.
func (b *pooledBody) giveBack() {
	if b.held > 0 {
		b.budget.Release(b.held)
		b.held = 0
	}
}

func (b *pooledBody) release() {
	b.giveBack()
	b.budget = nil
	if cap(b.buf) > maxPooledBody {
		b.buf = nil
		return
	}
	b.buf = b.buf[:0]
	b.rd.Reset(nil)
	bodyPool.Put(b)
}

// scanJSON returns how deeply b's objects and arrays nest and where the
// value of the top-level object's "id" member starts (-1 if it has none).
// It does not validate b: the decoder that reads b next does. It reads each
// byte once and allocates nothing, as it runs on every request body.
func scanJSON(b []byte) (depth, idAt int) {
	idAt = -1
	d := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '{', '[':
			d++
			depth = max(depth, d)
		case '}', ']':
			d--
		case '"':
			start := i + 1
			end := stringEnd(b, start)
			if end < 0 {
				return depth, idAt
			}
			i = end
			if d == 1 && idAt < 0 && end-start == 2 && b[start] == 'i' && b[start+1] == 'd' {
				if at := afterColon(b, end+1); at >= 0 {
					idAt = at
				}
			}
		}
	}
	return depth, idAt
}

// stringEnd returns the index of the quote closing the JSON string whose
// contents start at b[start], or -1 when it does not close.
func stringEnd(b []byte, start int) int {
	for j := start; ; {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		escapes := 0
		for p := j - 1; p >= start && b[p] == '\\'; p-- {
			escapes++
		}
		if escapes%2 == 0 {
			return j
		}
		j++
	}
}

// afterColon returns where the value after a member name ending before
// b[i] starts, or -1 when no ':' follows the name (it was a value).
func afterColon(b []byte, i int) int {
	for i < len(b) && isJSONSpace(b[i]) {
		i++
	}
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	for i++; i < len(b) && isJSONSpace(b[i]); i++ {
	}
	return i
}

func isJSONSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// JSONRPCID returns the id of the JSON-RPC request in b, or nil: a string
// or a number as the client wrote it.
func JSONRPCID(b []byte) any {
	_, at := scanJSON(b)
	return jsonRPCIDAt(b, at)
}

// jsonRPCIDAt reads the JSON-RPC id whose value starts at b[at]: a string
// or a number as the client wrote it; anything else (or at < 0) is nil,
// as a2a-go answers requests whose id it cannot use.
func jsonRPCIDAt(b []byte, at int) any {
	if at < 0 || at >= len(b) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b[at:]))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil
	}
	switch v := tok.(type) {
	case string, json.Number:
		return v
	}
	return nil
}
