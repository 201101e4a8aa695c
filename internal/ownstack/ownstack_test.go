package ownstack

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// deep recurses n frames of about 1 KiB each and returns their count.
func deep(n int) int {
	var pad [1000]byte
	pad[n%len(pad)] = byte(n)
	if n == 0 {
		return int(pad[0])
	}
	return deep(n-1) + 1 + int(pad[n%len(pad)]) - int(byte(n))
}

// TestRun_RunsAndWaits checks that f has run when Run returns.
func TestRun_RunsAndWaits(t *testing.T) {
	got := 0
	Run(func() { got = deep(10) })
	if got != 10 {
		t.Errorf("after Run, f's result is %d, want 10", got)
	}
}

// TestRun_PanicReachesTheCaller checks that a panic in f is raised in
// Run's caller, with its value.
func TestRun_PanicReachesTheCaller(t *testing.T) {
	defer func() {
		if p := recover(); p != "boom" {
			t.Errorf("recovered %v, want boom", p)
		}
	}()
	Run(func() { panic("boom") })
	t.Error("Run returned after f panicked")
}

// TestRun_KeepsTheCallersStackSmall blocks goroutines after deep work,
// done directly or through Run, and compares the stack memory they hold,
// with collections (which could shrink the stacks) off.
func TestRun_KeepsTheCallersStackSmall(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	const n = 200
	held := func(viaRun bool) uint64 {
		release := make(chan struct{})
		ready := make(chan struct{}, n)
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		for range n {
			go func() {
				if viaRun {
					Run(func() { deep(30) })
				} else {
					deep(30)
				}
				ready <- struct{}{}
				<-release
			}()
		}
		for range n {
			<-ready
		}
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		close(release)
		return (after.StackInuse - min(after.StackInuse, before.StackInuse)) / n
	}
	run, direct := held(true), held(false)
	t.Logf("stack held per blocked goroutine: %d bytes after deep work done directly, %d through Run", direct, run)
	if run*4 > direct {
		t.Errorf("through Run a goroutine holds %d bytes of stack, directly %d: want under a quarter", run, direct)
	}
}
