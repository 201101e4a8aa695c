package delegation

import (
	"net/http"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"go.uber.org/goleak"

	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
)

// TestMain runs a helper process when the test binary was started as one
// (see helpers), and otherwise the tests, failing them on leaked
// goroutines.
func TestMain(m *testing.M) {
	helpers.Main()
	goleak.VerifyTestMain(m)
}

// fixture is a registry, policies and engine over test agents.
type fixture struct {
	reg    *registry.Registry
	pol    *policies.Engine
	engine *Engine
}

func newFixture(t testing.TB, cfg Config, policyPaths ...string) *fixture {
	t.Helper()
	return newFixtureWith(t, registry.Config{}, cfg, policyPaths...)
}

// newFixtureStore is newFixture keeping delegations in store.
func newFixtureStore(t testing.TB, cfg Config, store Store) *fixture {
	t.Helper()
	return newFixtureFull(t, registry.Config{}, cfg, store)
}

// newFixtureWith is newFixture with the registry configured by rcfg.
func newFixtureWith(t testing.TB, rcfg registry.Config, cfg Config, policyPaths ...string) *fixture {
	t.Helper()
	return newFixtureFull(t, rcfg, cfg, NewMemoryStore(0), policyPaths...)
}

func newFixtureFull(t testing.TB, rcfg registry.Config, cfg Config, store Store, policyPaths ...string) *fixture {
	t.Helper()
	rcfg.AllowNetworks = []string{"127.0.0.0/8"}
	reg, err := registry.New(rcfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	pol, err := policies.NewEngine(policyPaths, policies.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := registry.NewTransport(registry.Config{AllowNetworks: []string{"127.0.0.0/8"}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.HTTPClient == nil {
		// As the daemon wires it: streams on connections of their own.
		cfg.HTTPClient = &http.Client{Transport: OwnStreamConns(transport)}
		t.Cleanup(transport.CloseIdleConnections)
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	e := NewEngine(reg, pol, store, cfg, nil)
	t.Cleanup(e.Close)
	return &fixture{reg: reg, pol: pol, engine: e}
}

func (f *fixture) add(t testing.TB, id, url string) {
	t.Helper()
	if _, err := f.reg.Add(t.Context(), registry.Spec{ID: id, URL: url}); err != nil {
		t.Fatal(err)
	}
}

// waitState waits until the delegation reaches state.
func waitState(t testing.TB, d *Delegation, want a2a.TaskState) Record {
	t.Helper()
	return waitRecord(t, d, "state "+string(want), func(r Record) bool { return r.State == want })
}

// waitRecord waits up to 30 seconds for the delegation's record to meet
// cond, checked at each event, and returns it; what names cond in the
// failure. The limit is wide because it only decides how long a broken
// test takes to fail: under -race, on a busy machine, streaming 200
// chunks takes 10s.
func waitRecord(t testing.TB, d *Delegation, what string, cond func(Record) bool) Record {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		// The channel is taken before the record is read, so an event
		// between the two still wakes the wait.
		_, changed, _ := d.Events(1 << 62)
		r := d.Record()
		if cond(r) {
			return r
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("delegation %s: no %s in 30s; it is %s (error %q): %+v", r.ID, what, r.State, r.Error, r)
		}
	}
}

// chainReader declares the delegation extension on a test agent's card:
// orchd sends the chain context only to agents that declare it.
var chainReader = []a2a.AgentExtension{{URI: ExtensionURI}}

// logEnds fails the test unless evs run from seq 1 with no gap and no
// duplicate, and returns how many of them end the delegation.
func logEnds(t testing.TB, evs []Event) int {
	t.Helper()
	ends := 0
	for i, ev := range evs {
		if ev.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: the log has a gap or a duplicate: %+v", i, ev.Seq, evs)
		}
		if ev.State.Terminal() {
			ends++
		}
	}
	return ends
}
