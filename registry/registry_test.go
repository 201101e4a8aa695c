package registry

import (
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/internal/testwait"
)

func TestRegistry_AddAndLookups(t *testing.T) {
	t.Parallel()
	full, err := os.ReadFile("../capability/testdata/cards/v1-full.json")
	if err != nil {
		t.Fatal(err)
	}
	s1 := newCardServer(t, string(full))
	s2 := newCardServer(t, card("Research Agent", `"pushNotifications":true`))
	r := newTestRegistry(t, Config{})
	ctx := t.Context()

	a1, err := r.Add(ctx, Spec{URL: s1.URL + "/"})
	if err != nil {
		t.Fatal(err)
	}
	a2, err := r.Add(ctx, Spec{URL: s2.URL})
	if err != nil {
		t.Fatal(err)
	}
	if a1.ID != "research-agent" || a2.ID != "research-agent-2" {
		t.Errorf("derived ids = %q, %q; want research-agent, research-agent-2", a1.ID, a2.ID)
	}
	if a1.URL != s1.URL || !a1.Healthy {
		t.Errorf("agent at %s, healthy %v; want %s, healthy", a1.URL, a1.Healthy, s1.URL)
	}
	if a1.FetchedAt.IsZero() || a1.ETag == "" {
		t.Errorf("agent fetched at %v with etag %q; want both set", a1.FetchedAt, a1.ETag)
	}

	if got, ok := r.Get("research-agent"); !ok || got != a1 {
		t.Errorf("Get = %v, %v", got, ok)
	}
	if got, ok := r.ByURL(s2.URL + "/"); !ok || got != a2 {
		t.Errorf("ByURL with trailing slash = %v, %v", got, ok)
	}
	ids := func(as []*Agent) []string {
		var out []string
		for _, a := range as {
			out = append(out, a.ID)
		}
		return out
	}
	tests := []struct {
		name string
		got  []*Agent
		want []string
	}{
		{"skill tag", r.BySkill("summarize"), []string{"research-agent-2"}},
		{"skill tag shared", r.BySkill("search"), []string{"research-agent", "research-agent-2"}},
		{"skill id", r.BySkill("research"), []string{"research-agent", "research-agent-2"}},
		{"capability alias", r.ByCapability("streamingMessage"), []string{"research-agent"}},
		{"capability both", r.ByCapability(capability.PushNotifications), []string{"research-agent", "research-agent-2"}},
		{"implicit", r.ByCapability(capability.SendMessage), []string{"research-agent", "research-agent-2"}},
		{"extension", r.ByExtension(capability.SteeringURI), []string{"research-agent"}},
		{"none", r.ByExtension("urn:none"), nil},
		{"list", r.List(), []string{"research-agent", "research-agent-2"}},
	}
	for _, tt := range tests {
		if got := ids(tt.got); !slices.Equal(got, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}

	if _, err := r.Add(ctx, Spec{URL: s1.URL}); !errors.Is(err, ErrConflict) {
		t.Errorf("re-adding a URL: err = %v, want ErrConflict", err)
	}
	s3 := newCardServer(t, card("Other", ""))
	if _, err := r.Add(ctx, Spec{ID: "research-agent", URL: s3.URL}); !errors.Is(err, ErrConflict) {
		t.Errorf("taken id: err = %v, want ErrConflict", err)
	}
	if got := s3.requests.Load(); got != 0 {
		t.Errorf("a conflicting add fetched the card %d times; conflicts must be refused first", got)
	}

	if err := r.Remove("research-agent"); err != nil {
		t.Fatal(err)
	}
	if err := r.Remove("research-agent"); !errors.Is(err, ErrNotFound) {
		t.Errorf("second Remove: err = %v", err)
	}
	if got := ids(r.ByCapability(capability.PushNotifications)); !slices.Equal(got, []string{"research-agent-2"}) {
		t.Errorf("after Remove, push agents = %v", got)
	}
	if got := ids(r.List()); !slices.Equal(got, []string{"research-agent-2"}) {
		t.Errorf("after Remove, List = %v", got)
	}
	if _, err := r.Refresh(ctx, "research-agent"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Refresh of removed agent: err = %v", err)
	}
}

func TestRegistry_AddRefusesBadInput(t *testing.T) {
	t.Parallel()
	bad := newCardServer(t, `{"name": 42}`)
	down := newCardServer(t, "")
	down.set(func(s *cardServer) { s.status = http.StatusServiceUnavailable })
	r := newTestRegistry(t, Config{})
	tests := []struct {
		name string
		spec Spec
		want error
		msg  string
	}{
		{"scheme", Spec{URL: "ftp://x.example.com"}, ErrInvalidURL, "scheme must be http or https"},
		{"credentials", Spec{URL: "http://u:p@x.example.com"}, ErrInvalidURL, "credentials"},
		{"id", Spec{ID: "a/b", URL: bad.URL}, ErrInvalidID, `invalid agent id "a/b"`},
		{"card", Spec{URL: bad.URL}, capability.ErrInvalidCard, "name: want string, got number"},
		{"status", Spec{URL: down.URL}, nil, "server answered HTTP 503"},
	}
	for _, tt := range tests {
		_, err := r.Add(t.Context(), tt.spec)
		if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("%s: err = %v; want %v containing %q", tt.name, err, tt.want, tt.msg)
		}
	}
	if r.Len() != 0 {
		t.Errorf("failed adds registered %d agents", r.Len())
	}
	var fe *FetchError
	if _, err := r.Add(t.Context(), Spec{URL: down.URL}); !errors.As(err, &fe) || fe.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("want *FetchError with status 503, got %v", err)
	}
}

