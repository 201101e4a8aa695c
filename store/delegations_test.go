package store

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/delegation/storetest"
	"github.com/orchd/orchd/internal/natstest"
)

// openTest opens an embedded store under dir (a new temporary directory
// when ""), closed when the test ends.
func openTest(t testing.TB, dir string, cfg Config) *Store {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, dir, cfg, testLogger(t))
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

// testLogger logs to the test at warning level and above.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

func delegationsOf(t testing.TB, s *Store, cfg DelegationsConfig) *Delegations {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	d, err := s.Delegations(ctx, cfg)
	if err != nil {
		t.Fatalf("Delegations: %v", err)
	}
	return d
}

func TestDelegations_Contract(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) delegation.Store {
		return delegationsOf(t, openTest(t, "", Config{}), DelegationsConfig{})
	})
}

func TestDelegations_ContractCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	t.Parallel()
	c := natstest.NewCluster(t, 3)
	var n atomic.Int64
	storetest.Run(t, func(t *testing.T) delegation.Store {
		ns := fmt.Sprintf("c%d", n.Add(1))
		s, err := Open(t.Context(), "", Config{URL: c.URLs(), Replicas: 3, Namespace: ns}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return delegationsOf(t, s, DelegationsConfig{})
	})
}
