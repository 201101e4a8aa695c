package a2aserver

import (
	"log/slog"
	"net/http"
	"slices"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/telemetry"
)

// traceFields are the trace context headers orchd passes on.
var traceFields = []string{"Traceparent", "Tracestate", "Baggage"}

// callerTrace is a caller's trace context, with values the OTel
// propagators would not pass on as they are: trace flags beyond sampled,
// a tracestate over two lines, baggage with a property and spaces.
var callerTrace = http.Header{
	"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03"},
	"Tracestate":  {"congo=t61rcWkgMzE", "rojo=00f067aa0ba902b7,  x@y=1"},
	"Baggage":     {"userId=alice;private, serverNode = DF%2028,isProduction=false"},
}

// TestGRPCServer_CallContextKeepsCallerTrace prepares gRPC calls as orchd
// serves them with tracing off and no authentication: a call whose
// metadata carries trace headers keeps them for the calls orchd makes on
// its behalf, exactly as sent, whichever of them it carries; one without
// keeps none. Every call gets its service's A2A version.
func TestGRPCServer_CallContextKeepsCallerTrace(t *testing.T) {
	t.Parallel()
	s := &grpcServer{gate: httpgate.NewGate(httpgate.AuthConfig{}, nil, slog.New(slog.DiscardHandler)), tel: telemetry.Disabled()}
	for _, tc := range []struct {
		name string
		sent http.Header
	}{
		{"all trace headers", callerTrace},
		{"traceparent only", http.Header{"Traceparent": callerTrace["Traceparent"]}},
		{"baggage only", http.Header{"Baggage": callerTrace["Baggage"]}},
		{"other metadata only", http.Header{"A2a-Version": {"1.0"}}},
		{"no metadata", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			if tc.sent != nil {
				md := metadata.MD{}
				for k, vs := range tc.sent {
					md.Append(k, vs...)
				}
				ctx = metadata.NewIncomingContext(ctx, md)
			}
			got, end := s.callContext(ctx, "/lf.a2a.v1.A2AService/SendMessage")
			defer end()
			if v, _ := got.Value(endpointVersionKey{}).(string); v != "1.0" {
				t.Errorf("endpoint version %q, want 1.0", v)
			}
			// The headers kept are those a request sent with got carries.
			var sent http.Header
			rt := telemetry.Disabled().Transport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
				sent = r.Header
				return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Request: r}, nil
			}))
			req, err := http.NewRequestWithContext(got, http.MethodGet, "http://127.0.0.1/", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			for _, f := range traceFields {
				if g, w := sent[f], tc.sent[f]; !slices.Equal(g, w) {
					t.Errorf("%s = %q, want %q", f, g, w)
				}
			}
		})
	}
}

// roundTripFunc is an http.RoundTripper answering with a func.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