func TestRegistry_LegacyPathFallback(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, `{"name":"Old Agent","url":"http://127.0.0.1/rpc","version":"0.1","capabilities":{"streaming":true},"skills":[]}`)
	s.set(func(s *cardServer) { s.legacyOnly = true })
	r := newTestRegistry(t, Config{})
	a, err := r.Add(t.Context(), Spec{URL: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	type legacy struct {
		Format     string
		Versions   []string
		Compatible bool
	}
	if diff := cmp.Diff(legacy{"0.2", []string{"0.2"}, false}, legacy{a.CardFormat, a.Versions(""), a.ClientCompatible}); diff != "" {
		t.Errorf("legacy agent (-want +got):\n%s", diff)
	}
}

func TestRegistry_DriftOnRefresh(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("Drifty", `"streaming":true,"pushNotifications":true`))
	clk := newClock()
	r := newTestRegistry(t, Config{Now: clk.Now})
	ctx := t.Context()
	a, err := r.Add(ctx, Spec{ID: "d", URL: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	s.set(func(s *cardServer) { s.card = card("Drifty", `"streaming":true,"pauseResume":true`) })
	b, err := r.Refresh(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if b.Digest == a.Digest || len(b.Drift) != 1 {
		t.Fatalf("drift = %+v", b.Drift)
	}
	d := b.Drift[0]
	type drift struct {
		Added, Removed []string
		Violations     int
	}
	want := drift{Added: []string{capability.PauseResume}, Removed: []string{capability.PushNotifications}, Violations: 1}
	if diff := cmp.Diff(want, drift{d.Added, d.Removed, len(d.Violations)}); diff != "" {
		t.Errorf("drift (-want +got):\n%s", diff)
	}
	if !b.DriftedSince(clk.Now().Add(-time.Hour)) || b.DriftedSince(clk.Now().Add(time.Second)) {
		t.Error("DriftedSince disagrees with the drift record")
	}
	if len(r.ByCapability(capability.PushNotifications)) != 0 || len(r.ByCapability(capability.PauseResume)) != 1 {
		t.Error("indexes not updated after drift")
	}
	// A cosmetic change moves the digest but records no drift.
	s.set(func(s *cardServer) { s.card = strings.Replace(s.card, "test agent", "a test agent", 1) })
	c, err := r.Refresh(ctx, "d")
	if err != nil {
		t.Fatal(err)
	}
	if c.Digest == b.Digest || len(c.Drift) != 1 {
		t.Errorf("cosmetic change: digest moved %v, drift records %d", c.Digest != b.Digest, len(c.Drift))
	}
}

func TestRegistry_DriftHistoryIsBounded(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("H", ""))
	r := newTestRegistry(t, Config{DriftHistory: 2})
	if _, err := r.Add(t.Context(), Spec{ID: "h", URL: s.URL}); err != nil {
		t.Fatal(err)
	}
	caps := []string{`"streaming":true`, `"pushNotifications":true`, `"pauseResume":true`}
	var a *Agent
	for _, c := range caps {
		s.set(func(s *cardServer) { s.card = card("H", c) })
		var err error
		if a, err = r.Refresh(t.Context(), "h"); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.Drift) != 2 || !slices.Contains(a.Drift[1].Added, capability.PauseResume) {
		t.Errorf("drift history = %+v", a.Drift)
	}
}

func TestRegistry_UnhealthyAfterFailuresKeepsLastGoodCard(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("Flaky", `"streaming":true`))
	r := newTestRegistry(t, Config{UnhealthyAfter: 2})
	ctx := t.Context()
	if _, err := r.Add(ctx, Spec{ID: "f", URL: s.URL}); err != nil {
		t.Fatal(err)
	}
	s.set(func(s *cardServer) { s.status = http.StatusInternalServerError })
	// health is what each refresh must leave.
	type health struct {
		Healthy  bool
		Failures int
		Profile  bool
	}
	a, err := r.Refresh(ctx, "f")
	if err == nil {
		t.Fatal("refresh against a 500 worked")
	}
	if diff := cmp.Diff(health{true, 1, true}, health{a.Healthy, a.Failures, a.Profile != nil}); diff != "" {
		t.Fatalf("after one failure (-want +got):\n%s", diff)
	}
	a, err = r.Refresh(ctx, "f")
	if err == nil {
		t.Fatal("second refresh against a 500 worked")
	}
	if diff := cmp.Diff(health{false, 2, true}, health{a.Healthy, a.Failures, a.Profile != nil}); diff != "" {
		t.Fatalf("after two failures (-want +got):\n%s", diff)
	}
	if !strings.Contains(a.LastError, "HTTP 500") {
		t.Fatalf("after two failures: last error %q, want the HTTP 500", a.LastError)
	}
	if got, _ := r.Get("f"); !got.Supports(capability.Streaming) || got.Healthy {
		t.Error("unhealthy agent lost its last good profile or its health flag")
	}
	s.set(func(s *cardServer) { s.status = http.StatusOK })
	a, err = r.Refresh(ctx, "f")
	if err != nil {
		t.Fatalf("after recovery: %v", err)
	}
	if diff := cmp.Diff(health{true, 0, true}, health{a.Healthy, a.Failures, a.Profile != nil}); diff != "" {
		t.Errorf("after recovery (-want +got):\n%s", diff)
	}
	if a.LastError != "" {
		t.Errorf("after recovery: last error %q, want none", a.LastError)
	}
}

func TestRegistry_BackgroundRefresh(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("Live", ""))
	s.set(func(s *cardServer) { s.cacheControl = "max-age=0" })
	r := newTestRegistry(t, Config{RefreshInterval: 10 * time.Millisecond, MinRefreshInterval: 10 * time.Millisecond})
	r.Start()
	if _, err := r.Add(t.Context(), Spec{ID: "live", URL: s.URL}); err != nil {
		t.Fatal(err)
	}
	s.set(func(s *cardServer) { s.card = card("Live", `"streaming":true`) })
	testwait.Until(t, 10*time.Second, "the refresher to pick up the new card", func() bool {
		a, _ := r.Get("live")
		return a.Supports(capability.Streaming)
	})
	testwait.Until(t, 10*time.Second, "conditional revalidations", func() bool { return s.conditional.Load() > 0 })
}

