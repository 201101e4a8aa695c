package natstest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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
	var kv jetstream.KeyValue
	for kv == nil {
		kv, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "b", Replicas: 3, Storage: jetstream.FileStorage})
		if err != nil && ctx.Err() != nil {
			t.Fatal(err)
		}
	}
	if _, err := kv.Put(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	c.Stop(0)
	for {
		// Each attempt is bounded: one sent to the stopped node's
		// leadership waits for an answer that never comes.
		attempt, cancel := context.WithTimeout(ctx, time.Second)
		_, err := kv.Put(attempt, "k2", []byte("v2"))
		cancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no write with a node down: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if e, err := kv.Get(ctx, "k"); err != nil || string(e.Value()) != "v" {
		t.Fatalf("k = %v, %v", e, err)
	}
	if _, err := kv.Get(ctx, "missing"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("missing key: %v", err)
	}
}
