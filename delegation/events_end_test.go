package delegation

import (
	"context"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestEvents_EndFromTheLog: a delegation another process follows has
// ended when its log ends in a terminal event, even while the record read
// says otherwise (it is written after the log, and a store replica may
// answer with an older one), so a reader of its events is not left
// waiting for events that never come.
func TestEvents_EndFromTheLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		states []a2a.TaskState
		after  int64
		want   bool
	}{
		{"log ends completed, read from the start", []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted}, 0, true},
		{"log ends completed, read after its end", []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted}, 2, true},
		{"log ends working", []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking}, 0, false},
		{"log ends working, read after its end", []a2a.TaskState{a2a.TaskStateSubmitted, a2a.TaskStateWorking}, 2, false},
	} {
		store := NewMemoryStore(0)
		now := time.Now()
		// The record as last written: still WORKING, one event behind.
		if err := store.Put(ctx, Record{ID: "d", State: a2a.TaskStateWorking, LastEvent: 1, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
		for i, st := range tc.states {
			if err := store.Append(ctx, "d", Event{Seq: int64(i + 1), At: now, Kind: "state", State: st}); err != nil {
				t.Fatal(err)
			}
		}
		e := NewEngine(nil, nil, store, Config{}, nil)
		_, ended, err := e.Events(ctx, "d", tc.after, 0)
		e.Close()
		if err != nil || ended != tc.want {
			t.Errorf("%s: ended %v, %v; want %v", tc.name, ended, err, tc.want)
		}
	}
}
