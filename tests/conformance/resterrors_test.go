package conformance

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/registry"
)

// restOnlyAgent serves the reference agent's answers over A2A 1.0
// HTTP+JSON only, so that orchd, the only way to reach it, calls it with
// its REST client. Its error answers are labelled errorType, which the
// specification (1.0.1, §11.1) says HTTP+JSON answers SHOULD be:
// application/a2a+json. a2a-go v2.4.0 labels them application/json.
func restOnlyAgent(t *testing.T, errorType string) string {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	card := &a2a.AgentCard{
		Name: "rest-only", Description: "reference a2a-go agent over HTTP+JSON only", Version: "1.0.0",
		SupportedInterfaces: []*a2a.AgentInterface{{URL: srv.URL + refREST, ProtocolBinding: a2a.TransportProtocolHTTPJSON, ProtocolVersion: "1.0"}},
		// No streaming: orchd calls it with SendMessage, whose refusal is
		// an HTTP error answer (a refused stream is an event of its own).
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
		Skills:             []a2a.AgentSkill{{ID: "reference", Name: "reference", Description: "answers by the first word of the text", Tags: []string{"reference"}}},
	}
	stopped, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	agent := &refAgent{nudge: make(chan struct{}), finish: make(chan struct{}), stopped: stopped, heldC: make(chan struct{})}
	handler := a2asrv.NewHandler(agent, a2asrv.WithLogger(slog.New(slog.DiscardHandler)), a2asrv.WithCallInterceptors(refErrors{}))
	mux.Handle(refREST+"/", http.StripPrefix(refREST, errorsLabelled(errorType, a2asrv.NewRESTHandler(handler))))
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	return srv.URL
}

// errorsLabelled labels next's error answers (any status but 200)
// contentType instead of the application/json a2a-go writes.
func errorsLabelled(contentType string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(labelled{ResponseWriter: w, contentType: contentType}, r)
	})
}

type labelled struct {
	http.ResponseWriter
	contentType string
}

func (l labelled) WriteHeader(code int) {
	if code != http.StatusOK && strings.HasPrefix(l.Header().Get("Content-Type"), "application/json") {
		l.Header().Set("Content-Type", l.contentType)
	}
	l.ResponseWriter.WriteHeader(code)
}

func (l labelled) Flush() {
	if f, ok := l.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// TestDifferential_RESTErrorsLabelledA2AJSON sends messages the agent
// refuses with each A2A error to an agent reached over HTTP+JSON, whose
// error answers are labelled application/json (as a2a-go writes them) or
// application/a2a+json (as A2A 1.0.1 says they SHOULD be), directly with
// a2a-go's REST client and through orchd, whose client calls the agent
// over HTTP+JSON and passes the agent's A2A error on. With
// application/json both keep the error's class. With application/a2a+json
// a2a-go v2.4.0's REST client reads every error as a server error
// (-32000; its FromRESTError reads only application/json bodies), and
// orchd's client, which relabels such answers, still keeps the class.
func TestDifferential_RESTErrorsLabelledA2AJSON(t *testing.T) {
	agents := map[string]string{"application/json": restOnlyAgent(t, "application/json"), "application/a2a+json": restOnlyAgent(t, "application/a2a+json")}
	through := map[string]string{}
	for label, url := range agents {
		through[label] = diffNode(t, "rest-"+strings.ReplaceAll(label, "/", "-"), registry.Spec{ID: "ref", URL: url})
	}
	for _, label := range []string{"application/json", "application/a2a+json"} {
		for _, code := range []int{-32001, -32002, -32003, -32004, -32005, -32006, -32007, -32008, -32009} {
			t.Run(fmt.Sprintf("%s/%d", label, code), func(t *testing.T) {
				want := fmt.Sprint(code)
				wantDirect := want
				if label == "application/a2a+json" {
					wantDirect = "-32000" // a2a-go v2.4.0's REST client
				}
				text := fmt.Sprintf("error %d", code)
				if got := sendOver(t, agents[label], a2a.TransportProtocolHTTPJSON, text); got != wantDirect {
					t.Errorf("directly with a2a-go's REST client: %s, want %s", got, wantDirect)
				}
				if got := sendOver(t, through[label], a2a.TransportProtocolJSONRPC, text); got != want {
					t.Errorf("through orchd: %s, want %s", got, want)
				}
			})
		}
		t.Run(label+"/complete", func(t *testing.T) {
			if got := sendOver(t, through[label], a2a.TransportProtocolJSONRPC, "complete"); got != string(a2a.TaskStateCompleted) {
				t.Errorf("through orchd: %s, want %s", got, a2a.TaskStateCompleted)
			}
		})
	}
}

// sendOver sends text with a2a-go's client over the 1.0 interface of
// binding the card at base lists, and returns the error's code or the
// task's state.
func sendOver(t *testing.T, base string, binding a2a.TransportProtocol, text string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	card, err := agentcard.DefaultResolver.Resolve(ctx, base)
	if err != nil {
		t.Fatalf("card at %s: %v", base, err)
	}
	var iface *a2a.AgentInterface
	for _, i := range card.SupportedInterfaces {
		if i.ProtocolBinding == binding && i.ProtocolVersion == "1.0" {
			iface = i
			break
		}
	}
	if iface == nil {
		t.Fatalf("the card at %s has no %s 1.0 interface", base, binding)
	}
	one := *card
	one.SupportedInterfaces = []*a2a.AgentInterface{iface}
	hc := &http.Client{}
	c, err := a2aclient.NewFromCard(ctx, &one, a2aclient.WithJSONRPCTransport(hc), a2aclient.WithRESTTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Destroy() }()
	res, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))})
	if err != nil {
		t.Logf("%s: %v", base, err)
		return errCode(err)
	}
	if task, ok := res.(*a2a.Task); ok {
		return string(task.Status.State)
	}
	return fmt.Sprintf("%T", res)
}
