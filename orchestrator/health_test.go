package orchestrator

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
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
	if code != 422 || refused.Error.Code != "refused" || len(refused.Error.Details.Attempts) != 0 || len(cands) != 1 || len(cands[0].Reasons) != 1 ||
		!strings.HasPrefix(cands[0].Reasons[0], "unhealthy: 3 calls failed in a row, last: ") ||
		!strings.Contains(cands[0].Reasons[0], "connection refused; retry after ") {
		t.Fatalf("delegation after three failures = %d %+v", code, refused.Error)
	}

	var ag agentView
	if code := call(t, "GET", base+"/v1/agents/b", "", &ag); code != 200 || ag.Healthy || ag.Breaker.State != "open" || ag.Breaker.Failures != 3 ||
		!strings.Contains(ag.Breaker.LastError, "connection refused") || !strings.HasPrefix(ag.UnhealthyReason, "breaker open: 3 calls failed in a row") {
		t.Errorf("GET /v1/agents/b = %d %+v", code, ag)
	}
	var list struct{ Agents []agentView }
	if code := call(t, "GET", base+"/v1/agents", "", &list); code != 200 || len(list.Agents) != 1 || list.Agents[0].Healthy || list.Agents[0].UnhealthyReason == "" {
		t.Errorf("GET /v1/agents = %d %+v", code, list)
	}
	var health httpapi.Health
	if code := call(t, "GET", base+"/healthz", "", &health); code != 200 || health.Status != "degraded" || health.Agents != 1 || health.Healthy != 0 {
		t.Errorf("GET /healthz = %d %+v", code, health)
	}
	var ready httpapi.Readiness
	if code := call(t, "GET", base+"/readyz", "", &ready); code != 200 || ready.Status != "ready" {
		t.Errorf("GET /readyz = %d %+v; an agent's health is no reason to take the daemon out", code, ready)
	}

	b.Restart(t)
	if code := call(t, "POST", base+"/v1/agents/b:refresh", "", &ag); code != 200 || !ag.Healthy || ag.Breaker.State != "closed" || ag.UnhealthyReason != "" {
		t.Fatalf("refresh after the agent came back = %d %+v", code, ag)
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
	readyz := func() (int, httpapi.Readiness) {
		rec := httptest.NewRecorder()
		d.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "http://127.0.0.1/readyz", nil))
		var r httpapi.Readiness
		if err := json.Unmarshal(rec.Body.Bytes(), &r); err != nil {
			t.Errorf("GET /readyz: %v in %s", err, rec.Body)
		}
		return rec.Code, r
	}
	if code, r := readyz(); code != http.StatusServiceUnavailable || r.Status != "not ready" ||
		!slices.Equal(r.Reasons, []string{"not listening yet", "agent card not built yet"}) {
		t.Errorf("before Run: %d %+v", code, r)
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
	if code := call(t, "GET", base+"/readyz", "", &r); code != 200 || r.Status != "ready" || len(r.Reasons) != 0 {
		t.Errorf("serving: %d %+v", code, r)
	}
	d.stop() // what Run does first when it is asked to stop
	if code, r := readyz(); code != http.StatusServiceUnavailable || !slices.Equal(r.Reasons, []string{"shutting down"}) {
		t.Errorf("stopping: %d %+v", code, r)
	}
}
