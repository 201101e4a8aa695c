// Package orchdtest runs orchd daemons for the tests of other packages: on
// an ephemeral loopback port, stopped when the test ends. (The
// orchestrator package's own tests cannot import it.)
package orchdtest

import (
	"context"
	"testing"
	"time"

	"github.com/orchd/orchd/orchestrator"
	"github.com/orchd/orchd/registry"
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
	t.Cleanup(func() { cancel(); <-done }) //nolint:errcheck // Run ends with the cancellation it was asked for
	deadline := time.Now().Add(10 * time.Second)
	for d.Addr() == nil || d.Registry().Len() < len(cfg.Agents) {
		if time.Now().After(deadline) {
			t.Fatalf("the daemon did not start with its %d agents", len(cfg.Agents))
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "http://" + d.Addr().String()
}

// Node runs a daemon on the embedded defaults named self in delegation
// chains, listing skills on its card and registering agents, until the
// test ends; it returns the daemon's base URL.
func Node(t testing.TB, self string, skills []string, agents ...registry.Spec) string {
	t.Helper()
	cfg, err := orchestrator.LoadConfig("")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Delegation.Self = self
	for _, s := range skills {
		cfg.Agent.Skills = append(cfg.Agent.Skills, orchestrator.SkillConfig{ID: s})
	}
	cfg.Agents = agents
	return Start(t, cfg)
}
