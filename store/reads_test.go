package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/natstest"
)

// TestCluster_ReadsSeeAcknowledgedWrites checks that on a replicated
// store a process reads what it just wrote, through whichever node it is
// connected to: a lease it took has it as holder, a record it put is
// found, at once. Each node leads some streams and follows others, so
// every connection reads from followers too; with direct reads a follower
// that had not applied the write yet answered "not found".
func TestCluster_ReadsSeeAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	c := natstest.NewCluster(t, 3)
	const rounds = 100
	for i, srv := range c.Servers {
		s, err := Open(t.Context(), "", Config{URL: srv.ClientURL(), Replicas: 3}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		l := leasesOf(t, s, 10*time.Second)
		proc := join(t, l, fmt.Sprintf("proc-%d", i))
		d := delegationsOf(t, s, DelegationsConfig{})
		missed := 0
		for n := range rounds {
			id := fmt.Sprintf("n%d-%d", i, n)
			if _, err := proc.Take(t.Context(), id); err != nil {
				t.Fatalf("node %d: take %s: %v", i, id, err)
			}
			if h := holder(t, l, id); h != fmt.Sprintf("proc-%d", i) {
				missed++
			}
			r := delegation.Record{ID: id, State: a2a.TaskStateCompleted}
			if err := d.PutEnded(t.Context(), r, []delegation.Event{{Seq: 1, Kind: "state"}}); err != nil {
				t.Fatalf("node %d: put %s: %v", i, id, err)
			}
			if _, err := d.Get(t.Context(), id); err != nil {
				missed++
			}
		}
		if missed > 0 {
			t.Errorf("connected to node %d: %d of %d reads did not see the write just acknowledged", i, missed, 2*rounds)
		}
	}
}
