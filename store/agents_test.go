package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/internal/natstest"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// agentCardServer is a real HTTP server on 127.0.0.1 serving one agent
// card with an ETag, answering a matching If-None-Match with 304. It can
// be stopped and served again on the same address, as a restarted agent.
type agentCardServer struct {
	mu          sync.Mutex
	srv         *httptest.Server
	card        string
	full        atomic.Int32 // 200 answers
	notModified atomic.Int32 // 304 answers
	ifNoneMatch atomic.Value // the last If-None-Match received
}

func newAgentCardServer(t *testing.T, card string) *agentCardServer {
	t.Helper()
	s := &agentCardServer{card: card}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.stop)
	return s
}

func (s *agentCardServer) URL() string { return s.srv.URL }

func (s *agentCardServer) setCard(card string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.card = card
}

func (s *agentCardServer) requests() int { return int(s.full.Load() + s.notModified.Load()) }

func (s *agentCardServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != registry.WellKnownPath {
		http.NotFound(w, r)
		return
	}
	s.mu.Lock()
	card := s.card
	s.mu.Unlock()
	sum := sha256.Sum256([]byte(card))
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	w.Header().Set("ETag", etag)
	inm := r.Header.Get("If-None-Match")
	s.ifNoneMatch.Store(inm)
	if inm == etag {
		s.notModified.Add(1)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	s.full.Add(1)
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, card)
}

// stop closes the server and every connection to it.
func (s *agentCardServer) stop() {
	s.srv.CloseClientConnections()
	s.srv.Close()
}

// restart serves again on the address the server had.
func (s *agentCardServer) restart(t *testing.T) {
	t.Helper()
	addr := s.srv.Listener.Addr().String()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("serve the card again on %s: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	s.srv = srv
}

// jsonString returns a JSON string of n bytes.
func jsonString(n int) []byte {
	return append(append([]byte(`"`), bytes.Repeat([]byte("x"), n-2)...), '"')
}

// agentCard returns a minimal A2A 1.0 card, indented and with characters
// JSON encoders like to escape, as served cards have.
func agentCard(name, capabilities string) string {
	return fmt.Sprintf(`{"name":%q,"version":"1.0.0","description":"test agent: <search> & summarize",
		"supportedInterfaces":[{"url":"http://127.0.0.1/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],
		"capabilities":{%s},
		"skills":[{"id":"research","name":"Research","tags":["search","summarize"]}]}`, name, capabilities)
}

// agentTestLog logs to stderr only with -v.
func agentTestLog() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return nil
}

