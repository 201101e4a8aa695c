package orchestrator

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testcmp"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// agentView is what GET /v1/agents/{id} says of an agent's health.
type agentView struct {
	ID              string `json:"id"`
	Healthy         bool   `json:"healthy"`
	UnhealthyReason string `json:"unhealthyReason"`
	Breaker         struct {
		State     string `json:"state"`
		Failures  int    `json:"failures"`
		LastError string `json:"lastError"`
	} `json:"breaker"`
}

// An agent whose process died: three delegations fail, then the next is
// refused without calling it, with the breaker's reason; the registry
// view and /healthz say so while /readyz stays ready; once the agent is
// back a card refresh makes it usable again.
func TestAPI_StoppedAgentIsRefusedUntilItIsBack(t *testing.T) {
	t.Parallel()
	b := testagent.Start(t, testagent.Options{Name: "B", Skill: "s"}, testagent.Reply("hi"))
	cfg := loadDefaults(t)
	cfg.Registry.BreakerMinBackoff = Duration(time.Minute)
	cfg.Agents = []registry.Spec{{ID: "b", URL: b.URL}}
	base := startDaemon(t, cfg)
	testwait.Until(t, 10*time.Second, "the agent registered", func() bool { return nodeDaemon(base).Registry().Len() > 0 })
	delegate := `{"text": "hi", "agent": "b"}`
	if code := call(t, "POST", base+"/v1/delegations", delegate, nil); code != 201 {
		t.Fatalf("delegate to the live agent = %d", code)
	}

	b.Stop()
	var body httpapi.ErrorBody
	for i := range 3 {
		if code := call(t, "POST", base+"/v1/delegations", delegate, &body); code != 502 || body.Error.Code != "delegation_failed" {
			t.Fatalf("delegation %d to the stopped agent = %d %+v", i+1, code, body.Error)
		}
	}
	var refused struct {
		Error struct {
			Code    string `json:"code"`
			Details struct {
				Candidates []struct {
					Agent   string   `json:"agent"`
					Reasons []string `json:"reasons"`
				} `json:"candidates"`
				Attempts []any `json:"attempts"`
			} `json:"details"`
		} `json:"error"`
	}
	code := call(t, "POST", base+"/v1/delegations", delegate, &refused)
	cands := refused.Error.Details.Candidates
	if code != 422 || refused.Error.Code != "refused" {
		t.Fatalf("delegation after three failures = %d %q, want 422 refused", code, refused.Error.Code)
	}
	if n := len(refused.Error.Details.Attempts); n != 0 {
		t.Errorf("delegation after three failures: %d attempts, want none", n)
	}
	if len(cands) != 1 || len(cands[0].Reasons) != 1 {
		t.Fatalf("delegation after three failures: candidates %+v, want one with one reason", cands)
	}
	if why, want := cands[0].Reasons[0], "unhealthy: 3 calls failed in a row, last: "; !strings.HasPrefix(why, want) {
		t.Errorf("delegation after three failures: reason %q, want it to begin %q", why, want)
	}
	if why, want := cands[0].Reasons[0], "connection refused; retry after "; !strings.Contains(why, want) {
		t.Errorf("delegation after three failures: reason %q, want it to say %q", why, want)
	}

	var ag agentView
	code = call(t, "GET", base+"/v1/agents/b", "", &ag)
	want := agentView{ID: "b", Healthy: false}
	want.Breaker.State, want.Breaker.Failures = "open", 3
	if diff := cmp.Diff(answer[agentView]{200, want}, answer[agentView]{code, ag},
		cmpopts.IgnoreFields(agentView{}, "UnhealthyReason", "Breaker.LastError")); diff != "" {
		t.Errorf("GET /v1/agents/b (-want +got):\n%s", diff)
	}
	if !strings.Contains(ag.Breaker.LastError, "connection refused") {
		t.Errorf("GET /v1/agents/b: breaker's last error %q, want connection refused", ag.Breaker.LastError)
	}
	if !strings.HasPrefix(ag.UnhealthyReason, "breaker open: 3 calls failed in a row") {
		t.Errorf("GET /v1/agents/b: unhealthy reason %q, want the open breaker's", ag.UnhealthyReason)
	}
	var list struct{ Agents []agentView }
	if code := call(t, "GET", base+"/v1/agents", "", &list); code != 200 || len(list.Agents) != 1 {
		t.Errorf("GET /v1/agents = %d %+v, want the one agent", code, list)
	} else if list.Agents[0].Healthy || list.Agents[0].UnhealthyReason == "" {
		t.Errorf("GET /v1/agents: %+v, want it unhealthy, saying why", list.Agents[0])
	}
	var health httpapi.Health
	code = call(t, "GET", base+"/healthz", "", &health)
	if diff := cmp.Diff(answer[httpapi.Health]{200, httpapi.Health{Status: "degraded", Agents: 1, Healthy: 0}}, answer[httpapi.Health]{code, health},
		testcmp.Only[httpapi.Health]("Status", "Agents", "Healthy")); diff != "" {
		t.Errorf("GET /healthz (-want +got):\n%s", diff)
	}
	var ready httpapi.Readiness
	if code := call(t, "GET", base+"/readyz", "", &ready); code != 200 || ready.Status != "ready" {
		t.Errorf("GET /readyz = %d %+v; an agent's health is no reason to take the daemon out", code, ready)
	}

	b.Restart(t)
	code = call(t, "POST", base+"/v1/agents/b:refresh", "", &ag)
	want = agentView{ID: "b", Healthy: true}
	want.Breaker.State = "closed"
	if diff := cmp.Diff(answer[agentView]{200, want}, answer[agentView]{code, ag}, cmpopts.IgnoreFields(agentView{}, "Breaker.Failures", "Breaker.LastError")); diff != "" {
		t.Fatalf("refresh after the agent came back (-want +got):\n%s", diff)
	}
	if code := call(t, "POST", base+"/v1/delegations", delegate, nil); code != 201 {
		t.Errorf("delegate after recovery = %d", code)
	}
}

