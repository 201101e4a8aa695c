package orchestrator

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
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

// withHeaders is a caller's transport: it sends every request with h.
type withHeaders struct {
	h    http.Header
	next http.RoundTripper
}

func (t withHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, vs := range t.h {
		r.Header[k] = slices.Clone(vs)
	}
	return t.next.RoundTrip(r)
}

// delegateVia runs one delegation of "survey" through orchd at base, with
// the caller's requests carrying h, and returns once it completed.
type delegateVia func(t *testing.T, base string, h http.Header)

// viaAPI delegates with POST /v1/delegations.
func viaAPI(t *testing.T, base string, h http.Header) {
	req, err := http.NewRequestWithContext(t.Context(), "POST", base+"/v1/delegations", strings.NewReader(`{"text": "survey", "skill": "research"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, vs := range h {
		req.Header[k] = slices.Clone(vs)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("delegate = %d", resp.StatusCode)
	}
	testwait.Until(t, 10*time.Second, "the delegation completing", func() bool {
		var done struct {
			Delegations []delegation.Record `json:"delegations"`
		}
		call(t, "GET", base+"/v1/delegations?state=completed", "", &done)
		return len(done.Delegations) == 1
	})
}

// viaA2A delegates with an a2a-go client over orchd's interface of the
// given A2A version and binding, sending and waiting for the task's end
// (streaming: reading the stream to its end).
func viaA2A(version string, binding a2a.TransportProtocol, streaming bool) delegateVia {
	return func(t *testing.T, base string, h http.Header) {
		card, err := (&agentcard.Resolver{CardParser: a2av0.NewAgentCardParser()}).Resolve(t.Context(), base, askDual())
		if err != nil {
			t.Fatal(err)
		}
		card.SupportedInterfaces = slices.DeleteFunc(card.SupportedInterfaces, func(it *a2a.AgentInterface) bool {
			return string(it.ProtocolVersion) != version || it.ProtocolBinding != binding
		})
		hc := &http.Client{Transport: withHeaders{h: h, next: http.DefaultTransport}}
		c, err := a2aclient.NewFromCard(t.Context(), card,
			a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc),
			a2av0.WithJSONRPCTransport(a2av0.JSONRPCTransportConfig{Client: hc}),
			a2av0.WithRESTTransport(a2av0.RESTTransportConfig{Client: hc}))
		if err != nil {
			t.Fatal(err)
		}
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey"))
		msg.Metadata = map[string]any{a2aserver.SkillMetadataKey: "research"}
		req := &a2a.SendMessageRequest{Message: msg}
		if streaming {
			var last a2a.Event
			for ev, err := range c.SendStreamingMessage(t.Context(), req) {
				if err != nil {
					t.Fatal(err)
				}
				last = ev
			}
			if st, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || st.Status.State != a2a.TaskStateCompleted {
				t.Fatalf("the stream ended with %T %+v, want the task completed", last, last)
			}
			return
		}
		res, err := c.SendMessage(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if task, ok := res.(*a2a.Task); !ok || task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("send answered %T %+v, want the completed task", res, res)
		}
	}
}

// viaGRPC delegates with an a2a-go client speaking only gRPC 1.0 to
// orchd, its calls carrying h as metadata, and reads the stream to its end.
func viaGRPC(t *testing.T, base string, h http.Header) {
	var kv []string
	for k, vs := range h {
		for _, v := range vs {
			kv = append(kv, strings.ToLower(k), v)
		}
	}
	unary := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(metadata.AppendToOutgoingContext(ctx, kv...), method, req, reply, cc, opts...)
	}
	stream := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(metadata.AppendToOutgoingContext(ctx, kv...), desc, cc, method, opts...)
	}
	c := grpcClient(t, base, "1.0", grpc.WithUnaryInterceptor(unary), grpc.WithStreamInterceptor(stream))
	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey"))
	msg.Metadata = map[string]any{a2aserver.SkillMetadataKey: "research"}
	var last a2a.Event
	for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}) {
		if err != nil {
			t.Fatal(err)
		}
		last = ev
	}
	if st, ok := last.(*a2a.TaskStatusUpdateEvent); !ok || st.Status.State != a2a.TaskStateCompleted {
		t.Fatalf("the stream ended with %T %+v, want the task completed", last, last)
	}
}

// TestTraceContext_PassesThroughWithTracingOff delegates through orchd
// with tracing off (the default), over the HTTP API and over its A2A
// interfaces, to agents that stream and to agents orchd polls: every call
// the agent receives, the later ones made in the engine's context too
// (the stream, the polls), must carry exactly the trace headers the
// caller sent, and none when it sent none.
func TestTraceContext_PassesThroughWithTracingOff(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		via       delegateVia
		streaming bool // the agent streams
		grpc      bool // orchd is called over gRPC and calls a gRPC-only agent
	}{
		{"API, polled agent", viaAPI, false, false},
		{"API, streaming agent", viaAPI, true, false},
		{"A2A 1.0 JSON-RPC, polled agent", viaA2A("1.0", a2a.TransportProtocolJSONRPC, false), false, false},
		{"A2A 1.0 JSON-RPC stream, streaming agent", viaA2A("1.0", a2a.TransportProtocolJSONRPC, true), true, false},
		{"A2A 1.0 HTTP+JSON, polled agent", viaA2A("1.0", a2a.TransportProtocolHTTPJSON, false), false, false},
		{"A2A 0.3 JSON-RPC stream, polled agent", viaA2A("0.3", a2a.TransportProtocolJSONRPC, true), false, false},
		{"A2A 0.3 HTTP+JSON, streaming agent", viaA2A("0.3", a2a.TransportProtocolHTTPJSON, false), true, false},
		{"gRPC both ways, polled agent", viaGRPC, false, true},
		{"gRPC both ways, streaming agent", viaGRPC, true, true},
	} {
		for _, sent := range []struct {
			name string
			h    http.Header
		}{{"trace headers", callerTrace}, {"no trace headers", http.Header{}}} {
			t.Run(tc.name+", "+sent.name, func(t *testing.T) {
				t.Parallel()
				agent := testagent.Start(t, testagent.Options{Name: "W", Skill: "research", Streaming: tc.streaming, GRPCOnly: tc.grpc}, testagent.Work(60*time.Millisecond))
				cfg := loadDefaults(t)
				cfg.Agents = []registry.Spec{{ID: "w", URL: agent.URL}}
				cfg.Delegation.PollInterval = Duration(10 * time.Millisecond)
				if tc.grpc {
					cfg.Agent.GRPC.Listen = "127.0.0.1:0"
				}
				base := startDaemon(t, cfg)

				tc.via(t, base, sent.h)
				reqs := agent.Requests()
				var methods []string
				for _, r := range reqs {
					methods = append(methods, r.Method)
					for _, f := range traceFields {
						if got, want := r.Header[f], sent.h[f]; !slices.Equal(got, want) {
							t.Errorf("%s: %s = %q, want %q", r.Method, f, got, want)
						}
					}
				}
				later := "SendStreamingMessage"
				if !tc.streaming {
					later = "GetTask"
				}
				if !slices.Contains(methods, later) {
					t.Errorf("the agent got %v, want a %s among them", methods, later)
				}
			})
		}
	}
}

// TestTraceContext_TracingOnParentsOnOrchdSpans checks that with tracing
// on the agent joins the caller's trace under orchd's own spans: the
// traceparent it receives has the caller's trace id and the span of
// orchd's downstream call as parent, on the polls too.
func TestTraceContext_TracingOnParentsOnOrchdSpans(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	agent := testagent.Start(t, testagent.Options{Name: "W", Skill: "research"}, testagent.Work(60*time.Millisecond))
	base := tracedNode(t, rec, "a", "research", registry.Spec{ID: "w", URL: agent.URL})
	viaAPI(t, base, callerTrace)

	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	var clientSpans []string
	reqs := agent.Requests()
	testwait.Succeeds(t, 10*time.Second, "a client span in the caller's trace for each call", func() error {
		clientSpans = clientSpans[:0]
		for _, s := range rec.Ended() {
			if s.Name() == "HTTP POST" && s.SpanContext().TraceID().String() == traceID {
				clientSpans = append(clientSpans, s.SpanContext().SpanID().String())
			}
		}
		if len(clientSpans) < len(reqs) {
			return fmt.Errorf("%d client spans for %d calls", len(clientSpans), len(reqs))
		}
		return nil
	})
	for _, r := range reqs {
		parts := strings.Split(r.Header.Get("Traceparent"), "-")
		if len(parts) != 4 || parts[1] != traceID {
			t.Errorf("%s: traceparent %q, want trace %s", r.Method, r.Header.Get("Traceparent"), traceID)
		} else if parts[2] == callerSpan || !slices.Contains(clientSpans, parts[2]) {
			t.Errorf("%s: traceparent's parent %s, want one of orchd's client spans %v", r.Method, parts[2], clientSpans)
		}
	}
	api := findSpan(t, rec.Ended(), "orchd POST /v1/delegations")
	if api.Parent().SpanID().String() != callerSpan || !api.Parent().IsRemote() {
		t.Errorf("orchd's API span has parent %v, want the caller's span %s", api.Parent(), callerSpan)
	}
}

func findSpan(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	for _, s := range spans {
		if s.Name() == name {
			return s
		}
	}
	t.Fatalf("no span %q in %v", name, names(spans))
	return nil
}
