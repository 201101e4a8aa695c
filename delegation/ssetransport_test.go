package delegation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// streamWork is an agent's work for the streaming transport tests, chosen
// by the message's text: "work" streams a task to COMPLETED with an
// artifact, "hang" works until the call ends. (The agent's refusing
// interceptor answers "fail" with an a2a error carrying details.)
type streamWork struct{ stop <-chan struct{} }

func (w streamWork) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		text := ""
		if len(ec.Message.Parts) > 0 {
			text = ec.Message.Parts[0].Text()
		}
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		if text == "hang" {
			select { // then end the task, so that its execution ends
			case <-ctx.Done():
			case <-w.stop:
			}
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
			return
		}
		if yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart("result of "+text)), nil) {
			yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, nil), nil)
		}
	}
}

func (streamWork) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// refuser refuses the messages that say "fail" with an a2a error that
// carries details, in the stream.
type refuser struct {
	a2asrv.PassthroughCallInterceptor
}

func (refuser) Before(ctx context.Context, _ *a2asrv.CallContext, req *a2asrv.Request) (context.Context, any, error) {
	if r, ok := req.Payload.(*a2a.SendMessageRequest); ok && len(r.Message.Parts) > 0 && r.Message.Parts[0].Text() == "fail" {
		return ctx, nil, a2a.NewError(a2a.ErrUnsupportedOperation, "no such work").WithDetails(map[string]any{"why": "test"})
	}
	return ctx, nil, nil
}

// streamAgent is a real a2a-go agent on loopback serving streamWork over
// JSON-RPC (/rpc) and HTTP+JSON (/rest), recording the headers of each
// request it takes.
type streamAgent struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
}

func startStreamAgent(t testing.TB) *streamAgent {
	t.Helper()
	stop := make(chan struct{})
	h := a2asrv.NewHandler(streamWork{stop: stop}, a2asrv.WithCallInterceptors(refuser{}))
	mux := http.NewServeMux()
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(h))
	mux.Handle("/rest/", http.StripPrefix("/rest", a2asrv.NewRESTHandler(h)))
	a := &streamAgent{}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.headers = append(a.headers, r.Header.Clone())
		a.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(a.Close)
	t.Cleanup(func() { close(stop) }) // before the server closes
	return a
}

// lastHeaders is the headers of the last request the agent took.
func (a *streamAgent) lastHeaders() http.Header {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.headers[len(a.headers)-1]
}

// transportPair is orchd's streaming transport for a binding and a2a-go's.
type transportPair struct {
	name         string
	ours, a2ago  a2aclient.Transport
	clientOption func(*http.Client) a2aclient.FactoryOption
	binding      a2a.TransportProtocol
	path         string
}

func transportPairs(t testing.TB, base string) []transportPair {
	t.Helper()
	hc := &http.Client{}
	rest, err := url.Parse(base + "/rest")
	if err != nil {
		t.Fatal(err)
	}
	return []transportPair{
		{"jsonrpc", newJSONRPCStreams(base+"/rpc", hc), a2aclient.NewJSONRPCTransport(base+"/rpc", hc), withJSONRPCStreams, a2a.TransportProtocolJSONRPC, "/rpc"},
		{"rest", newRESTStreams(rest, hc), a2aclient.NewRESTTransport(rest, hc), withRESTStreams, a2a.TransportProtocolHTTPJSON, "/rest"},
	}
}

// collect runs a stream to its end and returns its events and its error.
func collect(seq iter.Seq2[a2a.Event, error]) ([]a2a.Event, error) {
	var evs []a2a.Event
	for ev, err := range seq {
		if err != nil {
			return evs, err
		}
		evs = append(evs, ev)
	}
	return evs, nil
}

// shape is what the tests compare of an event: its kind, state and text,
// not the IDs and times that differ from one task to the next.
func shape(evs []a2a.Event) []string {
	var out []string
	for _, ev := range evs {
		switch e := ev.(type) {
		case *a2a.Task:
			out = append(out, "task "+string(e.Status.State))
		case *a2a.TaskStatusUpdateEvent:
			out = append(out, "status "+string(e.Status.State))
		case *a2a.TaskArtifactUpdateEvent:
			out = append(out, "artifact "+e.Artifact.Parts[0].Text())
		case *a2a.Message:
			out = append(out, "message")
		default:
			out = append(out, fmt.Sprintf("%T", ev))
		}
	}
	return out
}

func sendReq(text string) *a2a.SendMessageRequest {
	return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))}
}

