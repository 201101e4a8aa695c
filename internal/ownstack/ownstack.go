// Package ownstack runs a piece of deep work on a goroutine of its own, so
// that a long-lived goroutine calling it keeps a small stack.
//
// A goroutine's stack grows to fit its deepest moment, and the runtime
// halves it only at a garbage collection, and only while less than a
// quarter of it is in use. A goroutine that spends hours blocked in a
// shallow read, and a moment now and then in deep work (decoding an
// event, storing it, writing it out), so keeps a stack sized for the
// work: with 10,000 agent streams open, orchd held 12 KiB of stack per
// goroutine, most of it for moments a few milliseconds long. Work run
// through [Run] grows the stack of a goroutine that ends with it instead;
// [Workers] runs it on goroutines kept between calls, whose stacks have
// grown already.
package ownstack

// Run calls f on a new goroutine and waits for it to return. A panic in f
// is raised again in the caller, as if the caller had called f itself.
// Run costs a goroutine start and two switches, a few microseconds: for
// work done now and then, not in a tight loop.
func Run(f func()) {
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		f()
	}()
	if p := <-done; p != nil {
		panic(p)
	}
}
