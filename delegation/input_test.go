package delegation

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/internal/testagent"
)

// endingAgent serves agent behind a proxy that refuses the first message
// sent to an existing task as an a2a-go agent does while the execution
// that asked for input is still ending: an internal error saying an
// execution is in progress. It returns the proxy's URL and how many
// messages it refused.
func endingAgent(t *testing.T, agent *testagent.Agent) (string, *atomic.Int32) {
	t.Helper()
	target, err := url.Parse(agent.URL)
	if err != nil {
		t.Fatal(err)
	}
	refused := &atomic.Int32{}
	proxy := httputil.NewSingleHostReverseProxy(target)
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if strings.HasSuffix(r.URL.Path, "agent-card.json") {
			// The card names the proxy, so every call passes it.
			res, err := http.Get(agent.URL + r.URL.Path)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer res.Body.Close()
			card, _ := io.ReadAll(res.Body)
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(bytes.ReplaceAll(card, []byte(agent.URL), []byte(srv.URL)))
			return
		}
		var req struct {
			ID     any    `json:"id"`
			Method string `json:"method"`
			Params struct {
				Message struct {
					TaskID string `json:"taskId"`
				} `json:"message"`
			} `json:"params"`
		}
		if json.Unmarshal(body, &req) == nil && req.Method == "SendMessage" && req.Params.Message.TaskID != "" && refused.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": req.ID,
				"error": map[string]any{"code": -32603, "message": "failed to execute: " + executionEnding}})
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, refused
}

// TestSend_InputToAnEndingExecutionIsSentAgain: input the agent refuses
// because the execution that asked for it is still ending is sent again,
// and the task completes with it.
func TestSend_InputToAnEndingExecutionIsSentAgain(t *testing.T) {
	t.Parallel()
	f := newFixture(t, Config{PollInterval: 20 * time.Millisecond})
	agent := testagent.Start(t, testagent.Options{Name: "Asker", Skill: "ask"}, testagent.Ask())
	proxied, refused := endingAgent(t, agent)
	f.add(t, "asker", proxied)
	d, err := f.engine.Delegate(t.Context(), Request{Skill: "ask", Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go"))})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateInputRequired)
	if _, err := f.engine.Send(t.Context(), d.ID(), a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("1999"))); err != nil {
		t.Fatalf("send input: %v", err)
	}
	rec := waitState(t, d, a2a.TaskStateCompleted)
	if n := refused.Load(); n != 2 {
		t.Errorf("%d messages to the task reached the proxy, want the refused one and its retry", n)
	}
	if rec.Result == nil || !strings.Contains(testagent.Text(rec.Result), "1999") {
		t.Errorf("result %v", rec.Result)
	}
}
