package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Reading a bucket through a watcher. A KV watcher delivers the latest
// value of every key it matches and then a nil marker: every value
// present when it started is in. nats.go ends its updates by closing the
// channel when the watcher's subscription closes, as after its ordered
// consumer could not be created again; its ListKeys reads that close as
// the marker and returns a short list without an error. A short list of
// running delegations leaves work nobody carries on, so every listing
// here reads the watcher itself and fails when the updates close before
// the marker.

// listDrainWait bounds how long a finished listing waits for its
// watcher's updates to close.
const listDrainWait = time.Second

// errWatchClosed is the cause when a watcher's updates close before the
// marker: its subscription closed, on the connection closing or its
// consumer failing. Reading again is safe (notProcessed).
var errWatchClosed = errors.New("watcher closed before every value was read")

// readInitial calls fn with each value w delivers until the marker, and
// fails when ctx ends, when the updates close first (errWatchClosed), or
// with fn's error.
func readInitial(ctx context.Context, w jetstream.KeyWatcher, fn func(jetstream.KeyValueEntry) error) error {
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				return errWatchClosed
			case e == nil:
				return nil
			}
			if err := fn(e); err != nil {
				return err
			}
		}
	}
}

// listKeys reads the keys of kv matching filter, from its stream's
// record of which subjects hold messages, not through a watcher: right
// after JetStream started, a new watcher was seen to send its marker at
// once while the stream held every key (the consumer reported nothing
// pending; 1 listing in 40 after a JetStream restart on a loaded
// machine, the same listing a moment later complete). A key listed may
// hold a deletion or a purge, kept until its TTL or the bucket's
// history drops it: the callers read each key they list anyway.
func listKeys(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, filter string) ([]string, error) {
	st, err := js.Stream(ctx, kvStreamPrefix+kv.Bucket())
	if err != nil {
		return nil, fmt.Errorf("list keys %s: %w", filter, err)
	}
	prefix := "$KV." + kv.Bucket() + "."
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(prefix+filter))
	if err != nil {
		return nil, fmt.Errorf("list keys %s: %w", filter, err)
	}
	keys := make([]string, 0, len(info.State.Subjects))
	for subject := range info.State.Subjects {
		keys = append(keys, strings.TrimPrefix(subject, prefix))
	}
	return keys, nil
}

// stopWatch unsubscribes w and drains its updates until they close, so
// its delivery goroutine, which may be blocked handing over an update,
// ends; it waits at most wait. The unsubscribe closes the updates at once
// and then deletes the watcher's consumer, a request that waits out the
// JetStream timeout while the server is unreachable, so it runs on its
// own (the server drops the consumer anyway once nothing listens).
func stopWatch(w jetstream.KeyWatcher, wait time.Duration) {
	go func() { _ = w.Stop() }()
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case _, ok := <-w.Updates():
			if !ok {
				return
			}
		case <-t.C:
			return
		}
	}
}