// TestSSETransport_SameAsA2AGo streams the same calls to a real a2a-go
// agent through orchd's transports and a2a-go's, and wants the same events,
// the same errors (as a2a errors, with their text) and the same headers.
func TestSSETransport_SameAsA2AGo(t *testing.T) {
	agent := startStreamAgent(t)
	for _, p := range transportPairs(t, agent.URL) {
		t.Run(p.name, func(t *testing.T) {
			params := a2aclient.ServiceParams{"A2a-Extensions": {"urn:x", "urn:y"}, "X-Trace": {"t1"}}
			cases := []struct {
				name    string
				call    func(a2aclient.Transport) iter.Seq2[a2a.Event, error]
				want    []string
				wantErr error
			}{
				{"events", func(tr a2aclient.Transport) iter.Seq2[a2a.Event, error] {
					return tr.SendStreamingMessage(t.Context(), params, sendReq("work"))
				}, []string{"task TASK_STATE_SUBMITTED", "status TASK_STATE_WORKING", "artifact result of work", "status TASK_STATE_COMPLETED"}, nil},
				{"agent error", func(tr a2aclient.Transport) iter.Seq2[a2a.Event, error] {
					return tr.SendStreamingMessage(t.Context(), params, sendReq("fail"))
				}, nil, a2a.ErrUnsupportedOperation},
				{"unknown task", func(tr a2aclient.Transport) iter.Seq2[a2a.Event, error] {
					return tr.SubscribeToTask(t.Context(), params, &a2a.SubscribeToTaskRequest{ID: "no-such-task"})
				}, nil, a2a.ErrTaskNotFound},
			}
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					evs, err := collect(c.call(p.ours))
					ourHeaders := agent.lastHeaders()
					theirEvs, theirErr := collect(c.call(p.a2ago))
					theirHeaders := agent.lastHeaders()
					if want, got := c.want, shape(evs); !reflect.DeepEqual(want, got) {
						t.Errorf("events: got %v, want %v", got, want)
					}
					if want, got := shape(theirEvs), shape(evs); !reflect.DeepEqual(want, got) {
						t.Errorf("events unlike a2a-go's: got %v, want %v", got, want)
					}
					if !errors.Is(err, c.wantErr) {
						t.Errorf("error %v, want %v", err, c.wantErr)
					}
					if fmt.Sprint(err) != fmt.Sprint(theirErr) {
						t.Errorf("error %q, a2a-go's %q", err, theirErr)
					}
					if c.wantErr != nil {
						var ours, theirs *a2a.Error
						if !errors.As(err, &ours) || !errors.As(theirErr, &theirs) {
							t.Fatalf("errors %T, %T: want *a2a.Error", err, theirErr)
						}
						if want, got := theirs.Details, ours.Details; !reflect.DeepEqual(want, got) {
							t.Errorf("details: got %v, want %v", got, want)
						}
					}
					for _, h := range []string{"Accept", "Content-Type", "A2a-Extensions", "X-Trace"} {
						if got, want := ourHeaders.Values(h), theirHeaders.Values(h); !slicesEqual(got, want) || (len(got) == 0 && h != "Content-Type") {
							t.Errorf("header %s = %q, a2a-go sends %q", h, got, want)
						}
					}
				})
			}
		})
	}
}

func slicesEqual(a, b []string) bool { return strings.Join(a, "\x00") == strings.Join(b, "\x00") }

// TestSSETransport_Client builds a2a-go clients from a card with orchd's
// factory options and streams through them: the options take the place of
// a2a-go's transports, and tenant and interceptors still apply.
func TestSSETransport_Client(t *testing.T) {
	agent := startStreamAgent(t)
	for _, p := range transportPairs(t, agent.URL) {
		t.Run(p.name, func(t *testing.T) {
			iface := a2a.NewAgentInterface(agent.URL+p.path, p.binding)
			card := &a2a.AgentCard{Name: "a", Version: "1", SupportedInterfaces: []*a2a.AgentInterface{iface},
				Capabilities: a2a.AgentCapabilities{Streaming: true}}
			c, err := a2aclient.NewFromCard(t.Context(), card, p.clientOption(&http.Client{}),
				a2aclient.WithCallInterceptors(headerInterceptor{key: "X-From-Interceptor", value: "yes"}))
			if err != nil {
				t.Fatal(err)
			}
			evs, err := collect(c.SendStreamingMessage(t.Context(), sendReq("work")))
			if err != nil {
				t.Fatal(err)
			}
			if want, got := []string{"task TASK_STATE_SUBMITTED", "status TASK_STATE_WORKING", "artifact result of work", "status TASK_STATE_COMPLETED"}, shape(evs); !reflect.DeepEqual(want, got) {
				t.Errorf("events: got %v, want %v", got, want)
			}
			if got := agent.lastHeaders().Get("X-From-Interceptor"); got != "yes" {
				t.Errorf("interceptor's header = %q, want yes", got)
			}
			task := evs[0].(*a2a.Task)
			evs, err = collect(c.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: task.ID}))
			// The agent refuses, or, while its execution is still ending,
			// answers with the ended task.
			ended := err == nil && len(evs) == 1 && shape(evs)[0] == "task TASK_STATE_COMPLETED" && evs[0].(*a2a.Task).ID == task.ID
			if !ended && !errors.Is(err, a2a.ErrTaskNotFound) && !errors.Is(err, a2a.ErrUnsupportedOperation) {
				t.Errorf("subscribe to an ended task: %v, %v; want it refused or the task", shape(evs), err)
			}
		})
	}
}

