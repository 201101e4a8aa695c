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
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/errordetails"
	"golang.org/x/sync/semaphore"
)

// HTTPConfig is the config file's http section: the limits on what a
// client may send to any of orchd's endpoints, the A2A interfaces and the
// HTTP API alike. A zero field means its default; docs/api.md lists them.
type HTTPConfig struct {
	// MaxBodyBytes bounds an A2A request body (every A2A interface). A
	// larger one is refused before it is read. Default 8 MiB.
	MaxBodyBytes int64 `yaml:"maxBodyBytes"`
	// MaxAPIBodyBytes bounds an HTTP API request body (/v1/...). Default
	// 64 KiB.
	MaxAPIBodyBytes int64 `yaml:"maxAPIBodyBytes"`
	// MaxJSONDepth bounds how deeply a request body's JSON objects and
	// arrays nest, checked before the body is decoded. Default 64.
	MaxJSONDepth int `yaml:"maxJSONDepth"`
	// MaxBufferedBodyBytes bounds the request body bytes orchd holds at
	// once, across every request of every endpoint: a body waits for room
	// before it is read, up to ReadTimeout, and is refused as busy (503)
	// past that. Default 32 MiB.
	MaxBufferedBodyBytes int64 `yaml:"maxBufferedBodyBytes"`
	// ReadTimeout bounds reading one request, headers and body, from its
	// first byte. It does not bound the answer: event streams stay open.
	// Headers alone must arrive within 10s. Default 30s.
	ReadTimeout Duration `yaml:"readTimeout"`
	// IdleTimeout is how long a kept-alive connection may wait for its
	// next request. Default 60s.
	IdleTimeout Duration `yaml:"idleTimeout"`
	// StreamWriteTimeout bounds one write of an event stream (the API's
	// /events, A2A streaming): a client that reads nothing for that long
	// is cut off (streamwrite.go). Default 30s.
	StreamWriteTimeout Duration `yaml:"streamWriteTimeout"`
	// TLS serves HTTPS with this certificate instead of HTTP; auth.mtls
	// needs it.
	TLS *TLSConfig `yaml:"tls"`
	// AllowedHosts lists host names callers reach orchd by, besides IP
	// addresses, localhost and the hosts of listen, agent.url and
	// delegation.pushURL. Requests a browser could send on its own must
	// name one in Host (browserguard.go).
	AllowedHosts []string `yaml:"allowedHosts"`
}

// TLSConfig is the certificate orchd serves HTTPS with.
type TLSConfig struct {
	// CertFile and KeyFile are PEM files: the certificate chain and its
	// private key.
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

// The http section's defaults, used for zero fields.
const (
	defaultMaxBodyBytes    = 8 << 20
	defaultMaxAPIBodyBytes = 64 << 10
	defaultMaxJSONDepth    = 64
	// defaultMaxBufferedBodyBytes holds four bodies of the largest A2A
	// size at once, or thousands of ordinary ones.
	defaultMaxBufferedBodyBytes = 32 << 20
	defaultReadTimeout          = 30 * time.Second
	defaultIdleTimeout          = 60 * time.Second
	defaultStreamWriteTimeout   = 30 * time.Second
	// readHeaderTimeout bounds the arrival of a request's headers.
	readHeaderTimeout = 10 * time.Second
)

// withDefaults returns c with every zero field set to its default.
func (c HTTPConfig) withDefaults() HTTPConfig {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = defaultMaxBodyBytes
	}
	if c.MaxAPIBodyBytes == 0 {
		c.MaxAPIBodyBytes = defaultMaxAPIBodyBytes
	}
	if c.MaxJSONDepth == 0 {
		c.MaxJSONDepth = defaultMaxJSONDepth
	}
	if c.MaxBufferedBodyBytes == 0 {
		c.MaxBufferedBodyBytes = defaultMaxBufferedBodyBytes
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = Duration(defaultReadTimeout)
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = Duration(defaultIdleTimeout)
	}
	if c.StreamWriteTimeout == 0 {
		c.StreamWriteTimeout = Duration(defaultStreamWriteTimeout)
	}
	return c
}

