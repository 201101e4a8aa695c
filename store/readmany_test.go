package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testwait"
)

// TestDelegations_ReadMany checks that ReadMany reads what Get and Events
// read, over more delegations than one batched read names: the records,
// and the last event of each log that holds one; an unknown id, an id
// that cannot be a key, and a record that expired are left out.
func TestDelegations_ReadMany(t *testing.T) {
	t.Parallel()
	d := delegationsOf(t, openTest(t, "", Config{}), DelegationsConfig{})
	ctx := t.Context()
	ids := []string{"an id/with a slash", "never", ""}
	want := map[string]delegation.Read{}
	for i := range directBatch + 76 {
		id := fmt.Sprintf("d-%04d", i)
		if i == 0 {
			id = ids[0] // not a key as it is
		}
		ids = append(ids, id)
		r := delegation.Record{ID: id, State: a2a.TaskStateWorking, LastEvent: int64(i % 3)}
		var last *delegation.Event
		for seq := range r.LastEvent {
			ev := delegation.Event{Seq: seq + 1, At: time.Unix(int64(i), 0).UTC(), Kind: "state", State: a2a.TaskStateWorking}
			if err := d.Append(ctx, id, ev); err != nil {
				t.Fatal(err)
			}
			last = &ev
		}
		if err := d.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
		stored, err := d.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		want[id] = delegation.Read{Record: stored, Last: last}
	}
	got, err := d.ReadMany(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadMany (-want +got):\n%s", diff)
	}

	// A record that expired leaves a marker as its key's last message.
	short := delegationsOf(t, openTest(t, "", Config{}), DelegationsConfig{Retention: time.Second})
	if err := short.Put(ctx, delegation.Record{ID: "ended", State: a2a.TaskStateCompleted}); err != nil {
		t.Fatal(err)
	}
	if got, err := short.ReadMany(ctx, []string{"ended"}); err != nil || len(got) != 1 {
		t.Fatalf("ReadMany before the record expired = %v, %v; want it", got, err)
	}
	testwait.Succeeds(t, 10*time.Second, "the ended record expired", func() error {
		got, err := short.ReadMany(ctx, []string{"ended"})
		if err != nil || len(got) != 0 {
			return fmt.Errorf("ReadMany = %v, %v; want nothing", got, err)
		}
		return nil
	})
	if _, err := short.Get(ctx, "ended"); err == nil {
		t.Error("Get found the expired record that ReadMany did not")
	}
}