// headerInterceptor adds a service parameter to every call.
type headerInterceptor struct {
	a2aclient.PassthroughInterceptor
	key, value string
}

func (h headerInterceptor) Before(ctx context.Context, req *a2aclient.Request) (context.Context, any, error) {
	req.ServiceParams.Append(h.key, h.value)
	return ctx, nil, nil
}

// rawSSE serves a fixed JSON-RPC/REST-shaped SSE answer with handler,
// on loopback.
func rawSSE(t testing.TB, handler http.HandlerFunc) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(handler)
	t.Cleanup(s.Close)
	return s
}

// TestSSETransport_OversizeEvent has an agent send an event of more than
// maxSSEEvent bytes, in lines that a2a-go's reader would each take: the
// stream fails with a clear error and the body is closed.
func TestSSETransport_OversizeEvent(t *testing.T) {
	for _, name := range []string{"jsonrpc", "rest"} {
		t.Run(name, func(t *testing.T) {
			closed := make(chan struct{})
			s := rawSSE(t, func(w http.ResponseWriter, r *http.Request) {
				defer close(closed)
				w.Header().Set("Content-Type", "text/event-stream")
				line := "data: " + strings.Repeat("x", maxSSEEvent/2+1) + "\n"
				for range 3 {
					if _, err := io.WriteString(w, line); err != nil {
						return
					}
				}
				io.WriteString(w, "\n")
				w.(http.Flusher).Flush()
				<-r.Context().Done() // the client hung up
			})
			u, _ := url.Parse(s.URL)
			var tr a2aclient.Transport = newJSONRPCStreams(s.URL, &http.Client{})
			if name == "rest" {
				tr = newRESTStreams(u, &http.Client{})
			}
			_, err := collect(tr.SendStreamingMessage(t.Context(), nil, sendReq("work")))
			if !errors.Is(err, errSSETooLarge) || !strings.Contains(err.Error(), fmt.Sprint(maxSSEEvent)) {
				t.Fatalf("error %v, want %v naming the bound", err, errSSETooLarge)
			}
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				t.Fatal("the agent's response was not closed")
			}
		})
	}
}

// TestSSETransport_Status has an agent refuse the call with an HTTP error:
// the error is a2a-go's for the binding.
func TestSSETransport_Status(t *testing.T) {
	s := rawSSE(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"code":503,"status":"UNAVAILABLE","message":"busy","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"UNSUPPORTED_OPERATION","domain":"a2a-protocol.org"}]}}`)
	})
	u, _ := url.Parse(s.URL)
	hc := &http.Client{}
	cases := []struct {
		name        string
		ours, a2ago a2aclient.Transport
		want        string
	}{
		{"jsonrpc", newJSONRPCStreams(s.URL, hc), a2aclient.NewJSONRPCTransport(s.URL, hc), "unexpected HTTP status: 503 Service Unavailable"},
		{"rest", newRESTStreams(u, hc), a2aclient.NewRESTTransport(u, hc), "busy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := collect(c.ours.SendStreamingMessage(t.Context(), nil, sendReq("work")))
			_, theirs := collect(c.a2ago.SendStreamingMessage(t.Context(), nil, sendReq("work")))
			if err == nil || !strings.Contains(err.Error(), c.want) || err.Error() != theirs.Error() {
				t.Fatalf("error %v, want %q as a2a-go's %v", err, c.want, theirs)
			}
			if c.name == "jsonrpc" && !unreachable(err) {
				t.Errorf("a 503 is not taken as an unreachable agent: %v", err)
			}
		})
	}
}

