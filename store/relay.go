package store

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/orchd/orchd/delegation"
)

// Relay passes operations on delegations (input, cancel, steering
// signals) between the processes sharing the store, over NATS
// request/reply: each process answers on <namespace>.relay.<instance>,
// and a process asked to act on a delegation another one follows sends
// the operation there (see delegation.Relay). Nothing of it is stored:
// an operation the owner never answered is reported to the caller as
// unavailable, and the caller may retry it (a retried signal with the
// same message id is passed on once).
type Relay struct {
	s      *Store
	prefix string
}

// maxRelayed bounds the operations one process serves at once; more wait
// in the subscription's buffer.
const maxRelayed = 64

var _ delegation.Relay = (*Relay)(nil)

// Relay returns the store's relay.
func (s *Store) Relay() *Relay {
	return &Relay{s: s, prefix: s.cfg.Namespace + ".relay."}
}

// Forward implements delegation.Relay. It waits for the owner's answer
// until ctx ends.
func (r *Relay) Forward(ctx context.Context, owner string, op delegation.Op) (delegation.Result, error) {
	b, err := json.Marshal(op)
	if err != nil {
		return delegation.Result{}, fmt.Errorf("encode %s of delegation %s: %w", op.Kind, op.ID, err)
	}
	msg, err := r.s.nc.RequestWithContext(ctx, r.prefix+owner, b)
	if err != nil {
		return delegation.Result{}, fmt.Errorf("ask %s: %w", owner, r.s.unavailable(ctx, err))
	}
	var res delegation.Result
	if err := json.Unmarshal(msg.Data, &res); err != nil {
		return delegation.Result{}, fmt.Errorf("read the answer of %s: %w", owner, err)
	}
	return res, nil
}

// Serve implements delegation.Relay: each operation runs in its own
// goroutine, at most maxRelayed at once, and stop waits for them.
func (r *Relay) Serve(owner string, handle func(context.Context, delegation.Op) delegation.Result) (func(), error) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxRelayed)
	sub, err := r.s.nc.Subscribe(r.prefix+owner, func(m *nats.Msg) {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Go(func() {
			defer func() { <-slots }()
			var op delegation.Op
			res := delegation.Result{Error: "the operation could not be read", Code: "bad_request"}
			if err := json.Unmarshal(m.Data, &op); err == nil {
				res = handle(ctx, op)
			}
			b, err := json.Marshal(res)
			if err == nil {
				err = m.Respond(b)
			}
			if err != nil && ctx.Err() == nil {
				r.s.log.Warn("answer a relayed operation", "kind", op.Kind, "delegation", op.ID, "error", err)
			}
		})
	})
	if err != nil {
		cancel()
		return nil, fmt.Errorf("relay subscription: %w", r.s.unavailable(ctx, err))
	}
	return func() {
		_ = sub.Unsubscribe()
		cancel()
		wg.Wait()
	}, nil
}
