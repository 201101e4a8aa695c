package store

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/internal/natstest"
	"github.com/orchd/orchd/internal/testagent"
)

// TestRelay_CancelFollowsTheDelegationFromASilentOwner passes a cancel to
// the replica holding a delegation just as that replica falls silent,
// its connection still open on the server, as a replica killed before
// the servers notice: the request reaches it and no "no responders"
// comes back. Once another replica takes the delegation over, the cancel
// goes there, rather than wait out the relay's timeout (41 s here).
func TestRelay_CancelFollowsTheDelegationFromASilentOwner(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for the silent replica's key to age out")
	}
	t.Parallel()
	const ttl = 2 * time.Second
	node := natstest.NewNode(t)
	proxy := newCutProxy(t, node.URL()[len("nats://"):])
	f := newFleetOn(t, ttl, node.URL())
	owner := f.replicaVia(t, "owner", proxy.URL(), nil)
	f.replica(t, "taker", nil)
	asker := f.replica(t, "asker", nil)
	id := owner.delegate(t, 1)[0]

	proxy.setHung(true)
	silent := time.Now()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	rec, err := asker.engine.Cancel(ctx, id)
	took := time.Since(silent)
	if err != nil {
		t.Fatalf("cancel through another replica, %s after the owner fell silent: %v", took.Round(time.Millisecond), err)
	}
	t.Logf("canceled %s after the owner fell silent (TTL %s)", took.Round(time.Millisecond), ttl)
	if rec.State != a2a.TaskStateCanceled {
		t.Errorf("the delegation is %s (%q), want CANCELED", rec.State, rec.Error)
	}
}

// TestRelay_SlowOpAtALiveOwnerAnswered passes a cancel to the replica
// holding a delegation, whose agent refuses the first six cancels (as an
// a2a-go agent refuses one meeting an execution that settles): the
// holder asks again for about 1.75 s, while the sender reads the holder
// every 500 ms and finds it unchanged. The sender waits for the answer
// rather than pass the cancel on again.
func TestRelay_SlowOpAtALiveOwnerAnswered(t *testing.T) {
	t.Parallel()
	f := newFleetWith(t, DefaultLeaseTTL, natstest.Listening(t).ClientURL(), testagent.Options{Name: "Worker", Skill: "work", RefuseCancels: 6})
	owner, asker := f.replica(t, "owner", nil), f.replica(t, "asker", nil)
	id := owner.delegate(t, 1)[0]

	start := time.Now()
	rec, err := asker.engine.Cancel(t.Context(), id)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("cancel through another replica: %v", err)
	}
	if rec.State != a2a.TaskStateCanceled {
		t.Errorf("the delegation is %s (%q), want CANCELED", rec.State, rec.Error)
	}
	if took < time.Second {
		t.Errorf("the cancel took %s; the agent's refusals should have held it over a second", took)
	}
	if n := f.agent.Cancels(); n != 7 {
		t.Errorf("the agent was asked to cancel %d times, want 7: 6 refused, then 1, from the owner alone", n)
	}
}
