package store

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go/jetstream"
)

// TestReadInitial_WatcherClosedFirst closes a real watcher while it still
// delivers a bucket's keys, as nats.go does when its ordered consumer
// cannot be created again: the listing fails with errWatchClosed, which
// the store reads again, instead of ending short without an error, as
// nats.go's ListKeys does.
func TestReadInitial_WatcherClosedFirst(t *testing.T) {
	s := openTest(t, "", Config{})
	kv, err := s.js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "watch-test"})
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	for i := range n {
		if _, err := kv.Put(t.Context(), fmt.Sprintf("k.%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}

	w, err := kv.Watch(t.Context(), "k.>", jetstream.MetaOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer stopWatch(w, listDrainWait)
	read := 0
	err = readInitial(t.Context(), w, func(jetstream.KeyValueEntry) error {
		read++
		if read == 1 {
			if err := w.Stop(); err != nil {
				t.Errorf("Stop: %v", err)
			}
		}
		return nil
	})
	if !errors.Is(err, errWatchClosed) || !notProcessed(err) || !isUnavailable(err) {
		t.Errorf("readInitial of a watcher closed after %d of %d keys = %v, want errWatchClosed, retried, unavailable", read, n, err)
	}
	if read >= n {
		t.Errorf("read all %d keys before the close; the test proves nothing", read)
	}
}

// TestListKeys reads a bucket's keys from its stream: every key written,
// none outside the filter, and a deleted key too (its callers read each
// key).
func TestListKeys(t *testing.T) {
	s := openTest(t, "", Config{})
	kv, err := s.js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "list-test"})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 300 {
		key := fmt.Sprintf("k.%03d", i)
		want = append(want, key)
		if _, err := kv.Put(t.Context(), key, []byte("v")); err != nil {
			t.Fatal(err)
		}
		if _, err := kv.Put(t.Context(), fmt.Sprintf("other.%d", i), []byte("v")); err != nil {
			t.Fatal(err)
		}
	}
	if err := kv.Delete(t.Context(), "k.007"); err != nil {
		t.Fatal(err)
	}
	keys, err := listKeys(t.Context(), s.js, kv, "k.>")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("listKeys (-want +got):\n%s", diff)
	}
}
