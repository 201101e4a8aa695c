package httpapi

import (
	"bufio"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testengine"
	"github.com/orchd/orchd/registry"
)

// TestEvents_KeepAliveWhileTheWorkIsQuiet follows a delegation whose
// agent stays quiet for several heartbeats between two events: the
// stream sends keep-alive comments meanwhile, then the agent's events
// as they come, each once and in order, and ends with the work.
func TestEvents_KeepAliveWhileTheWorkIsQuiet(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work", Streaming: true}, testagent.Work(500*time.Millisecond))
	parts := testengine.New(t, registry.Spec{ID: "worker", URL: agent.URL})
	engine := delegation.NewEngine(parts.Registry, parts.Policies, delegation.NewMemoryStore(0), delegation.Config{HTTPClient: parts.HTTPClient}, nil)
	t.Cleanup(engine.Close)
	if err := engine.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	api := New(Deps{Registry: parts.Registry, Policies: parts.Policies, Delegations: engine,
		Authz:  httpgate.NewAuthorizer(httpgate.NewGate(httpgate.AuthConfig{}, nil, nil), parts.Policies),
		Limits: httpgate.NewBodyLimits(httpgate.Limits{}, nil), Heartbeat: 50 * time.Millisecond})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)

	d, err := engine.Delegate(t.Context(), delegation.Request{Skill: "work", Text: "go"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := srv.Client().Get(srv.URL + "/v1/delegations/" + d.ID() + "/events")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []string // "event KIND" and "keep-alive" lines, in order
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		switch line := sc.Text(); {
		case line == ": keep-alive":
			if n := len(got); n == 0 || got[n-1] != "keep-alive" {
				got = append(got, "keep-alive")
			}
		case strings.HasPrefix(line, "event: "):
			got = append(got, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	// The agent: WORKING, the artifact's first chunk, half a second of
	// quiet, its second chunk and COMPLETED; keep-alives in the quiet (a
	// busy machine may add some elsewhere).
	var events []string
	quiet := false
	for i, g := range got {
		if g != "keep-alive" {
			events = append(events, g)
			continue
		}
		quiet = quiet || len(events) == 2 && i+1 < len(got) && got[i+1] == "event: artifact"
	}
	want := []string{"event: state", "event: artifact", "event: artifact", "event: state"}
	if strings.Join(events, ",") != strings.Join(want, ",") || !quiet {
		t.Errorf("the stream said %q, want the events %q with keep-alives between the two artifact events", got, want)
	}
}
