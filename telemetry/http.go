package telemetry

import (
	"context"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The HTTP middleware here records one span per request with the few
// attributes an operator filters on (method, route or URL, status), and
// carries W3C trace context. It is deliberately leaner than the generic
// otelhttp instrumentation, which also records HTTP metrics and a dozen
// semantic-convention attributes per request: on a hop that costs ~100 µs
// in all, that difference is most of the tracing budget.

// Handler traces the requests h serves: it continues the trace context a
// caller sent (W3C traceparent) and records a server span named by
// operation and the route; NameSpan can rename it once the handler knows
// better. Without tracing it records nothing and only keeps the trace
// headers a caller sent (traceparent, tracestate, baggage) in the
// request's context, for Transport to pass on unchanged.
func (t *Telemetry) Handler(h http.Handler, operation string) http.Handler {
	if !t.tracing {
		return passTraceHeaders(h)
	}
	tracer := t.tracer.Tracer(instrumentation)
	prop := t.Propagator()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		route := r.Pattern
		if route == "" {
			route = r.URL.Path
		}
		ctx, span := tracer.Start(ctx, operation+" "+r.Method+" "+route, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path)))
		defer span.End()
		if note, ok := r.Context().Value(spanNoteKey{}).(*trace.SpanContext); ok && !note.IsValid() {
			*note = span.SpanContext()
		}
		named := new(atomic.Bool)
		req := r.WithContext(context.WithValue(ctx, namedKey{}, named))
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		h.ServeHTTP(sw, req)
		if req.Pattern != r.Pattern && !named.Load() {
			// A mux inside h routed the request: its pattern names the
			// operation better than the route h was mounted at.
			span.SetName(operation + " " + req.Pattern)
		}
		span.SetAttributes(attribute.Int("http.response.status_code", sw.status))
		if sw.status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(sw.status))
		}
	})
}

// WithSpanNote returns ctx with note attached: the first Handler serving a
// request with this context stores the server span it starts in *note, so
// middleware outside Handler (the daemon's access log) can name the request's
// trace once it has been served. The note is written on the goroutine
// serving the request, before the handler Handler wraps runs; it stays the
// zero SpanContext when nothing traced the request.
func WithSpanNote(ctx context.Context, note *trace.SpanContext) context.Context {
	return context.WithValue(ctx, spanNoteKey{}, note)
}

// spanNoteKey carries the note of WithSpanNote.
type spanNoteKey struct{}

// instrumentation is the import path the HTTP spans are recorded under.
const instrumentation = "github.com/orchd/orchd/telemetry"

// statusWriter remembers the status a handler wrote. It flushes through,
// as server-sent event streams need.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.ResponseWriter.Write(b)
}

// Flush sends buffered data to the client.
func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// NameSpan renames the span ctx carries, for handlers that know more about
// the operation than its route (an A2A method inside a JSON-RPC body, say).
func NameSpan(ctx context.Context, name string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetName(name)
		if named, ok := ctx.Value(namedKey{}).(*atomic.Bool); ok {
			named.Store(true)
		}
	}
}

// namedKey marks, in a request's context, that NameSpan named its span.
type namedKey struct{}

// Transport traces the requests rt sends and passes the trace context on
// in their headers, so the agent called joins the caller's trace. A span
// lasts until the response body is read to its end or closed, so a stream
// is one span. Without tracing it records nothing and sends the caller's
// trace headers that the request's context carries (see Handler and
// WithTraceHeaders) as they came, so the agent called joins the caller's
// trace all the same.
func (t *Telemetry) Transport(rt http.RoundTripper) http.RoundTripper {
	if !t.tracing {
		return passTransport{next: rt}
	}
	return &transport{next: rt, tracer: t.tracer.Tracer(instrumentation), prop: t.Propagator()}
}

type transport struct {
	next   http.RoundTripper
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
}

func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx, span := t.tracer.Start(r.Context(), "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("http.request.method", r.Method), attribute.String("server.address", r.URL.Host),
			attribute.String("url.path", r.URL.Path)))
	r = r.Clone(ctx) // a RoundTripper must not modify the caller's request
	t.prop.Inject(ctx, propagation.HeaderCarrier(r.Header))
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
		span.End()
		return nil, err
	}
	span.SetAttributes(attribute.Int("http.response.status_code", resp.StatusCode))
	if resp.StatusCode >= 500 {
		span.SetStatus(codes.Error, resp.Status)
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		span.End()
		return resp, nil
	}
	resp.Body = &spanBody{ReadCloser: resp.Body, span: span}
	return resp, nil
}

// spanBody ends the client span when the body is read to its end or
// closed, whichever comes first.
type spanBody struct {
	io.ReadCloser
	span trace.Span
	once sync.Once
}

func (b *spanBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.end()
	}
	return n, err
}

func (b *spanBody) Close() error {
	b.end()
	return b.ReadCloser.Close()
}

func (b *spanBody) end() { b.once.Do(func() { b.span.End() }) }
