package ownstack

import (
	"encoding/json"
	"runtime"
	"sync"
	"testing"
	"time"
)

// counts returns how many goroutines w started, ever, how many run, and
// how many of those wait.
func (w *Workers) counts() (started, running, idle int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.started, w.running, len(w.idle)
}

// settle waits until w runs want goroutines, all of them waiting, and
// fails the test if it does not within a few seconds.
func settle(t *testing.T, w *Workers, want int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, running, idle := w.counts()
		if running == want && idle == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines running, %d of them waiting; want %d waiting", running, idle, want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestWorkers_KeepsAGoroutine runs calls one after the other: each runs,
// and all run on the one goroutine kept after the first.
func TestWorkers_KeepsAGoroutine(t *testing.T) {
	w := NewWorkers(4)
	for i := range 100 {
		got := 0
		w.Run(func() { got = deep(10) })
		if got != 10 {
			t.Fatalf("call %d: after Run, f's result is %d, want 10", i, got)
		}
		settle(t, w, 1)
	}
	if started, _, _ := w.counts(); started != 1 {
		t.Errorf("100 calls one after the other started %d goroutines, want 1", started)
	}
	w.Close()
	if _, running, _ := w.counts(); running != 0 {
		t.Errorf("after Close, %d goroutines run, want 0", running)
	}
}

// TestWorkers_KeepsAtMostIdle runs calls at once, more than the workers
// keep: once they return, only as many goroutines as kept are left, and
// Close ends them.
func TestWorkers_KeepsAtMostIdle(t *testing.T) {
	const kept, calls = 3, 10
	w := NewWorkers(kept)
	release := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(calls)
	for range calls {
		done.Go(func() {
			w.Run(func() {
				started.Done()
				<-release
			})
		})
	}
	started.Wait()
	close(release)
	done.Wait()
	settle(t, w, kept)
	w.Close()
	if _, running, _ := w.counts(); running != 0 {
		t.Errorf("after Close, %d goroutines run, want 0", running)
	}
}

// TestWorkers_PanicReachesTheCaller checks that a panic in f is raised in
// Run's caller, with its value, and that the workers run the next call.
func TestWorkers_PanicReachesTheCaller(t *testing.T) {
	w := NewWorkers(1)
	defer w.Close()
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Errorf("recovered %v, want boom", p)
			}
		}()
		w.Run(func() { panic("boom") })
		t.Error("Run returned after f panicked")
	}()
	ran := false
	w.Run(func() { ran = true })
	if !ran {
		t.Error("the call after a panic did not run")
	}
}

// TestWorkers_RunAfterClose checks that a call after Close, or through
// nil workers, still runs, on a goroutine that ends with it.
func TestWorkers_RunAfterClose(t *testing.T) {
	w := NewWorkers(2)
	w.Run(func() {})
	w.Close()
	for _, ws := range []*Workers{w, nil} {
		ran := false
		ws.Run(func() { ran = true })
		if !ran {
			t.Errorf("workers %p: the call did not run", ws)
		}
	}
	if started, running, _ := w.counts(); started != 1 || running != 0 {
		t.Errorf("after Close, calls started %d goroutines in all and %d run; want 1 and 0", started, running)
	}
	var none *Workers
	none.Close()
}

// event is about what an agent's status update holds, decoded and encoded
// again as orchd does with each event it takes.
var event = []byte(`{"statusUpdate":{"taskId":"019af3b1-8f8a-7c3e-9c41-2b5f3d1e6a77",` +
	`"contextId":"019af3b1-8f8a-7c3e-9c41-2b5f3d1e6a78","status":{"state":"TASK_STATE_WORKING",` +
	`"message":{"messageId":"019af3b1-8f8a-7c3e-9c41-2b5f3d1e6a79","role":"ROLE_AGENT",` +
	`"parts":[{"text":"tick 3 sent at 2026-12-07T07:20:32.123456789Z"}]},` +
	`"timestamp":"2026-12-07T07:20:32.123456789Z"},"metadata":{"seq":3}}}`)

func roundTrip() {
	var v any
	if err := json.Unmarshal(event, &v); err != nil {
		panic(err)
	}
	if _, err := json.Marshal(v); err != nil {
		panic(err)
	}
}

// BenchmarkWorkers compares an event's decoding and encoding done
// directly, on a new goroutine each time (Run) and on kept goroutines
// (Workers), with a collection every 100 calls, which halves the kept
// goroutines' stacks.
//
//	go test ./internal/ownstack -run '^$' -bench Workers
func BenchmarkWorkers(b *testing.B) {
	w := NewWorkers(4)
	defer w.Close()
	for _, run := range []struct {
		name string
		call func(func())
	}{{"direct", func(f func()) { f() }}, {"run", Run}, {"workers", w.Run}} {
		b.Run(run.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				run.call(roundTrip)
				if i++; i%100 == 0 {
					runtime.GC()
				}
			}
		})
	}
}
