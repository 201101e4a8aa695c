package natstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/internal/testwait"
)

func TestServer_KeepsAcrossRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := Server(t, dir)
	js := JetStream(t, s)
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "b", Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	s.Shutdown()
	s.WaitForShutdown()
	kv, err = JetStream(t, Server(t, dir)).KeyValue(t.Context(), "b")
	if err != nil {
		t.Fatal(err)
	}
	if e, err := kv.Get(t.Context(), "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("after restart: %v, %v", e, err)
	}
}

// TestNode_ClientsReconnectAfterRestart stops a node and starts it again:
// a client connected before reads what it wrote before the stop.
func TestNode_ClientsReconnectAfterRestart(t *testing.T) {
	t.Parallel()
	n := NewNode(t)
	js := n.JetStream(t)
	kv, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "b", Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(t.Context(), "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	n.Stop()
	n.Start()
	testwait.Until(t, 20*time.Second, "the value read again through the same client", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		e, err := kv.Get(ctx, "k")
		return err == nil && string(e.Value()) == "v"
	})
}

func TestCluster_WritesSurviveANode(t *testing.T) {
	t.Parallel()
	c := NewCluster(t, 3)
	nc, err := nats.Connect(c.URLs())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := jetstream.New(nc)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	// Each try is bounded, and a try after one whose answer was lost
	// finds the bucket made: CreateOrUpdate, not Create.
	var kv jetstream.KeyValue
	testwait.Succeeds(t, 20*time.Second, "the bucket created", func() error {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		kv, err = js.CreateOrUpdateKeyValue(attempt, jetstream.KeyValueConfig{Bucket: "b", Replicas: 3, Storage: jetstream.FileStorage})
		return err
	})
	// A bucket just created may have no stream leader yet ("no response
	// from stream"), as a stream whose leader's node went has none until
	// the others elect one: each write is tried until one goes through.
	put := func(key, value, when string) {
		t.Helper()
		testwait.Succeeds(t, 20*time.Second, "a write "+when, func() error {
			// Each attempt is bounded: one sent to a leadership that
			// is gone waits for an answer that never comes.
			attempt, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			_, err := kv.Put(attempt, key, []byte(value))
			return err
		})
	}
	put("k", "v", "to the new bucket")
	c.Stop(0)
	put("k2", "v2", "with a node down")
	if e, err := kv.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("k = %v, %v", e, err)
	}
	if _, err := kv.Get(ctx, "missing"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("missing key: %v", err)
	}
}
