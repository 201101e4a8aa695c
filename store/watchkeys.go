package store

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// watchStopWait bounds how long stopping a watcher that follows a bucket
// waits for its delivery goroutine to let go of the updates channel;
// watchReconnectCheck is how often such a watch looks whether its
// connection reconnected.
const (
	watchStopWait       = 5 * time.Second
	watchReconnectCheck = 200 * time.Millisecond
)

// watchKeys calls fn for every entry of kv whose key matches pattern
// stored after revision after, in order, deletions included, and with nil
// each time the watch has caught up with the bucket, until ctx is done (it
// then returns nil) or the watch fails. When the connection reconnects, as
// after a server restart, the watch starts again after the last revision
// it delivered: the server may have lost its consumer, and the client
// would notice only after missing its heartbeats. what names the watch in
// the log.
func watchKeys(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, pattern string, after uint64,
	log *slog.Logger, what string, fn func(jetstream.KeyValueEntry)) error {
	for {
		again, err := watchKeysOnce(ctx, js, kv, pattern, &after, fn)
		if !again {
			return err
		}
		log.Info(what+": connection reconnected; watching again", "after", after)
	}
}

// watchKeysOnce is one watcher's run of watchKeys, from *after, which it
// moves past every entry it sees. It reports again when the connection
// reconnected since the watcher started.
func watchKeysOnce(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, pattern string, after *uint64,
	fn func(jetstream.KeyValueEntry)) (again bool, err error) {
	nc := js.Conn()
	reconnects := nc.Stats().Reconnects
	w, err := kv.Watch(ctx, pattern, jetstream.ResumeFromRevision(*after+1))
	if err != nil {
		if ctx.Err() != nil {
			return false, nil
		}
		return false, err
	}
	defer stopWatch(w, watchStopWait)
	check := time.NewTicker(watchReconnectCheck)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, nil
		case <-check.C:
			if nc.Stats().Reconnects != reconnects && nc.IsConnected() {
				return true, nil
			}
		case e, ok := <-w.Updates():
			switch {
			case !ok:
				if ctx.Err() != nil {
					return false, nil
				}
				return false, errAgentWatcherClosed
			case e == nil: // caught up
				fn(nil)
				continue
			}
			*after = e.Revision()
			fn(e)
		}
	}
}
