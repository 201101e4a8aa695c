package telemetry

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// headerLog is an HTTP server on 127.0.0.1 that records the trace headers
// of every request it serves.
type headerLog struct {
	*httptest.Server
	mu  sync.Mutex
	got []http.Header
}

func newHeaderLog(t *testing.T) *headerLog {
	t.Helper()
	l := &headerLog{}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := http.Header{}
		for _, f := range traceFields {
			if vs, ok := r.Header[f]; ok {
				h[f] = vs
			}
		}
		l.mu.Lock()
		l.got = append(l.got, h)
		l.mu.Unlock()
	}))
	t.Cleanup(l.Close)
	return l
}

func (l *headerLog) last(t *testing.T) http.Header {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.got) == 0 {
		t.Fatal("the downstream server got no request")
	}
	return l.got[len(l.got)-1]
}

// TestPassthrough_TracingOffPassesTraceHeadersUnchanged serves requests
// through Handler and calls a downstream server through Transport, with
// tracing off: the downstream server must see exactly the trace headers
// the caller sent, lines and bytes, and none when the caller sent none.
// The values are ones the OTel propagators would rewrite (trace flags
// beyond sampled, a tracestate over two lines, baggage with properties
// and spaces).
func TestPassthrough_TracingOffPassesTraceHeadersUnchanged(t *testing.T) {
	t.Parallel()
	tel := Disabled()
	down := newHeaderLog(t)
	client := &http.Client{Transport: tel.Transport(ownTransport(t))}
	// own is a traceparent the handler sets on its downstream call itself.
	const own = "00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-00"
	srv := httptest.NewServer(tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if trace.SpanContextFromContext(r.Context()).IsValid() {
			t.Error("tracing off, yet the request has a span context")
		}
		ctx := r.Context()
		if r.URL.Query().Has("detached") {
			// Work done later on the caller's behalf, in another context.
			ctx = WithTraceHeaders(context.Background(), TraceHeadersFrom(ctx))
		}
		req, _ := http.NewRequestWithContext(ctx, "POST", down.URL, nil)
		if r.URL.Query().Has("own") {
			req.Header.Set("Traceparent", own)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return
		}
		resp.Body.Close()
		if req.Header.Get("Traceparent") != r.URL.Query().Get("ownValue") {
			t.Error("Transport modified the caller's request")
		}
	}), "op"))
	t.Cleanup(srv.Close)

	full := http.Header{
		"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03"},
		"Tracestate":  {"congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7,  x@y=1"},
		"Baggage":     {"userId=alice;private, serverNode = DF%2028,isProduction=false"},
	}
	for _, tc := range []struct {
		name  string
		query string
		sent  http.Header
		want  http.Header
	}{
		{"all three", "", full, full},
		{"all three, passed on from another context", "?detached", full, full},
		{"traceparent alone", "", http.Header{"Traceparent": full["Traceparent"]}, http.Header{"Traceparent": full["Traceparent"]}},
		{"baggage alone", "", http.Header{"Baggage": full["Baggage"]}, http.Header{"Baggage": full["Baggage"]}},
		{"none", "", http.Header{}, http.Header{}},
		{"none, from another context", "?detached", http.Header{}, http.Header{}},
		{"a traceparent the request sets itself wins", "?own&ownValue=" + own, full,
			http.Header{"Traceparent": {own}, "Tracestate": full["Tracestate"], "Baggage": full["Baggage"]}},
		{"a header over the bound is dropped whole", "",
			http.Header{"Traceparent": full["Traceparent"], "Baggage": {strings.Repeat("k=v,", MaxTraceHeaderBytes/4)}},
			http.Header{"Traceparent": full["Traceparent"]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/"+tc.query, nil)
			for k, vs := range tc.sent {
				req.Header[k] = slices.Clone(vs)
			}
			resp, err := (&http.Client{Transport: ownTransport(t)}).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			got := down.last(t)
			for _, f := range traceFields {
				if !slices.Equal(got[f], tc.want[f]) {
					t.Errorf("%s downstream = %q, want %q", f, got[f], tc.want[f])
				}
			}
		})
	}
}

// TestPassthrough_TracingOnContinuesTheTrace checks that with tracing on
// the downstream call carries orchd's span, in the caller's trace, not the
// caller's traceparent as it came.
func TestPassthrough_TracingOnContinuesTheTrace(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tel := WithProviders(tp, nil)
	down := newHeaderLog(t)
	client := &http.Client{Transport: tel.Transport(ownTransport(t))}
	srv := httptest.NewServer(tel.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "POST", down.URL, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	}), "op"))
	t.Cleanup(srv.Close)

	const caller = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL, nil)
	req.Header.Set("Traceparent", caller)
	resp, err := (&http.Client{Transport: ownTransport(t)}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	got := down.last(t).Get("Traceparent")
	var clientSpan sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.SpanKind() == trace.SpanKindClient {
			clientSpan = s
		}
	}
	if clientSpan == nil {
		t.Fatal("no client span recorded")
	}
	want := "00-4bf92f3577b34da6a3ce929d0e0e4736-" + clientSpan.SpanContext().SpanID().String() + "-01"
	if got != want {
		t.Errorf("traceparent downstream = %q, want %q (the caller's trace, orchd's client span as parent)", got, want)
	}
}

// stubTransport answers every request at once, so BenchmarkPassthrough
// measures the middleware alone.
type stubTransport struct{ resp *http.Response }

func (s stubTransport) RoundTrip(r *http.Request) (*http.Response, error) { return s.resp, nil }

// BenchmarkPassthrough serves a request through Handler whose handler
// makes one downstream call through Transport, tracing off: direct calls
// the same handler and round tripper unwrapped; none sends no trace
// headers; trace-headers sends all three, which are passed on.
//
//	go test ./telemetry -run '^$' -bench Passthrough -benchmem
func BenchmarkPassthrough(b *testing.B) {
	tel := Disabled()
	stub := stubTransport{resp: &http.Response{StatusCode: http.StatusOK, Body: http.NoBody}}
	serve := func(rt http.RoundTripper) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			req, _ := http.NewRequestWithContext(r.Context(), "POST", "http://127.0.0.1/rpc", http.NoBody)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				b.Fatal(err)
			}
			_ = resp.Body.Close()
		})
	}
	for _, tc := range []struct {
		name string
		h    http.Handler
		sent http.Header
	}{
		{"direct", serve(stub), nil},
		{"none", tel.Handler(serve(tel.Transport(stub)), "op"), nil},
		{"trace-headers", tel.Handler(serve(tel.Transport(stub)), "op"), http.Header{
			"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
			"Tracestate":  {"congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"},
			"Baggage":     {"userId=alice,serverNode=DF%2028"},
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			req := httptest.NewRequest("POST", "/a2a/jsonrpc", http.NoBody)
			maps.Copy(req.Header, tc.sent)
			w := httptest.NewRecorder()
			b.ReportAllocs()
			for b.Loop() {
				tc.h.ServeHTTP(w, req)
			}
		})
	}
}

// ownTransport is an HTTP transport of the test's own, its idle
// connections closed when the test ends: closing those of the shared
// default transport would break the requests of the tests beside it.
func ownTransport(t *testing.T) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}
