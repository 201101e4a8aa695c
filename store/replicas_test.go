package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/natstest"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testengine"
	"github.com/orchd/orchd/registry"
)

// fleet is replicas of one orchd sharing a NATS server, each built as the
// daemon builds it in external mode (its own connection to the server,
// its own leases, relay and engine), and one a2a-go agent that does not
// stream and never finishes its tasks: the replicas poll it, once a
// minute, so following the work costs nothing in between.
type fleet struct {
	url   string
	ttl   time.Duration
	agent *testagent.Agent
	parts testengine.Parts
	// log, when set, is the log of the replicas started from then on.
	log *slog.Logger
}

func newFleet(t testing.TB, ttl time.Duration) *fleet {
	t.Helper()
	return newFleetOn(t, ttl, natstest.Listening(t).ClientURL())
}

// newFleetOn is newFleet on the NATS server at url.
func newFleetOn(t testing.TB, ttl time.Duration, url string) *fleet {
	t.Helper()
	return newFleetWith(t, ttl, url, testagent.Options{Name: "Worker", Skill: "work"})
}

// newFleetWith is newFleetOn with an agent made as opts say; its skill
// must be "work".
func newFleetWith(t testing.TB, ttl time.Duration, url string, opts testagent.Options) *fleet {
	t.Helper()
	f := &fleet{url: url, ttl: ttl}
	f.agent = testagent.Start(t, opts, testagent.Hang())
	f.parts = testengine.New(t, registry.Spec{ID: "worker", URL: f.agent.URL})
	return f
}

// replica is one process of a fleet.
type replica struct {
	name   string
	st     *Store
	dels   *Delegations
	leases delegation.Leases
	engine *delegation.Engine
	// running counts the engine's calls of Store.Running.
	running *atomic.Int64
	once    sync.Once
}

// countingStore is the real delegation store, counting Running calls.
type countingStore struct {
	*Delegations
	running *atomic.Int64
}

func (c countingStore) Running(ctx context.Context) ([]string, error) {
	c.running.Add(1)
	return c.Delegations.Running(ctx)
}

// replica starts a replica named name and carries on the running
// delegations it may own (Engine.Start). wrap, when set, wraps its leases.
func (f *fleet) replica(t testing.TB, name string, wrap func(delegation.Leases) delegation.Leases) *replica {
	t.Helper()
	return f.replicaVia(t, name, f.url, wrap)
}

// replicaVia is replica, connected to the fleet's server through url.
func (f *fleet) replicaVia(t testing.TB, name, url string, wrap func(delegation.Leases) delegation.Leases) *replica {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	st, err := Open(ctx, "", Config{URL: url}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, st: st, running: new(atomic.Int64)}
	t.Cleanup(r.kill)
	if r.dels, err = st.Delegations(ctx, DelegationsConfig{}); err != nil {
		t.Fatal(err)
	}
	leases, err := st.Leases(ctx, LeasesConfig{TTL: f.ttl})
	if err != nil {
		t.Fatal(err)
	}
	r.leases = leases
	if wrap != nil {
		r.leases = wrap(leases)
	}
	r.engine = delegation.NewEngine(f.parts.Registry, f.parts.Policies, countingStore{r.dels, r.running}, delegation.Config{
		Self: "a", Instance: name, Leases: r.leases, Relay: st.Relay(),
		HTTPClient: f.parts.HTTPClient, PollInterval: time.Minute,
	}, f.log)
	if err := r.engine.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return r
}

// kill stops the replica as kill -9 would, as far as the others can
// tell: its connection to NATS closes first, so it gives nothing up.
func (r *replica) kill() {
	r.once.Do(func() {
		_ = r.st.Close()
		r.engine.Close()
	})
}

// delegate starts n delegations on the replica, 16 at a time, and returns
// their ids.
func (r *replica) delegate(t testing.TB, n int) []string {
	t.Helper()
	ids := make([]string, n)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := atomic.Int64{}
	for range 16 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				d, err := r.engine.Delegate(context.Background(), delegation.Request{Skill: "work", Text: "wait"})
				if err != nil {
					errs <- err
					return
				}
				ids[i] = d.ID()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("delegate on %s: %v", r.name, err)
	}
	return ids
}

// followers returns, for each id, the names of the replicas following it
// now.
func followers(ids []string, rs ...*replica) map[string][]string {
	out := make(map[string][]string, len(ids))
	for _, id := range ids {
		out[id] = nil
		for _, r := range rs {
			if _, live := r.engine.Get(id); live {
				out[id] = append(out[id], r.name)
			}
		}
	}
	return out
}

// followedOnce reports nil once every id is followed by exactly one of
// rs, else how many are not.
func followedOnce(ids []string, rs ...*replica) error {
	none, twice := 0, 0
	var example string
	for id, names := range followers(ids, rs...) {
		switch len(names) {
		case 0:
			none++
			example = id
		case 1:
		default:
			twice++
			example = fmt.Sprintf("%s by %v", id, names)
		}
	}
	if none+twice > 0 {
		return fmt.Errorf("%d of %d delegations followed by nobody, %d by several (%s)", none, len(ids), twice, example)
	}
	return nil
}
