// Command spin keeps the machine's cores busy, so that the test suite can be
// run the way it will sometimes run for real: on a machine doing other
// work. Every test must pass under it (CONTRIBUTING.md, "A busy machine").
//
//	go run ./internal/spin -for 45m &
//	for i in 1 2 3; do go test -race -count=1 ./... || break; done
//	kill %1
//
// It spins one goroutine per core (-n to choose) until -for has passed or
// it is interrupted.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"syscall"
	"time"
)

func main() {
	n := flag.Int("n", runtime.NumCPU(), "how many cores to keep busy")
	d := flag.Duration("for", time.Hour, "how long to spin")
	flag.Parse()
	if *n < 1 || *d <= 0 {
		fmt.Fprintln(os.Stderr, "spin: -n must be at least 1 and -for positive")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *d)
	defer cancel()
	fmt.Fprintf(os.Stderr, "spin: keeping %d cores busy for %v\n", *n, *d)
	var wg sync.WaitGroup
	for range *n {
		wg.Go(func() { spin(ctx) })
	}
	wg.Wait()
}

// spin burns CPU until ctx ends, looking at ctx only every few million
// iterations so that nearly all of its time is spent computing.
func spin(ctx context.Context) {
	x := uint64(1)
	for ctx.Err() == nil {
		for range 1 << 22 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	if x == 0 { // keeps the loop from being optimised away
		fmt.Fprintln(os.Stderr, "spin: impossible")
	}
}
