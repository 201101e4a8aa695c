package ownstack

import "sync"

// Workers runs deep work as Run does, on goroutines it keeps between
// calls. A new goroutine's stack starts small and is copied each time the
// work makes it double: for an agent's event, decoded and stored, the
// copies cost more than the new goroutine itself (BenchmarkWorkers). A
// kept goroutine waits with its grown stack, which the runtime halves at
// each garbage collection while it waits, so a busy process pays the
// growth about once per collection and worker rather than once per call.
//
// A nil *Workers runs each call on a goroutine of its own, as Run does.
type Workers struct {
	max int // most goroutines kept waiting

	mu      sync.Mutex
	idle    []chan func() // each waiting goroutine's queue of one
	closed  bool
	started int            // goroutines started, ever
	running int            // goroutines started and not ended
	wg      sync.WaitGroup // the goroutines started
}

// NewWorkers returns workers that keep at most idle goroutines waiting
// between calls; a goroutine finding idle others waiting ends.
func NewWorkers(idle int) *Workers {
	return &Workers{max: idle}
}

// Run calls f on a waiting goroutine, or a new one, and waits for it to
// return. A panic in f is raised again in the caller, as if the caller
// had called f itself. After Close it runs f on a goroutine that ends
// with it.
func (w *Workers) Run(f func()) {
	if w == nil {
		Run(f)
		return
	}
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		Run(f)
		return
	}
	done := make(chan any, 1)
	call := func() {
		defer func() { done <- recover() }()
		f()
	}
	if n := len(w.idle); n > 0 {
		q := w.idle[n-1]
		w.idle = w.idle[:n-1]
		w.mu.Unlock()
		q <- call
	} else {
		w.wg.Add(1)
		w.started++
		w.running++
		w.mu.Unlock()
		q := make(chan func(), 1)
		q <- call
		go w.work(q)
	}
	if p := <-done; p != nil {
		panic(p)
	}
}

// work is a kept goroutine: it runs the calls sent to q, waiting between
// them while there is room among the idle, until Close.
func (w *Workers) work(q chan func()) {
	defer w.wg.Done()
	defer func() {
		w.mu.Lock()
		w.running--
		w.mu.Unlock()
	}()
	for call := range q {
		call()
		w.mu.Lock()
		if w.closed || len(w.idle) >= w.max {
			w.mu.Unlock()
			return
		}
		w.idle = append(w.idle, q)
		w.mu.Unlock()
	}
}

// Close ends the waiting goroutines, and the others once their call
// returns, and waits for them all to end. Calls made after it still run.
func (w *Workers) Close() {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.closed = true
	idle := w.idle
	w.idle = nil
	w.mu.Unlock()
	for _, q := range idle {
		close(q)
	}
	w.wg.Wait()
}