func TestRegistry_AddOrRetryKeepsPendingAgents(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("Late", ""))
	s.set(func(s *cardServer) { s.status = http.StatusServiceUnavailable })
	r := newTestRegistry(t, Config{RefreshInterval: 10 * time.Millisecond, MinBackoff: 10 * time.Millisecond})
	if _, err := r.AddOrRetry(t.Context(), Spec{URL: s.URL}); err == nil {
		t.Fatal("AddOrRetry succeeded against a 503")
	}
	p := r.Pending()
	if len(p) != 1 {
		t.Fatalf("Pending = %+v, want the agent", p)
	}
	if p[0].URL != s.URL || !strings.Contains(p[0].LastError, "503") {
		t.Fatalf("pending agent at %s, last error %q; want %s and the 503", p[0].URL, p[0].LastError, s.URL)
	}
	r.Start()
	testwait.Until(t, 10*time.Second, "more retries", func() bool { return s.requests.Load() >= 3 })
	s.set(func(s *cardServer) { s.status = http.StatusOK })
	testwait.Until(t, 10*time.Second, "the pending agent to register", func() bool { _, ok := r.Get("late"); return ok })
	if len(r.Pending()) != 0 {
		t.Errorf("Pending after registration = %+v", r.Pending())
	}
}

func TestRegistry_Closed(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("C", ""))
	r := newTestRegistry(t, Config{})
	if _, err := r.Add(t.Context(), Spec{ID: "c", URL: s.URL}); err != nil {
		t.Fatal(err)
	}
	r.Start()
	r.Close()
	if _, err := r.Add(t.Context(), Spec{URL: s.URL + "/x"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Add after Close: err = %v", err)
	}
	if _, ok := r.Get("c"); !ok {
		t.Error("lookups must keep working after Close")
	}
}