func newAgentsStore(t *testing.T, js jetstream.JetStream, cfg AgentsConfig) *Agents {
	t.Helper()
	cfg.Log = agentTestLog()
	st, err := NewAgents(t.Context(), js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// newStoredRegistry returns a registry on st allowed to reach loopback,
// loaded from st and started, and closed when the test ends.
func newStoredRegistry(t *testing.T, st registry.AgentStore, cfg registry.Config) *registry.Registry {
	t.Helper()
	cfg.AllowNetworks = []string{"127.0.0.0/8"}
	cfg.Store = st
	r, err := registry.New(cfg, agentTestLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	if err := r.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	r.Start()
	return r
}

// agentState is what must survive a restart of an agent, as JSON.
func agentState(t *testing.T, a *registry.Agent) string {
	t.Helper()
	b, err := json.Marshal(struct {
		Profile *capability.Profile
		Drift   []registry.DriftRecord
		ETag    string
	}{a.Profile, a.Drift, a.ETag})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAgents_RestartServesFromTheStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	ns := natstest.Server(t, dir)
	st := newAgentsStore(t, natstest.JetStream(t, ns), AgentsConfig{})

	api := newAgentCardServer(t, agentCard("Research Agent", `"streaming":true`))
	conf := newAgentCardServer(t, agentCard("Configured", ""))
	r1 := newStoredRegistry(t, st, registry.Config{})
	const id = "research.agent_v1-x" // '.', '_' and '-' in a stored key
	if _, err := r1.Add(ctx, registry.Spec{ID: id, URL: api.URL()}); err != nil {
		t.Fatal(err)
	}
	if _, err := r1.AddOrRetry(ctx, registry.Spec{URL: conf.URL()}); err != nil {
		t.Fatal(err)
	}
	// A drift, so there is a history to keep.
	api.setCard(agentCard("Research Agent", `"streaming":true,"pushNotifications":true`))
	before, err := r1.Refresh(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Drift) != 1 || !before.Supports(capability.PushNotifications) {
		t.Fatalf("after the card changed: drift %+v", before.Drift)
	}
	configured, _ := r1.Get("configured")
	want := map[string]string{id: agentState(t, before), "configured": agentState(t, configured)}
	r1.Close()
	api.stop()
	conf.stop()
	served := api.requests() + conf.requests()

	check := func(name string, r *registry.Registry) {
		t.Helper()
		// The configured agent is the one in the store: no fetch, no error,
		// although its card server is down.
		a, err := r.AddOrRetry(ctx, registry.Spec{URL: conf.URL()})
		if err != nil {
			t.Fatalf("%s: AddOrRetry of the configured agent: %v; want it served from the store", name, err)
		}
		if a == nil || a.ID != "configured" {
			t.Fatalf("%s: AddOrRetry of the configured agent = %+v; want it served from the store", name, a)
		}
		if r.Len() != 2 || len(r.Pending()) != 0 {
			t.Fatalf("%s: %d agents, pending %+v; want 2 and none", name, r.Len(), r.Pending())
		}
		for id, w := range want {
			a, ok := r.Get(id)
			if !ok {
				t.Fatalf("%s: agent %s is gone", name, id)
			}
			if got := agentState(t, a); got != w {
				t.Errorf("%s: agent %s\n got  %s\n want %s", name, id, got, w)
			}
			if !a.Healthy || a.Failures != 0 || a.LastError != "" {
				t.Errorf("%s: agent %s healthy %v, failures %d, %q: something fetched it", name, id, a.Healthy, a.Failures, a.LastError)
			}
		}
		if got := r.BySkill("summarize"); len(got) != 2 {
			t.Errorf("%s: BySkill found %d agents, want 2", name, len(got))
		}
		if got := r.ByCapability(capability.PushNotifications); len(got) != 1 || got[0].ID != id {
			t.Errorf("%s: ByCapability(pushNotifications) = %v", name, got)
		}
	}
	r2 := newStoredRegistry(t, st, registry.Config{})
	check("new registry", r2)
	r2.Close()

	ns.Shutdown()
	ns.WaitForShutdown()
	st = newAgentsStore(t, natstest.JetStream(t, natstest.Server(t, dir)), AgentsConfig{})
	r3 := newStoredRegistry(t, st, registry.Config{})
	check("restarted nats server", r3)
	if got := api.requests() + conf.requests(); got != served {
		t.Fatalf("card requests went from %d to %d across the restarts", served, got)
	}

	// The saved validators make the next revalidation conditional.
	api.restart(t)
	full := api.full.Load()
	a, err := r3.Refresh(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if got := api.ifNoneMatch.Load(); got != before.ETag || api.notModified.Load() != 1 || api.full.Load() != full {
		t.Errorf("refresh sent If-None-Match %q (want %q); answers: %d 304, %d new 200", got, before.ETag, api.notModified.Load(), api.full.Load()-full)
	}
	if got := agentState(t, a); got != want[id] || !a.FetchedAt.After(before.FetchedAt) {
		t.Errorf("after a 304 the agent changed or was not revalidated:\n got  %s\n want %s", got, want[id])
	}
}

func TestAgents_ReplicasShareAgents(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ns := natstest.Server(t, "")
	// Two processes: each its own connection and registry on one bucket.
	r1 := newStoredRegistry(t, newAgentsStore(t, natstest.JetStream(t, ns), AgentsConfig{}), registry.Config{})
	r2 := newStoredRegistry(t, newAgentsStore(t, natstest.JetStream(t, ns), AgentsConfig{}), registry.Config{})
	one := newAgentCardServer(t, agentCard("One", `"streaming":true`))
	two := newAgentCardServer(t, agentCard("Two", ""))

	g1, g2 := r1.Generation(), r2.Generation()
	a, err := r1.Add(ctx, registry.Spec{URL: one.URL()})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testwait.Until(t, 10*time.Second, "the agent on the other replica", func() bool { _, ok := r2.Get("one"); return ok })
	t.Logf("an agent added on one replica was usable on the other after %s", time.Since(start))
	b, _ := r2.Get("one")
	if b.Digest != a.Digest || !b.Supports(capability.Streaming) || len(r2.ByCapability(capability.Streaming)) != 1 {
		t.Errorf("on the other replica: digest %s (want %s), streaming %v", b.Digest, a.Digest, b.Supports(capability.Streaming))
	}
	if r2.Generation() == g2 {
		t.Error("the other replica's generation did not move")
	}
	if n := one.requests(); n != 1 {
		t.Errorf("the card was fetched %d times; the other replica must take it from the store", n)
	}

	// The other way round; r1 sees it only after its own echo (the watch
	// is in order), which must not have moved its generation.
	if _, err := r2.Add(ctx, registry.Spec{ID: "two", URL: two.URL()}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "the second agent on the first replica", func() bool { _, ok := r1.Get("two"); return ok })
	if got := r1.Generation(); got != g1+2 {
		t.Errorf("first replica's generation moved by %d, want 2 (its own add and the other's)", got-g1)
	}
	if _, err := r2.Add(ctx, registry.Spec{ID: "one", URL: two.URL() + "/x"}); !errors.Is(err, registry.ErrConflict) {
		t.Errorf("adding a taken id on the other replica: err = %v, want ErrConflict", err)
	}

	if err := r1.Remove("one"); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	testwait.Until(t, 10*time.Second, "the removal on the other replica", func() bool { _, ok := r2.Get("one"); return !ok })
	t.Logf("a removal on one replica was seen on the other after %s", time.Since(start))
	if len(r2.ByCapability(capability.Streaming)) != 0 || r2.Len() != 1 {
		t.Errorf("after the removal the other replica has %d agents, %d streaming", r2.Len(), len(r2.ByCapability(capability.Streaming)))
	}
	// Adding the URL again works everywhere.
	if _, err := r2.Add(ctx, registry.Spec{ID: "one", URL: one.URL()}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "the agent added again", func() bool { _, ok := r1.Get("one"); return ok })
}

func TestAgents_AddFailsWhileTheStoreIsDown(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out timeouts of a stopped server")
	}
	t.Parallel()
	ctx := t.Context()
	ns := natstest.Server(t, "")
	const timeout = time.Second
	r := newStoredRegistry(t, newAgentsStore(t, natstest.JetStream(t, ns), AgentsConfig{}), registry.Config{StoreTimeout: timeout})
	kept := newAgentCardServer(t, agentCard("Kept", ""))
	if _, err := r.Add(ctx, registry.Spec{URL: kept.URL()}); err != nil {
		t.Fatal(err)
	}
	ns.Shutdown()
	ns.WaitForShutdown()

	s := newAgentCardServer(t, agentCard("Lost", ""))
	g := r.Generation()
	start := time.Now()
	a, err := r.Add(ctx, registry.Spec{URL: s.URL()})
	took := time.Since(start)
	if !errors.Is(err, registry.ErrUnavailable) || a != nil {
		t.Fatalf("Add with the store down = %v, %v; want an error wrapping ErrUnavailable", a, err)
	}
	if took > timeout+2*time.Second {
		t.Errorf("Add took %s with StoreTimeout %s", took, timeout)
	}
	t.Logf("Add failed after %s: %v", took, err)
	if _, ok := r.Get("lost"); ok || r.Len() != 1 {
		t.Errorf("a failed Add registered something: %d agents", r.Len())
	}
	if r.Generation() != g {
		t.Errorf("a failed Add moved the generation from %d to %d", g, r.Generation())
	}
	if err := r.Remove("kept"); !errors.Is(err, registry.ErrUnavailable) {
		t.Errorf("Remove with the store down: err = %v, want ErrUnavailable", err)
	}
	if _, ok := r.Get("kept"); !ok {
		t.Error("a Remove that could not delete from the store unregistered the agent")
	}
	start = time.Now()
	r.Close()
	if took := time.Since(start); took > time.Second {
		t.Errorf("Close took %s with the store down", took)
	}
}

func TestAgents_WatchCarriesOnAfterTheStoreRestarts(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	opts := &server.Options{ServerName: "agents", Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: t.TempDir(),
		NoSigs: true, NoLog: true, JetStreamMaxStore: 1 << 30, JetStreamMaxMemory: 64 << 20}
	serve := func() *server.Server {
		s, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		if !s.ReadyForConnections(10 * time.Second) {
			t.Fatal("nats server not ready within 10s")
		}
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		return s
	}
	connect := func() jetstream.JetStream {
		nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", port), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return js
	}
	ns := serve()
	watching := newStoredRegistry(t, newAgentsStore(t, connect(), AgentsConfig{}), registry.Config{MinBackoff: 20 * time.Millisecond})
	adding := newStoredRegistry(t, newAgentsStore(t, connect(), AgentsConfig{}), registry.Config{})
	before := newAgentCardServer(t, agentCard("Before", ""))
	if _, err := adding.Add(ctx, registry.Spec{URL: before.URL()}); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "the first agent", func() bool { _, ok := watching.Get("before"); return ok })

	ns.Shutdown()
	ns.WaitForShutdown()
	serve()
	after := newAgentCardServer(t, agentCard("After", ""))
	testwait.Until(t, 10*time.Second, "an add once the store is back", func() bool {
		_, err := adding.Add(ctx, registry.Spec{URL: after.URL()})
		return err == nil || errors.Is(err, registry.ErrConflict)
	})
	start := time.Now()
	testwait.Until(t, 10*time.Second, "the agent added after the restart", func() bool { _, ok := watching.Get("after"); return ok })
	t.Logf("after the store restarted, an agent added was seen on the other process after %s", time.Since(start))
	if err := adding.Remove("before"); err != nil {
		t.Fatal(err)
	}
	testwait.Until(t, 10*time.Second, "the removal after the restart", func() bool { _, ok := watching.Get("before"); return !ok })
}

func TestAgents_UnbuildableCardIsFetchedAgain(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := newAgentsStore(t, natstest.JetStream(t, natstest.Server(t, "")), AgentsConfig{})
	s := newAgentCardServer(t, agentCard("Fixed", ""))
	drift := []registry.DriftRecord{{At: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Drift: capability.Drift{From: "sha256:a", To: "sha256:b", Added: []string{"streaming"}}}}
	if _, err := st.Save(ctx, registry.SavedAgent{Format: registry.SavedFormat, ID: "old.card", URL: s.URL(),
		CardURL: s.URL() + registry.WellKnownPath, Card: []byte(`{"name": 42}`), Drift: drift}); err != nil {
		t.Fatal(err)
	}

	r := newStoredRegistry(t, st, registry.Config{RefreshInterval: 10 * time.Millisecond})
	testwait.Until(t, 10*time.Second, "the agent fetched again", func() bool { _, ok := r.Get("old.card"); return ok })
	a, _ := r.Get("old.card")
	if a.Name != "Fixed" || len(a.Drift) != 1 || a.Drift[0].To != "sha256:b" {
		t.Errorf("re-fetched agent: name %q, drift %+v; want the new card and the saved history", a.Name, a.Drift)
	}
	saved, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(saved) != 1 {
		t.Fatalf("stored after the fetch: %d agents, want 1", len(saved))
	}
	if saved[0].Digest != a.Digest || saved[0].ETag == "" {
		t.Errorf("stored after the fetch: digest %s (want %s), etag %q (want one)", saved[0].Digest, a.Digest, saved[0].ETag)
	}
}

func TestAgents_SaveLoadWatch(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	st := newAgentsStore(t, natstest.JetStream(t, natstest.Server(t, "")), AgentsConfig{MaxValueBytes: 4096})
	saved := func(id string) registry.SavedAgent {
		return registry.SavedAgent{Format: registry.SavedFormat, ID: id, URL: "https://" + strings.ToLower(id) + ".example.com", Card: []byte(`{}`)}
	}
	rev1, err := st.Save(ctx, saved("a.b"))
	if err != nil {
		t.Fatal(err)
	}
	errs := []struct {
		name string
		sa   registry.SavedAgent
		want error
	}{
		{"create over a stored agent", saved("a.b"), registry.ErrStale},
		{"update at a wrong revision", func() registry.SavedAgent { s := saved("a.b"); s.Revision = rev1 + 7; return s }(), registry.ErrStale},
		{"update of an agent not stored", func() registry.SavedAgent { s := saved("none"); s.Revision = rev1; return s }(), registry.ErrStale},
		{"invalid id", saved("a*b"), registry.ErrInvalidID},
		{"too large", func() registry.SavedAgent { s := saved("big"); s.Card = jsonString(8192); return s }(), registry.ErrCardTooLarge},
	}
	for _, tt := range errs {
		if _, err := st.Save(ctx, tt.sa); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	// The server's max_payload (1 MiB by default) bounds a value too.
	big := newAgentsStore(t, st.js, AgentsConfig{Bucket: "big"})
	fits, over := saved("fits"), saved("over")
	fits.Card, over.Card = jsonString(1000<<10), jsonString(1<<20)
	if _, err := big.Save(ctx, fits); err != nil {
		t.Errorf("a 1000 KiB card: %v", err)
	}
	if _, err := big.Save(ctx, over); !errors.Is(err, registry.ErrCardTooLarge) || !strings.Contains(err.Error(), "limit of 1044480") {
		t.Errorf("a 1 MiB card with a 1 MiB max_payload: err = %v, want ErrCardTooLarge", err)
	}

	up := saved("a.b")
	up.Revision, up.ETag = rev1, `"v2"`
	rev2, err := st.Save(ctx, up)
	if err != nil || rev2 <= rev1 {
		t.Fatalf("update: rev %d, %v", rev2, err)
	}

	type change struct {
		id      string
		rev     uint64
		removed bool
	}
	changes := make(chan change, 16)
	watchCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- st.Watch(watchCtx, rev2, func(a registry.SavedAgent, removed bool) { changes <- change{a.ID, a.Revision, removed} })
	}()
	rev3, err := st.Save(ctx, saved("c_d-e"))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "a.b"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []change{{"c_d-e", rev3, false}, {"a.b", rev3 + 1, true}} {
		select {
		case got := <-changes:
			if got != want {
				t.Errorf("watch: got %+v, want %+v", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("watch: no change within 5s, want %+v", want)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Watch after its context ended: %v", err)
	}
	select {
	case got := <-changes:
		t.Errorf("watch delivered %+v, which is at or before the revision it was given", got)
	default:
	}

	all, err := st.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type kept struct {
		ID       string
		Revision uint64
		Card     string
	}
	var got []kept
	for _, a := range all {
		got = append(got, kept{a.ID, a.Revision, string(a.Card)})
	}
	if diff := cmp.Diff([]kept{{"c_d-e", rev3, `{}`}}, got); diff != "" {
		t.Errorf("Load (-want +got):\n%s", diff)
	}
	// A deleted id can be stored again from scratch.
	if _, err := st.Save(ctx, saved("a.b")); err != nil {
		t.Errorf("save after delete: %v", err)
	}
}

func TestAgents_KeysRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id, key string
	}{
		{"a", "a.a"},
		{"research.agent", "a.research=agent"},
		{"x_y-z", "a.x_y-z"},
		{"a..b.", "a.a==b="},
		{"v1.2.3-rc_1", "a.v1=2=3-rc_1"},
		{strings.Repeat("z", 64), "a." + strings.Repeat("z", 64)},
	}
	for _, tt := range tests {
		key := agentKey(tt.id)
		if key != tt.key {
			t.Errorf("agentKey(%q) = %q, want %q", tt.id, key, tt.key)
		}
		if id, ok := agentIDFromKey(key); !ok || id != tt.id {
			t.Errorf("agentIDFromKey(%q) = %q, %v; want %q", key, id, ok, tt.id)
		}
	}
	for _, key := range []string{"b.x", "a.", "a.x.y", "a.=x", "a.-x", "a." + strings.Repeat("z", 65), "x"} {
		if id, ok := agentIDFromKey(key); ok {
			t.Errorf("agentIDFromKey(%q) = %q; want no id", key, id)
		}
	}
}
