package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/natstest"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
)

// containWatch records what WatchContainments delivers.
type containWatch struct {
	mu    sync.Mutex
	held  map[string]registry.Containment
	ready bool
}

func (w *containWatch) fn(id string, c *registry.Containment) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if c == nil {
		delete(w.held, id)
		return
	}
	w.held[id] = *c
}

func (w *containWatch) snapshot() (map[string]registry.Containment, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]registry.Containment, len(w.held))
	for k, v := range w.held {
		out[k] = v
	}
	return out, w.ready
}

// watchContainments runs WatchContainments on st until the test ends.
func watchContainments(t *testing.T, st *Agents) *containWatch {
	t.Helper()
	w := &containWatch{held: map[string]registry.Containment{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- st.WatchContainments(ctx, w.fn, func() {
			w.mu.Lock()
			w.ready = true
			w.mu.Unlock()
		})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WatchContainments: %v", err)
		}
	})
	return w
}

// TestContainments_ReplicasAndRestarts checks that a containment is kept
// once (a second is answered with the first), seen by another process's
// watch within a second, released once, and still kept after the server
// restarts on the same directory.
func TestContainments_ReplicasAndRestarts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ns := natstest.Server(t, dir)
	one := newAgentsStore(t, natstest.JetStream(t, ns), AgentsConfig{})
	two := newAgentsStore(t, natstest.JetStream(t, ns), AgentsConfig{})
	w := watchContainments(t, two)
	testwait.Until(t, 5*time.Second, "the watch to read what is kept", func() bool { _, ready := w.snapshot(); return ready })

	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	c := registry.Containment{Agent: "a.b", Reason: "leaks data", By: "ops", At: at, Cancel: true}
	got, created, err := one.Contain(t.Context(), c)
	if err != nil || !created || got != c {
		t.Fatalf("Contain = %+v, %v, %v; want it kept", got, created, err)
	}
	kept := time.Now()
	again := c
	again.Reason, again.By = "other", "someone"
	if got, created, err := two.Contain(t.Context(), again); err != nil || created || got != c {
		t.Errorf("Contain again = %+v, %v, %v; want the first, not created", got, created, err)
	}
	testwait.Until(t, 5*time.Second, "the other process to see the containment", func() bool {
		held, _ := w.snapshot()
		return held["a.b"] == c
	})
	if took := time.Since(kept); took > time.Second {
		t.Errorf("the other process saw the containment after %s, want within a second", took)
	}

	if _, released, err := one.Release(t.Context(), "nobody"); err != nil || released {
		t.Errorf("Release of an agent not contained = %v, %v; want nothing released", released, err)
	}
	if got, released, err := one.Release(t.Context(), "a.b"); err != nil || !released || got != c {
		t.Errorf("Release = %+v, %v, %v; want the containment", got, released, err)
	}
	testwait.Until(t, 5*time.Second, "the other process to see the release", func() bool {
		held, _ := w.snapshot()
		return len(held) == 0
	})
	if _, created, err := one.Contain(t.Context(), c); err != nil || !created {
		t.Fatalf("Contain after the release = %v, %v", created, err)
	}

	ns.Shutdown()
	ns.WaitForShutdown()
	after := newAgentsStore(t, natstest.JetStream(t, natstest.Server(t, dir)), AgentsConfig{})
	w = watchContainments(t, after)
	testwait.Until(t, 5*time.Second, "the restarted store's containments", func() bool { _, ready := w.snapshot(); return ready })
	held, _ := w.snapshot()
	if diff := cmp.Diff(map[string]registry.Containment{"a.b": c}, held); diff != "" {
		t.Errorf("containments after a restart (-want +got):\n%s", diff)
	}
}
