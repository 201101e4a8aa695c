package delegation

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2acompat/a2av0"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/internal/testagent"
)

// statusAgent serves a streaming agent's card, for A2A version (over
// JSON-RPC, or binding when not empty), whose A2A endpoint answers every
// call with status.
func statusAgent(t *testing.T, version string, binding a2a.TransportProtocol, status int) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	if binding == "" {
		binding = a2a.TransportProtocolJSONRPC
	}
	card := &a2a.AgentCard{Name: "Status", Description: "answers " + http.StatusText(status), Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: srv.URL + "/rpc", ProtocolBinding: binding, ProtocolVersion: a2a.ProtocolVersion(version)}},
		Capabilities:        a2a.AgentCapabilities{Streaming: true},
		Skills:              []a2a.AgentSkill{{ID: "status", Name: "status", Tags: []string{"status"}}}}
	cards := a2asrv.NewStaticAgentCardHandler(card)
	if version == "0.3" {
		cards = a2asrv.NewAgentCardHandler(a2av0.NewStaticAgentCardProducer(card))
	}
	mux.Handle(a2asrv.WellKnownAgentCardPath, cards)
	mux.HandleFunc("/rpc", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, http.StatusText(status), status)
	})
	return srv
}

// TestClassify makes each error whose text classify.go matches the way its
// source makes it (a2a-go's clients, as orchd builds them, against real
// servers), checks the text holds the constant matched, and what orchd
// makes of the error: whether the next candidate is tried, whether the
// agent is unreachable, whether the failure counts against its breaker,
// and whether input is sent again.
func TestClassify(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{})
	ctx := t.Context()
	// clientOf registers the agent at url as id and returns orchd's client
	// for it.
	clientOf := func(t *testing.T, id, url string) *a2aclient.Client {
		t.Helper()
		f.add(t, id, url)
		a, _ := f.reg.Get(id)
		c, _, err := f.engine.client(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	work := func() *a2a.SendMessageRequest {
		return &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("work"))}
	}
	send := func(t *testing.T, c *a2aclient.Client) error {
		_, err := c.SendMessage(ctx, work())
		return err
	}
	stream := func(t *testing.T, c *a2aclient.Client) error {
		for _, err := range c.SendStreamingMessage(ctx, work()) {
			return err
		}
		t.Fatal("the stream ended with no element")
		return nil
	}

	for _, tc := range []struct {
		name string
		// text is the constant the error's text holds, "" for none.
		text string
		err  func(t *testing.T) error
		// What orchd makes of the error.
		retryable, unreachable, agentFault, stillEnding bool
	}{
		{
			name: "JSON-RPC 1.0 call answered 503", text: httpStatusText + "503",
			err: func(t *testing.T) error {
				return send(t, clientOf(t, "rpc-503", statusAgent(t, "1.0", "", http.StatusServiceUnavailable).URL))
			},
			retryable: true, unreachable: true, agentFault: true,
		},
		{
			// orchd reads JSON-RPC streams itself (jsonrpcstream.go).
			name: "JSON-RPC 1.0 stream answered 502", text: httpStatusText + "502",
			err: func(t *testing.T) error {
				return stream(t, clientOf(t, "rpc-stream-502", statusAgent(t, "1.0", "", http.StatusBadGateway).URL))
			},
			retryable: true, unreachable: true, agentFault: true,
		},
		{
			name: "JSON-RPC 0.3 call answered 500", text: httpStatusText + "500",
			err: func(t *testing.T) error {
				return send(t, clientOf(t, "rpc03-500", statusAgent(t, "0.3", "", http.StatusInternalServerError).URL))
			},
			retryable: true, unreachable: true, agentFault: true,
		},
		{
			name: "JSON-RPC 0.3 stream answered 503", text: httpStatusText + "503",
			err: func(t *testing.T) error {
				return stream(t, clientOf(t, "rpc03-stream-503", statusAgent(t, "0.3", "", http.StatusServiceUnavailable).URL))
			},
			retryable: true, unreachable: true, agentFault: true,
		},
		{
			// An HTTP status other than 5xx: the agent is there, and
			// refused; only 5xx matches.
			name: "JSON-RPC 1.0 call answered 404", text: httpStatusText + "404",
			err: func(t *testing.T) error {
				return send(t, clientOf(t, "rpc-404", statusAgent(t, "1.0", "", http.StatusNotFound).URL))
			},
		},
		{
			name: "JSON-RPC 0.3 stream answered 429", text: httpStatusText + "429",
			err: func(t *testing.T) error {
				return stream(t, clientOf(t, "rpc03-stream-429", statusAgent(t, "0.3", "", http.StatusTooManyRequests).URL))
			},
		},
		{
			name: "card with no transport orchd speaks", text: noTransportText,
			err: func(t *testing.T) error {
				srv := statusAgent(t, "1.0", "CARRIER_PIGEON", http.StatusOK)
				f.add(t, "pigeon", srv.URL)
				a, _ := f.reg.Get("pigeon")
				_, _, err := f.engine.client(ctx, a)
				return err
			},
			retryable: true,
		},
		{
			// An a2a-go agent refuses a message for a task whose execution
			// still runs, as it does while one that asked for input ends.
			name: "message for a task still executing", text: executionEnding,
			err: func(t *testing.T) error {
				agent := testagent.Start(t, testagent.Options{Name: "Busy", Skill: "busy"}, testagent.Hang())
				c := clientOf(t, "busy", agent.URL)
				req := work()
				req.Config = &a2a.SendMessageConfig{ReturnImmediately: true}
				res, err := c.SendMessage(ctx, req)
				if err != nil {
					t.Fatal(err)
				}
				task, ok := res.(*a2a.Task)
				if !ok {
					t.Fatalf("the agent answered with a %T, not its task", res)
				}
				defer func() { _, _ = c.CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID}) }()
				_, err = c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("more"))})
				return err
			},
			retryable: true, agentFault: true, stillEnding: true,
		},
		{
			// Matched by what it wraps, not by its text.
			name: "agent down: connection refused",
			err: func(t *testing.T) error {
				srv := statusAgent(t, "1.0", "", http.StatusOK)
				c := clientOf(t, "down", srv.URL)
				srv.Close()
				return send(t, c)
			},
			retryable: true, unreachable: true, agentFault: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.err(t)
			if err == nil {
				t.Fatal("the call did not fail")
			}
			if tc.text != "" && !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not hold %q: its source words it differently now", err, tc.text)
			}
			type meaning struct{ retryable, unreachable, agentFault, stillEnding bool }
			got := meaning{retryable(err), unreachable(err), agentFault(ctx, err), executionStillEnding(err)}
			want := meaning{tc.retryable, tc.unreachable, tc.agentFault, tc.stillEnding}
			if got != want {
				t.Errorf("error %q: got %+v, want %+v", err, got, want)
			}
		})
	}
}
