package orchestrator

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/telemetry"
)

// tracedNode is orchdNode with its spans recorded in rec under the service
// name self.
func tracedNode(t *testing.T, rec *tracetest.SpanRecorder, self, skill string, agents ...registry.Spec) string {
	t.Helper()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", self))))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg := loadDefaults(t)
	cfg.Delegation.Self = self
	cfg.Agent.Skills = []SkillConfig{{ID: skill}}
	cfg.Agents = agents
	cfg.Telemetry.Providers = telemetry.WithProviders(tp, nil)
	return startDaemon(t, cfg)
}

// service is the name of the daemon that recorded s.
func service(s sdktrace.ReadOnlySpan) string {
	v, _ := s.Resource().Set().Value("service.name")
	return v.AsString()
}

func TestTelemetry_OneTraceAcrossABC(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	d := testagent.Start(t, testagent.Options{Name: "D", Skill: "research", Streaming: true}, testagent.Reply("done"))
	c := tracedNode(t, rec, "c", "research", registry.Spec{ID: "d", URL: d.URL})
	b := tracedNode(t, rec, "b", "research", registry.Spec{ID: "c", URL: c})
	a := tracedNode(t, rec, "a", "research", registry.Spec{ID: "b", URL: b})

	var r delegation.Record
	if code := call(t, "POST", a+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &r); code != 201 {
		t.Fatalf("delegate at A = %d %+v", code, r)
	}
	waitFor(t, a, r.ID, a2a.TaskStateCompleted)

	// Spans of streamed calls end when their streams do, a little after
	// the delegation completed: wait for every span the checks need.
	want := []string{"a:orchd POST /v1/delegations", "b:A2A SendStreamingMessage", "c:A2A SendStreamingMessage"}
	for _, hop := range []string{"a", "b", "c"} {
		want = append(want, hop+":orchd.delegate", hop+":orchd.policy.evaluate", hop+":HTTP POST")
	}
	var spans []sdktrace.ReadOnlySpan
	testwait.Succeeds(t, 10*time.Second, "every span the checks need", func() error {
		spans = rec.Ended()
		if have := names(spans); slices.ContainsFunc(want, func(w string) bool { return !slices.Contains(have, w) }) {
			return fmt.Errorf("spans %v, want all of %v", have, want)
		}
		return nil
	})
	byID := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byID[s.SpanContext().SpanID().String()] = s
	}
	parent := func(s sdktrace.ReadOnlySpan) sdktrace.ReadOnlySpan { return byID[s.Parent().SpanID().String()] }
	find := func(svc, name string) sdktrace.ReadOnlySpan {
		t.Helper()
		for _, s := range spans {
			if service(s) == svc && s.Name() == name {
				return s
			}
		}
		t.Fatalf("no span %q at %s; spans: %v", name, svc, names(spans))
		return nil
	}

	root := find("a", "orchd POST /v1/delegations")
	if root.Parent().IsValid() {
		t.Errorf("the API span at A has a parent: %v", root.Parent())
	}
	trace := root.SpanContext().TraceID()
	// Each hop: its delegate span is a child of its incoming request's
	// span, its policy evaluation a child of the delegate span, and the
	// next hop's A2A server span a child of its outgoing HTTP call, which
	// is a child of the delegate span.
	incoming := root
	for _, hop := range []string{"a", "b", "c"} {
		del := find(hop, "orchd.delegate")
		if p := parent(del); p != incoming {
			t.Errorf("%s: delegate span's parent is %v, want %q", hop, spanName(p), incoming.Name())
		}
		if p := parent(find(hop, "orchd.policy.evaluate")); p != del {
			t.Errorf("%s: policy span's parent is %v, want the delegate span", hop, spanName(p))
		}
		attrs := attrMap(del)
		want := map[string]string{"orchd.skill": "research", "orchd.outcome": "accepted", "orchd.candidates": "1"}
		if diff := cmp.Diff(want, attrs, cmpopts.IgnoreMapEntries(func(k, _ string) bool { _, ok := want[k]; return !ok })); diff != "" {
			t.Errorf("%s: delegate span attributes (-want +got):\n%s", hop, diff)
		}
		if attrs["orchd.chosen"] == "" {
			t.Errorf("%s: delegate span names no chosen agent: %v", hop, attrs)
		}
		if hop == "c" {
			break
		}
		next := map[string]string{"a": "b", "b": "c"}[hop]
		server := find(next, "A2A SendStreamingMessage")
		client := parent(server)
		if client == nil {
			t.Errorf("%s → %s: the server span has no parent, want %s's HTTP call", hop, next, hop)
		} else if service(client) != hop || parent(client) != del {
			t.Errorf("%s → %s: the server span's parent is %v at %s under %v, want %s's HTTP call under its delegate span",
				hop, next, spanName(client), service(client), spanName(parent(client)), hop)
		}
		incoming = server
	}
	inTrace := 0
	for _, s := range spans {
		switch s.Name() {
		case "orchd.delegate", "orchd.policy.evaluate", "A2A SendStreamingMessage", "HTTP POST":
			if s.SpanContext().TraceID() != trace {
				t.Errorf("%s is in trace %s, not %s", spanName(s), s.SpanContext().TraceID(), trace)
			}
			inTrace++
		}
	}
	if inTrace < 11 { // 3 delegate, 3 policy, 2 A2A servers, 3 HTTP calls
		t.Errorf("only %d spans of the delegation: %v", inTrace, names(spans))
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, service(s)+":"+s.Name())
	}
	return out
}

