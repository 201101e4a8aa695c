package httpgate

import (
	"context"
	"log/slog"
	"net/http"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	grpcstatus "google.golang.org/grpc/status"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/telemetry"
)

// maxAccessField bounds the method and path an access record carries: a
// request line may be as long as the server's header limit, and the log
// should not grow by as much per request.
const maxAccessField = 1024

// AccessLog writes the access log: for each HTTP request and gRPC call,
// its method, path (never the query string, where callers put tokens as
// often as not), status, duration, the bytes of the answer, the remote
// address, the authenticated principal (and tenant) if any, and the trace
// id: the one orchd's server span has, else the one the caller sent.
// Nothing secret is in a record: no header, no query, no body.
type AccessLog struct {
	log   *slog.Logger
	level slog.Level
	// prop reads a caller's trace id when orchd does not trace.
	prop propagation.TraceContext
}

// NewAccessLog returns the access log that writes its records to log at
// level. A nil *AccessLog, the access log turned off, logs nothing.
func NewAccessLog(level slog.Level, log *slog.Logger) *AccessLog {
	return &AccessLog{log: log, level: level}
}

// Wrap logs each request h serves once it has been served. A request
// arriving when records at the access log's level would be dropped costs
// one level check. A nil AccessLog returns h itself.
func (a *AccessLog) Wrap(h http.Handler) http.Handler {
	if a == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		if !a.log.Enabled(ctx, a.level) {
			h.ServeHTTP(w, r)
			return
		}
		start := time.Now()
		note := &accessNote{}
		ctx = context.WithValue(telemetry.WithSpanNote(ctx, &note.span), accessNoteKey{}, note)
		aw := &accessWriter{ResponseWriter: w}
		h.ServeHTTP(aw, r.WithContext(ctx))
		status := aw.status
		if status == 0 {
			status = http.StatusOK // nothing written: net/http answers 200
		}
		sc := note.span
		if !sc.IsValid() {
			sc = trace.SpanContextFromContext(a.prop.Extract(ctx, propagation.HeaderCarrier(r.Header)))
		}
		a.record(ctx, time.Since(start), sc, note.principal, note.tenant,
			slog.String("method", bounded(r.Method)), slog.String("path", bounded(r.URL.Path)),
			slog.Int("status", status), slog.Int64("bytes", aw.bytes), slog.String("remote", r.RemoteAddr))
	})
}

// GRPCCall logs a gRPC call that ended with err, started at start, over
// ctx: the call's context as the gRPC server's interceptors prepared it
// (its principal, its span).
func (a *AccessLog) GRPCCall(ctx context.Context, fullMethod string, start time.Time, err error) {
	if a == nil || !a.log.Enabled(ctx, a.level) {
		return
	}
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		if md, ok := metadata.FromIncomingContext(ctx); ok {
			sc = trace.SpanContextFromContext(a.prop.Extract(ctx, metadataCarrier(md)))
		}
	}
	var principal, tenant string
	if p, ok := auth.PrincipalFrom(ctx); ok {
		principal, tenant = p.ID, p.Tenant
	}
	var remote string
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		remote = p.Addr.String()
	}
	// The record names the trace itself: logged with ctx's span, the log
	// handler would add a second trace_id (and a span_id) to it.
	noSpan := trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	a.record(noSpan, time.Since(start), sc, principal, tenant,
		slog.String("method", "gRPC"), slog.String("path", bounded(fullMethod)),
		slog.String("status", grpcstatus.Code(err).String()), slog.String("remote", remote))
}

// record logs one access record: attrs, then the duration, the principal
// and the trace id when there are any.
func (a *AccessLog) record(ctx context.Context, took time.Duration, sc trace.SpanContext, principal, tenant string, attrs ...slog.Attr) {
	attrs = append(attrs, slog.Duration("duration", took))
	if principal != "" {
		attrs = append(attrs, slog.String("principal", principal))
	}
	if tenant != "" {
		attrs = append(attrs, slog.String("tenant", tenant))
	}
	if sc.HasTraceID() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
	}
	// ctx carries no span (an HTTP request's access log is outside them
	// all; GRPCCall drops the call's), so the log handler adds no trace id
	// of its own beside this one.
	a.log.LogAttrs(ctx, a.level, "request", attrs...)
}

// accessNote is filled while a request is served, for its access record:
// the principal the gate authenticated (notePrincipal) and the server span
// telemetry started.
type accessNote struct {
	principal, tenant string
	span              trace.SpanContext
}

// accessNoteKey carries a request's *accessNote.
type accessNoteKey struct{}

// notePrincipal tells the access log who the caller of the request ctx
// belongs to is. It does nothing when the access log is off.
func notePrincipal(ctx context.Context, p *auth.Principal) {
	if n, ok := ctx.Value(accessNoteKey{}).(*accessNote); ok {
		n.principal, n.tenant = p.ID, p.Tenant
	}
}

// accessWriter counts what a handler writes and remembers the status. It
// flushes through, as server-sent event streams need.
type accessWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *accessWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 { // 1xx answers are interim
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *accessWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Flush sends buffered data to the client.
func (w *accessWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *accessWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// metadataCarrier reads trace headers from gRPC metadata.
type metadataCarrier metadata.MD

func (c metadataCarrier) Get(key string) string {
	if vs := metadata.MD(c).Get(key); len(vs) > 0 {
		return vs[0]
	}
	return ""
}

func (c metadataCarrier) Set(key, value string) { metadata.MD(c).Set(key, value) }

func (c metadataCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}

// bounded is s cut to maxAccessField bytes, on a rune boundary, with an
// ellipsis when cut.
func bounded(s string) string {
	if len(s) <= maxAccessField {
		return s
	}
	cut := maxAccessField
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