// TestSSETransport_Deadline ends calls whose agent works on: by the
// call's deadline while it streams, and by the caller stopping reading;
// either way the agent sees the request end.
func TestSSETransport_Deadline(t *testing.T) {
	agent := startStreamAgent(t)
	for _, p := range transportPairs(t, agent.URL) {
		t.Run(p.name+"/deadline", func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			evs, err := collect(p.ours.SendStreamingMessage(ctx, nil, sendReq("hang")))
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("events %v, error %v; want %v", shape(evs), err, context.DeadlineExceeded)
			}
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("the call ended %v after its deadline", took)
			}
			if want, got := []string{"task TASK_STATE_SUBMITTED", "status TASK_STATE_WORKING"}, shape(evs); !reflect.DeepEqual(want, got) {
				t.Errorf("events before the deadline: got %v, want %v", got, want)
			}
		})
	}
	t.Run("stop reading", func(t *testing.T) {
		gone := make(chan struct{})
		s := rawSSE(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"jsonrpc":"2.0","id":"1","result":{"task":{"id":"t1","contextId":"c1","status":{"state":"TASK_STATE_WORKING"}}}}`+"\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			close(gone)
		})
		for ev, err := range newJSONRPCStreams(s.URL, &http.Client{}).SendStreamingMessage(t.Context(), nil, sendReq("x")) {
			if err != nil {
				t.Fatal(err)
			}
			if task, ok := ev.(*a2a.Task); !ok || task.ID != "t1" {
				t.Fatalf("first event %#v, want task t1", ev)
			}
			break
		}
		select {
		case <-gone:
		case <-time.After(10 * time.Second):
			t.Fatal("the agent's request did not end when the caller stopped reading")
		}
	})
}

// TestSSETransport_Concurrent streams many calls at once through one
// transport of each binding.
func TestSSETransport_Concurrent(t *testing.T) {
	agent := startStreamAgent(t)
	for _, p := range transportPairs(t, agent.URL) {
		t.Run(p.name, func(t *testing.T) {
			var wg sync.WaitGroup
			errs := make(chan error, 16)
			for i := range 16 {
				wg.Go(func() {
					text := fmt.Sprint("w", i)
					evs, err := collect(p.ours.SendStreamingMessage(t.Context(), nil, sendReq(text)))
					if err == nil && (len(evs) != 4 || shape(evs)[2] != "artifact result of "+text) {
						err = fmt.Errorf("call %d: events %v", i, shape(evs))
					}
					if err != nil {
						errs <- err
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestDecodeRESTEvent reads HTTP+JSON stream events as a2a-go does.
func TestDecodeRESTEvent(t *testing.T) {
	cases := []struct {
		name, data, wantErr string
		want                string
	}{
		{"status", `{"statusUpdate":{"taskId":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}}}`, "", "*a2a.TaskStatusUpdateEvent"},
		{"none", `{}`, "unknown stream response type", ""},
		{"two", `{"task":{"id":"t","contextId":"c","status":{"state":"TASK_STATE_WORKING"}},"message":{"messageId":"m","role":"ROLE_AGENT","parts":[{"text":"x"}]}}`, "exactly one", ""},
		{"error", `{"error":{"code":404,"status":"NOT_FOUND","message":"gone","details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND","domain":"a2a-protocol.org"}]}}`, "gone", ""},
		{"not json", `{"task":`, "unmarshal", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, err := decodeRESTEvent(t.Context(), []byte(c.data))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, c.wantErr)
				}
				if c.name == "error" && !errors.Is(err, a2a.ErrTaskNotFound) {
					t.Errorf("error %v, want %v", err, a2a.ErrTaskNotFound)
				}
				return
			}
			if err != nil || fmt.Sprintf("%T", ev) != c.want {
				t.Fatalf("event %T, %v; want %s", ev, err, c.want)
			}
		})
	}
}

// TestA2AError maps JSON-RPC error objects as a2a-go does.
func TestA2AError(t *testing.T) {
	cases := []struct {
		raw  string
		want error
		text string
	}{
		{`{"code":-32001,"message":"task gone"}`, a2a.ErrTaskNotFound, "task gone"},
		{`{"code":-31401,"message":"who are you"}`, a2a.ErrUnauthenticated, "who are you"},
		{`{"code":1,"message":"odd"}`, a2a.ErrInternalError, "odd"},
		{`"not an object"`, nil, "decode"},
	}
	for _, c := range cases {
		err := a2aError(t.Context(), json.RawMessage(c.raw))
		if err == nil || !strings.Contains(err.Error(), c.text) || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("a2aError(%s) = %v, want %v saying %q", c.raw, err, c.want, c.text)
		}
	}
}