// /readyz answers 503 with reasons until Run serves, 200 while it does,
// and 503 again once it begins to stop.
func TestAPI_Readyz(t *testing.T) {
	t.Parallel()
	cfg := loadDefaults(t)
	cfg.Listen = "127.0.0.1:0"
	d, err := New(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	readyz := func() answer[httpapi.Readiness] {
		rec := httptest.NewRecorder()
		d.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/readyz", nil))
		var r httpapi.Readiness
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Errorf("GET /readyz: %v in %s", err, rec.Body)
		}
		return answer[httpapi.Readiness]{rec.Code, r}
	}
	want := answer[httpapi.Readiness]{http.StatusServiceUnavailable, httpapi.Readiness{Status: "not ready", Reasons: []string{"not listening yet", "agent card not built yet"}}}
	if diff := cmp.Diff(want, readyz()); diff != "" {
		t.Errorf("before Run (-want +got):\n%s", diff)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	testwait.Until(t, 10*time.Second, "the daemon binding its port", func() bool { return d.Addr() != nil })
	base := "http://" + d.Addr().String()
	var r httpapi.Readiness
	code := call(t, "GET", base+"/readyz", "", &r)
	if diff := cmp.Diff(answer[httpapi.Readiness]{200, httpapi.Readiness{Status: "ready"}}, answer[httpapi.Readiness]{code, r}, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("serving (-want +got):\n%s", diff)
	}
	d.stop() // what Run does first when it is asked to stop
	want = answer[httpapi.Readiness]{http.StatusServiceUnavailable, httpapi.Readiness{Reasons: []string{"shutting down"}}}
	if diff := cmp.Diff(want, readyz(), cmpopts.IgnoreFields(httpapi.Readiness{}, "Status")); diff != "" {
		t.Errorf("stopping (-want +got):\n%s", diff)
	}
}
