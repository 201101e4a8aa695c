package orchestrator

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/store"
)

// sentTo counts the messages that started work at the agent.
func sentTo(a *testagent.Agent) int { return len(a.Messages()) }

// TestRunningLimits_API fills a daemon that runs three delegations at
// most, two per caller: a caller past its share is refused 429 naming
// delegation.maxRunningPerCaller while another is still admitted, work
// past the node's limit is refused naming delegation.maxRunning, nothing
// refused reaches the agent, a delegation that ends gives its slot back,
// and the refusals are counted.
func TestRunningLimits_API(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Hang())
	cfg := loadDefaults(t)
	cfg.Auth = authTokens()
	cfg.Telemetry.Prometheus = true
	cfg.Delegation.MaxRunning, cfg.Delegation.MaxRunningPerCaller = 3, 2
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)
	const work = `{"text": "survey", "skill": "research"}`
	metricsBefore := scrapeAs(t, base, rootToken)

	delegate := func(token string) (int, delegation.Record, httpapi.ErrorBody) {
		t.Helper()
		var err error
		var raw json.RawMessage
		code, _ := callAs(t, token, "POST", base+"/v1/delegations", work, &raw)
		var rec delegation.Record
		var e httpapi.ErrorBody
		if code == 201 {
			err = json.Unmarshal(raw, &rec)
		} else {
			err = json.Unmarshal(raw, &e)
		}
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return code, rec, e
	}
	var alices []delegation.Record
	for range 2 {
		code, rec, e := delegate(aliceToken)
		if code != 201 {
			t.Fatalf("alice's delegation = %d %+v", code, e)
		}
		alices = append(alices, rec)
	}
	code, _, e := delegate(aliceToken)
	if diff := cmp.Diff(refusal{429, "resource_exhausted"}, refusalOf(code, e)); diff != "" {
		t.Fatalf("alice's third (-want +got):\n%s", diff)
	}
	if !strings.Contains(e.Error.Message, "delegation.maxRunningPerCaller") || !strings.Contains(e.Error.Message, "tenant acme") {
		t.Errorf("alice's refusal does not name the limit and whose: %q", e.Error.Message)
	}
	wantDetails := map[string]any{"setting": "delegation.maxRunningPerCaller", "limit": float64(2), "caller": "tenant acme"}
	if diff := cmp.Diff(wantDetails, e.Error.Details); diff != "" {
		t.Errorf("alice's refusal's details (-want +got):\n%s", diff)
	}
	if code, _, e := delegate(bobToken); code != 201 {
		t.Fatalf("bob, with alice at her limit = %d %+v", code, e)
	}
	code, _, e = delegate(rootToken)
	if diff := cmp.Diff(refusal{429, "resource_exhausted"}, refusalOf(code, e)); diff != "" {
		t.Fatalf("over the node's limit (-want +got):\n%s", diff)
	}
	if !strings.Contains(e.Error.Message, "delegation.maxRunning ") && !strings.Contains(e.Error.Message, "(delegation.maxRunning)") {
		t.Errorf("the node's refusal does not name its limit: %q", e.Error.Message)
	}
	if n := sentTo(worker); n != 3 {
		t.Errorf("the agent got %d messages, want 3: refused work reached it", n)
	}

	// One of alice's ends: its slot is hers again.
	if code := callAs0(t, aliceToken, "POST", base+"/v1/delegations/"+alices[0].ID+":cancel"); code != 200 {
		t.Fatalf("cancel = %d", code)
	}
	if code, _, e := delegate(aliceToken); code != 201 {
		t.Errorf("alice, once one of hers ended = %d %+v", code, e)
	}
	after := scrapeAs(t, base, rootToken)
	for series, want := range map[string]float64{
		`orchd_delegation_refusals_total{reason="max_running_per_caller"}`: 1,
		`orchd_delegation_refusals_total{reason="max_running"}`:            1,
		`orchd_delegations_total{outcome="refused"}`:                       2,
	} {
		if got := value(after, series) - value(metricsBefore, series); got != want {
			t.Errorf("%s moved by %v, want %v", series, got, want)
		}
	}
}

// callAs0 is callAs for a request without a body whose answer is not read.
func callAs0(t *testing.T, token, method, url string) int {
	t.Helper()
	code, _ := callAs(t, token, method, url, "", nil)
	return code
}

// scrapeAs reads the daemon's /metrics with token.
func scrapeAs(t *testing.T, base, token string) string {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), "GET", base+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /metrics = %d %v", resp.StatusCode, err)
	}
	return string(b)
}

// TestRunningLimits_A2A fills a daemon that runs one delegation at most
// through its A2A interface: the next message is refused with A2A's
// server error naming the limit, before it reaches the agent.
func TestRunningLimits_A2A(t *testing.T) {
	t.Parallel()
	worker := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "research", Streaming: true}, testagent.Hang())
	cfg := loadDefaults(t)
	cfg.Delegation.MaxRunning = 1
	cfg.Agents = []registry.Spec{{ID: "worker", URL: worker.URL}}
	base := startDaemon(t, cfg)
	c := testagent.Client(t, base)
	send := func() error {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey"))
		_, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
		return err
	}
	if err := send(); err != nil {
		t.Fatal(err)
	}
	err := send()
	var ae *a2a.Error
	if !errors.Is(err, a2a.ErrServerError) || !errors.As(err, &ae) || !strings.Contains(ae.Message, "delegation.maxRunning") {
		t.Fatalf("over the limit: err = %v, want A2A's server error naming delegation.maxRunning", err)
	}
	if n := sentTo(worker); n != 1 {
		t.Errorf("the agent got %d messages, want 1", n)
	}
}

// TestStoreHints checks how many running delegations the store
// remembers its writes of for a node's delegation.maxRunning: twice the
// limit, within the store's bounds, and the store's default with no
// limit.
func TestStoreHints(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ maxRunning, want int }{
		{20_000, 40_000},
		{0, 0},
		{10, minStoreHints},
		{store.MaxHints, store.MaxHints},
	} {
		if got := storeHints(tc.maxRunning); got != tc.want {
			t.Errorf("storeHints(%d) = %d, want %d", tc.maxRunning, got, tc.want)
		}
	}
	if cfg := loadDefaults(t); storeHints(cfg.Delegation.MaxRunning) != store.DefaultHints {
		t.Errorf("the default maxRunning %d gives %d hints, the store's default is %d: keep them together",
			cfg.Delegation.MaxRunning, storeHints(cfg.Delegation.MaxRunning), store.DefaultHints)
	}
}
