package store

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/internal/natstest"
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
