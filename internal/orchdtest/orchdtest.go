// Package orchdtest runs orchd daemons for the tests of other packages: on
// an ephemeral loopback port, stopped when the test ends. (The
// orchestrator package's own tests cannot import it.)
package orchdtest

import (
	"context"
	"testing"
	"time"

	"github.com/orchd/orchd/orchestrator"
)

// Start runs a daemon built from cfg on 127.0.0.1 until the test ends. It
// returns the daemon's base URL once the daemon listens and has registered
// every agent of cfg.Agents, and fails the test if that takes more than
// ten seconds.
func Start(t testing.TB, cfg orchestrator.Config) string {
	t.Helper()
	cfg.Listen = "127.0.0.1:0"
	d, err := orchestrator.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(10 * time.Second)
	for d.Addr() == nil || d.Registry().Len() < len(cfg.Agents) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not start with its %d agents", len(cfg.Agents))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "http://" + d.Addr().String()
}