func spanName(s sdktrace.ReadOnlySpan) string {
	if s == nil {
		return "<none>"
	}
	return service(s) + ":" + s.Name()
}

func attrMap(s sdktrace.ReadOnlySpan) map[string]string {
	m := map[string]string{}
	for _, kv := range s.Attributes() {
		m[string(kv.Key)] = kv.Value.String()
	}
	return m
}

func TestTelemetry_MetricsMoveAfterADelegation(t *testing.T) {
	t.Parallel()
	work := testagent.Start(t, testagent.Options{Name: "W", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	policy := filepath.Join(t.TempDir(), "steerable.yaml")
	writeFile(t, policy, `policy: steerable-first
default: allow
rules:
  - name: prefer-steerable
    rank: 'agent.supports("steerable") ? 10 : 0'
`)
	plain := testagent.Start(t, testagent.Options{Name: "P", Skill: "plain", Streaming: true}, testagent.Hang())
	cfg := loadDefaults(t)
	cfg.Agents = []registry.Spec{{ID: "w", URL: work.URL}, {ID: "p", URL: plain.URL}}
	cfg.Policies.Paths = []string{policy}
	base := startDaemon(t, cfg)

	before := scrape(t, base)
	var r delegation.Record
	if code := call(t, "POST", base+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &r); code != 201 {
		t.Fatalf("delegate = %d", code)
	}
	waitFor(t, base, r.ID, a2a.TaskStateWorking)
	if code := call(t, "POST", base+"/v1/delegations/"+r.ID+":steer", `{"text": "narrow it"}`, nil); code != 200 {
		t.Fatalf("steer = %d", code)
	}
	if code := call(t, "POST", base+"/v1/delegations", `{"text": "x", "skill": "research", "requires": ["pushNotifications"]}`, nil); code != 422 {
		t.Fatalf("refused delegation = %d", code)
	}
	if code := call(t, "POST", base+"/v1/delegations/"+r.ID+":cancel", "", nil); code != 200 {
		t.Fatalf("cancel = %d", code)
	}
	var p delegation.Record
	if code := call(t, "POST", base+"/v1/delegations", `{"text": "wait", "skill": "plain"}`, &p); code != 201 {
		t.Fatalf("delegate to the plain agent = %d", code)
	}
	waitFor(t, base, p.ID, a2a.TaskStateWorking)
	if code := call(t, "POST", base+"/v1/delegations/"+p.ID+":steer", `{"text": "turn"}`, nil); code != 409 {
		t.Fatalf("steer to a hop without the mode = %d, want 409", code)
	}
	if code := call(t, "POST", base+"/v1/delegations/"+p.ID+":cancel", "", nil); code != 200 {
		t.Fatalf("cancel the plain delegation = %d", code)
	}
	after := scrape(t, base)

	for _, tc := range []struct {
		series string
		delta  float64
	}{
		{`orchd_delegations_total{outcome="accepted"}`, 2},
		{`orchd_delegations_total{outcome="refused"}`, 1},
		{`orchd_delegation_refusals_total{reason="capability"}`, 1},
		{`orchd_delegations_ended_total{state="TASK_STATE_CANCELED"}`, 2},
		{`orchd_policy_decisions_total{kind="rank",policy="steerable-first",rule="prefer-steerable"}`, 1},
		{`orchd_steering_signals_total{control="steer",outcome="routed"}`, 1},
		{`orchd_steering_signals_total{control="steer",outcome="refused",reason="mode_not_advertised"}`, 1},
		{`orchd_registry_card_fetches_total{kind="initial",outcome="fetched"}`, 0},
		{`orchd_registry_card_cache_total{result="hit"}`, 3},
		{`orchd_downstream_duration_seconds_count{agent="w",method="SendStreamingMessage",outcome="ok"}`, 1},
		{`orchd_delegations_inflight`, 0},
	} {
		got := value(after, tc.series) - value(before, tc.series)
		if got != tc.delta {
			t.Errorf("%s moved by %v, want %v", tc.series, got, tc.delta)
		}
	}
	if value(after, `orchd_registry_card_fetches_total{kind="initial",outcome="fetched"}`) < 1 {
		t.Errorf("no card fetch counted:\n%s", grep(after, "orchd_registry"))
	}
}

// scrape reads the daemon's /metrics.
func scrape(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
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

// value is a series' value in a scrape: the sum over series whose labels
// include the given ones (otel_scope_* labels aside), 0 when absent.
func value(scrape, series string) float64 {
	name, labels, _ := strings.Cut(strings.TrimSuffix(series, "}"), "{")
	var want []string
	if labels != "" {
		want = strings.Split(labels, ",")
	}
	line := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `(?:\{(.*)\})? (\S+)$`)
	var sum float64
	for _, l := range strings.Split(scrape, "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		have := strings.Split(m[1], ",")
		if !containsAll(have, want) {
			continue
		}
		v, _ := strconv.ParseFloat(m[2], 64)
		sum += v
	}
	return sum
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func grep(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