// validate refuses negative limits: every input has one.
func (c HTTPConfig) validate() error {
	switch {
	case c.MaxBodyBytes < 0:
		return fmt.Errorf("config: http.maxBodyBytes %d: want a positive size in bytes", c.MaxBodyBytes)
	case c.MaxAPIBodyBytes < 0:
		return fmt.Errorf("config: http.maxAPIBodyBytes %d: want a positive size in bytes", c.MaxAPIBodyBytes)
	case c.MaxJSONDepth < 0:
		return fmt.Errorf("config: http.maxJSONDepth %d: want a positive depth", c.MaxJSONDepth)
	case c.StreamWriteTimeout < 0:
		return fmt.Errorf("config: http.streamWriteTimeout %s: want a positive duration", time.Duration(c.StreamWriteTimeout))
	case c.MaxBufferedBodyBytes < 0:
		return fmt.Errorf("config: http.maxBufferedBodyBytes %d: want a positive size in bytes", c.MaxBufferedBodyBytes)
	case c.MaxBufferedBodyBytes > 0 && c.MaxBufferedBodyBytes <= max(c.withDefaults().MaxBodyBytes, c.withDefaults().MaxAPIBodyBytes):
		return fmt.Errorf("config: http.maxBufferedBodyBytes %d is not more than one body may hold (http.maxBodyBytes, http.maxAPIBodyBytes): the largest body could never be read",
			c.MaxBufferedBodyBytes)
	case c.TLS != nil && (c.TLS.CertFile == "" || c.TLS.KeyFile == ""):
		return fmt.Errorf("config: http.tls needs certFile and keyFile")
	}
	for i, h := range c.AllowedHosts {
		if h == "" || strings.ContainsAny(h, ":/*@ ") {
			return fmt.Errorf("config: http.allowedHosts[%d] %q: want a host name, without scheme, port or wildcard", i, h)
		}
	}
	return nil
}

// server returns an HTTP server for handler with the section's timeouts.
// Reading a request is bounded by ReadTimeout, but not its answer: once a
// body has been read to its end, net/http clears the read deadline while
// it watches the connection, so long event streams keep streaming.
func (c HTTPConfig) server(handler http.Handler, log *slog.Logger) *http.Server {
	c = c.withDefaults()
	return &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: min(readHeaderTimeout, time.Duration(c.ReadTimeout)),
		ReadTimeout:       time.Duration(c.ReadTimeout),
		IdleTimeout:       time.Duration(c.IdleTimeout),
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
}

