package telemetry

import (
	"context"
	"net/http"
	"slices"
	"strings"
)

// Without tracing orchd takes no part in its callers' traces, but it must
// not break them either: W3C Trace Context asks a system that does not
// participate to pass the trace context on as it came. So when orchd
// records no spans, Handler keeps the trace headers a caller sent in the
// request's context and Transport sends them, byte for byte, with the A2A
// calls made on the caller's behalf. Re-encoding them through the OTel
// propagators would not do: they rewrite trace flags, drop a tracestate
// they cannot parse and reorder baggage members.

// traceFields are the headers of W3C Trace Context and W3C Baggage, keyed
// as net/http keys them.
var traceFields = [...]string{"Traceparent", "Tracestate", "Baggage"}

// MaxTraceHeaderBytes bounds each trace header passed on (all its lines
// together): the size W3C Baggage lets a system refuse beyond. A header
// over it is not passed on at all rather than cut.
const MaxTraceHeaderBytes = 8192

// TraceHeaders are the trace headers (traceparent, tracestate, baggage) a
// caller sent, exactly as it sent them. The zero value holds none.
type TraceHeaders struct {
	values [len(traceFields)][]string
}

// IsZero reports whether h holds no header.
func (h TraceHeaders) IsZero() bool {
	for _, vs := range h.values {
		if len(vs) > 0 {
			return false
		}
	}
	return true
}

// Pairs returns the headers as key/value pairs, one pair per line in the
// order they came, with the lowercase keys gRPC metadata uses: for calls
// orchd makes over gRPC on the caller's behalf, where no Transport runs.
func (h TraceHeaders) Pairs() []string {
	var kv []string
	for i, vs := range h.values {
		for _, v := range vs {
			kv = append(kv, strings.ToLower(traceFields[i]), v)
		}
	}
	return kv
}

// traceHeadersKey carries TraceHeaders in a context.
type traceHeadersKey struct{}

// TraceHeadersFrom returns the trace headers ctx carries: those the caller
// of the request being served sent, when tracing is off (Handler), or
// those WithTraceHeaders put there.
func TraceHeadersFrom(ctx context.Context) TraceHeaders {
	h, _ := ctx.Value(traceHeadersKey{}).(TraceHeaders)
	return h
}

// WithTraceHeaders returns ctx carrying h, so that the calls made with it
// pass them on (Transport, tracing off): for work done on a caller's
// behalf after its request has ended. A zero h returns ctx itself.
func WithTraceHeaders(ctx context.Context, h TraceHeaders) context.Context {
	if h.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, traceHeadersKey{}, h)
}

// readTraceHeaders returns the trace headers of hdr within
// MaxTraceHeaderBytes.
func readTraceHeaders(hdr http.Header) TraceHeaders {
	var h TraceHeaders
	for i, f := range traceFields {
		vs := hdr[f]
		if len(vs) == 0 {
			continue
		}
		size := 0
		for _, v := range vs {
			size += len(v) + 1
		}
		if size <= MaxTraceHeaderBytes {
			h.values[i] = slices.Clone(vs)
		}
	}
	return h
}

// passTraceHeaders serves h with the trace headers of each request that
// has some in its context.
func passTraceHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if th := readTraceHeaders(r.Header); !th.IsZero() {
			r = r.WithContext(context.WithValue(r.Context(), traceHeadersKey{}, th))
		}
		h.ServeHTTP(w, r)
	})
}

// passTransport sends the trace headers a request's context carries with
// it, unless the request sets them itself.
type passTransport struct {
	next http.RoundTripper
}

func (t passTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	th, ok := r.Context().Value(traceHeadersKey{}).(TraceHeaders)
	if !ok {
		return t.next.RoundTrip(r)
	}
	r = r.Clone(r.Context()) // a RoundTripper must not modify the caller's request
	for i, f := range traceFields {
		if vs := th.values[i]; len(vs) > 0 && len(r.Header[f]) == 0 {
			// Capped, the lines are shared safely: an append copies them.
			r.Header[f] = vs[:len(vs):len(vs)]
		}
	}
	return t.next.RoundTrip(r)
}

// CloseIdleConnections closes the idle connections of the transport
// underneath, as http.Client.CloseIdleConnections expects.
func (t passTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