// bodyLimits reads request bodies whole, bounded in size, before the
// endpoint sees them, and refuses those nested too deeply; a2a-go's
// handlers and the API's decoder then read the checked copy. The bytes
// held across all requests are bounded by budget.
type bodyLimits struct {
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

func newBodyLimits(c HTTPConfig, log *slog.Logger) *bodyLimits {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c = c.withDefaults()
	return &bodyLimits{maxBytes: c.MaxBodyBytes, maxAPIBytes: c.MaxAPIBodyBytes, maxDepth: c.MaxJSONDepth,
		readTimeout: time.Duration(c.ReadTimeout), budget: semaphore.NewWeighted(c.MaxBufferedBodyBytes), budgetBytes: c.MaxBufferedBodyBytes,
		refusedRoom: semaphore.NewWeighted(maxRefusedBodies), log: log}
}

// jsonRPC bounds the bodies of an A2A 1.0 JSON-RPC endpoint, refusing with
// a JSON-RPC error as a2a-go writes them.
func (l *bodyLimits) jsonRPC(next http.Handler) http.Handler {
	return l.wrap(next, l.maxBytes, "http.maxBodyBytes", writeJSONRPCRefusal, jsonRPCStandIn("SendMessage", "SendStreamingMessage"))
}

// jsonRPC03 bounds the bodies of the A2A 0.3 JSON-RPC endpoint, as jsonRPC.
func (l *bodyLimits) jsonRPC03(next http.Handler) http.Handler {
	return l.wrap(next, l.maxBytes, "http.maxBodyBytes", writeJSONRPCRefusal, jsonRPCStandIn("message/send", "message/stream"))
}

// rest bounds the bodies of an A2A 1.0 HTTP+JSON endpoint, refusing with a
// google.rpc.Status body as a2a-go writes them.
func (l *bodyLimits) rest(next http.Handler) http.Handler {
	return l.wrap(next, l.maxBytes, "http.maxBodyBytes", writeRESTRefusal, restStandIn)
}

// rest03 bounds the bodies of the A2A 0.3 HTTP+JSON endpoint; its refusals
// carry the fields every 0.3 client reads, as legacyRESTErrors adds them.
func (l *bodyLimits) rest03(next http.Handler) http.Handler {
	return l.wrap(next, l.maxBytes, "http.maxBodyBytes", writeREST03Refusal, restStandIn)
}

// api bounds the bodies of the HTTP API, refusing with its error body. The
// gate answers the API's refused callers itself, before any of this.
func (l *bodyLimits) api(next http.Handler) http.Handler {
	return l.wrap(next, l.maxAPIBytes, "http.maxAPIBodyBytes", writeAPIRefusal, nil)
}

// refusal is why a request body was not passed on.
type refusal struct {
	// status is the HTTP status REST and API answers carry.
	status int
	// code is the API error code.
	code string
	msg  string
	// limit and setting name the limit that refused the body (the read
	// timeout for a body that did not arrive in time); empty when the
	// body could not be read for another reason.
	limit, setting string
	// id is the JSON-RPC request id, when the body's prefix held one.
	id any
	// busy marks a body refused for want of budget, not for anything in
	// it: a server error, where the others are invalid requests.
	busy bool
}

// refusalWriter writes a refusal in one endpoint's answer shape.
type refusalWriter func(w http.ResponseWriter, rf *refusal)

// maxRefusedBodyBytes is the most of a body orchd reads from a caller the
// gate refused at an A2A endpoint, where the refusal is the endpoint's own
// A2A error: enough for any ordinary request, whose method and id the
// answer then names; a larger body is never read (standIn).
const maxRefusedBodyBytes = 16 << 10

// maxRefusedBodies bounds the bytes of refused callers' bodies read at
// once: 64 of the largest. Past it, their bodies are not read.
const maxRefusedBodies = 64 * (maxRefusedBodyBytes + 1)

// standIn is what an A2A endpoint reads in place of the body of a caller
// the gate refused, when that body is too large to read: the smallest
// request a2a-go decodes and passes to the interceptors, where
// callerInterceptor answers it with A2A's unauthenticated error in the
// endpoint's own shape (an SSE event, when the caller asked for a stream).
type standIn func(r *http.Request) []byte

// jsonRPCStandIn is a JSON-RPC request of method, or stream when the
// caller accepts an event stream, with a null id: the id is in the body,
// which is not read.
func jsonRPCStandIn(method, stream string) standIn {
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

// wrap reads r's body into a pooled buffer, at most limit+1 bytes of it,
// and passes the checked copy on. A declared Content-Length over limit is
// refused before anything is read; a longer chunked body is cut at
// limit+1. The body's bytes are held under l.budget while they are
// needed. At an A2A endpoint (stand is set), the body of a caller the gate
// refused is read only up to maxRefusedBodyBytes; a larger one is never
// read, and a2a-go gets stand's request instead, to refuse.
func (l *bodyLimits) wrap(next http.Handler, limit int64, setting string, write refusalWriter, stand standIn) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody {
			next.ServeHTTP(w, r)
			return
		}
		limit := limit
		refused := stand != nil && callerRefused(r.Context())
		var reserve func(total int64) error // nil: from the budget
		if refused {
			// Refused callers read within room of their own, never waiting
			// for it, so they cannot hold the budget authenticated bodies
			// need; with none left, their bodies are not read at all.
			limit = min(limit, maxRefusedBodyBytes)
			if r.ContentLength > limit || !l.refusedRoom.TryAcquire(limit+1) {
				l.standIn(w, r, next, stand)
				return
			}
			defer l.refusedRoom.Release(limit + 1)
			reserve = func(int64) error { return nil }
		}
		if r.ContentLength > limit {
			l.refuse(w, r, write, &refusal{status: http.StatusRequestEntityTooLarge, code: "invalid_argument",
				msg:   fmt.Sprintf("request body of %d bytes is over the limit of %d bytes (%s)", r.ContentLength, limit, setting),
				limit: strconv.FormatInt(limit, 10), setting: setting})
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
			l.refuse(w, r, write, &refusal{status: http.StatusServiceUnavailable, code: "unavailable", busy: true,
				msg:   fmt.Sprintf("orchd holds as many request body bytes as it may (http.maxBufferedBodyBytes) and none made room within %s: try again", l.readTimeout),
				limit: strconv.FormatInt(l.budgetBytes, 10), setting: "http.maxBufferedBodyBytes"})
			return
		case err != nil:
			rf := &refusal{status: http.StatusBadRequest, code: "invalid_argument", msg: "read request body: " + err.Error()}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				rf.status, rf.code = http.StatusRequestTimeout, "timeout"
				rf.msg = "request body not received in time (http.readTimeout): " + err.Error()
				rf.limit, rf.setting = l.readTimeout.String(), "http.readTimeout"
			}
			l.refuse(w, r, write, rf)
			return
		case n > limit && refused:
			l.standIn(w, r, next, stand)
			return
		case n > limit:
			l.refuse(w, r, write, &refusal{status: http.StatusRequestEntityTooLarge, code: "invalid_argument",
				msg:   fmt.Sprintf("request body is over the limit of %d bytes (%s)", limit, setting),
				limit: strconv.FormatInt(limit, 10), setting: setting, id: jsonRPCID(body.buf)})
			return
		}
		if depth, idAt := scanJSON(body.buf); depth > l.maxDepth {
			l.refuse(w, r, write, &refusal{status: http.StatusBadRequest, code: "invalid_argument",
				msg:   fmt.Sprintf("request body nests JSON %d levels deep, over the limit of %d (http.maxJSONDepth)", depth, l.maxDepth),
				limit: strconv.Itoa(l.maxDepth), setting: "http.maxJSONDepth", id: jsonRPCIDAt(body.buf, idAt)})
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
func (l *bodyLimits) standIn(w http.ResponseWriter, r *http.Request, next http.Handler, stand standIn) {
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
func (l *bodyLimits) reserver(ctx context.Context, body *pooledBody) func(total int64) error {
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
func (l *bodyLimits) refuse(w http.ResponseWriter, r *http.Request, write refusalWriter, rf *refusal) {
	l.log.InfoContext(r.Context(), "request body refused", "method", r.Method, "path", r.URL.Path, "error", rf.msg)
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

// jsonRPCID returns the id of the JSON-RPC request in b, or nil.
func jsonRPCID(b []byte) any {
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

// The JSON-RPC codes, A2A reasons and google.rpc statuses of refused
// bodies: a request orchd will not read (a2a.ErrInvalidRequest), or one
// it has no room to read now (a2a.ErrServerError).
const (
	jsonRPCInvalidRequest = -32600
	jsonRPCServerError    = -32000
	reasonInvalidRequest  = "INVALID_REQUEST"
	reasonServerError     = "SERVER_ERROR"
)

// rpc returns the refusal's JSON-RPC code, A2A reason and google.rpc
// status.
func (rf *refusal) rpc() (code int, reason, status string) {
	if rf.busy {
		return jsonRPCServerError, reasonServerError, "UNAVAILABLE"
	}
	return jsonRPCInvalidRequest, reasonInvalidRequest, "INVALID_ARGUMENT"
}

// errorInfo is the google.rpc.ErrorInfo detail a2a-go puts in every error
// answer, with the limit that refused the body in its metadata.
func (rf *refusal) errorInfo() *errordetails.Typed {
	meta := map[string]string{"timestamp": time.Now().UTC().Format(time.RFC3339)}
	if rf.setting != "" {
		meta["limit"], meta["setting"] = rf.limit, rf.setting
	}
	_, reason, _ := rf.rpc()
	return errordetails.NewErrorInfo(reason, a2a.ProtocolDomain, meta)
}

// writeJSONRPCRefusal answers as a2a-go's JSON-RPC handlers answer a
// request they cannot read: HTTP 200 with an Invalid Request error, which
// a2a-go's clients read as a2a.ErrInvalidRequest.
func writeJSONRPCRefusal(w http.ResponseWriter, rf *refusal) {
	type rpcError struct {
		Code    int                   `json:"code"`
		Message string                `json:"message"`
		Data    []*errordetails.Typed `json:"data,omitempty"`
	}
	code, _, _ := rf.rpc()
	writeJSON(w, http.StatusOK, struct {
		JSONRPC string   `json:"jsonrpc"`
		ID      any      `json:"id"`
		Error   rpcError `json:"error"`
	}{"2.0", rf.id, rpcError{code, rf.msg, []*errordetails.Typed{rf.errorInfo()}}}, "")
}

// restRefusal is a google.rpc.Status body as a2a-go's HTTP+JSON handlers
// write them; clients read its reason as a2a.ErrInvalidRequest.
func restRefusal(rf *refusal) any {
	type status struct {
		Code    int                   `json:"code"`
		Status  string                `json:"status"`
		Message string                `json:"message"`
		Details []*errordetails.Typed `json:"details"`
	}
	_, _, st := rf.rpc()
	return struct {
		Error status `json:"error"`
	}{status{rf.status, st, rf.msg, []*errordetails.Typed{rf.errorInfo()}}}
}

func writeRESTRefusal(w http.ResponseWriter, rf *refusal) {
	writeJSON(w, rf.status, restRefusal(rf), "")
}

func writeREST03Refusal(w http.ResponseWriter, rf *refusal) {
	b, err := json.Marshal(restRefusal(rf))
	if err != nil {
		writeRESTRefusal(w, rf)
		return
	}
	b = withLegacyFields(b)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(rf.status)
	_, _ = w.Write(b)
}

// writeAPIRefusal answers with the API's error body.
func writeAPIRefusal(w http.ResponseWriter, rf *refusal) {
	var body ErrorBody
	body.Error.Code, body.Error.Message = rf.code, rf.msg
	writeJSON(w, rf.status, body, "  ")
}

// writeJSON writes v as a JSON answer with status.
func writeJSON(w http.ResponseWriter, status int, v any, indent string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", indent)
	_ = enc.Encode(v)
}
