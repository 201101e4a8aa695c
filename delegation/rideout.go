package delegation

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"
)

// Following a delegation through a store outage. A front that follows a
// delegation for its caller (an event stream of the API, an A2A stream;
// an MCP call waits) reads the delegation's log again at every event. When
// the store is out of reach for a moment, as while a NATS cluster elects
// a stream's leader after a node crashed (4–9 s), those reads fail.
// Ending every follower's stream then would have every client reconnect
// at once as the store comes back, and some give up meanwhile: nothing
// would be lost, but many callers would see a failure that was not one.
// So a follower waits for the store instead, its stream kept open.

// rideOutFirst and rideOutMax bound the wait between a follower's reads
// while the store is unavailable: it doubles from the first to the most.
const (
	rideOutFirst = 100 * time.Millisecond
	rideOutMax   = 2 * time.Second
)

// FollowEvents returns the events of delegation id after after, as
// Events does, for one of its followers: when the store is unavailable,
// it waits and reads again (rideOut) until the read goes through, fails
// otherwise, or ctx ends. A read whose caller would rather be told at
// once, as one that answers a request, calls Events.
func (e *Engine) FollowEvents(ctx context.Context, id string, after int64, limit int) (evs []Event, ended bool, err error) {
	err = e.rideOut(ctx, id, func() (err error) {
		evs, ended, err = e.Events(ctx, id, after, limit)
		return err
	})
	return evs, ended, err
}

// rideOut calls read, a read of delegation id's log for one of its
// followers, until it does not fail for the store being unavailable
// (ErrUnavailable), and returns its error then; or until ctx ends, with
// the read's last error and ctx's cause, so a caller bounding its wait
// learns why nothing came. While the store is unavailable, it reads again after a
// wait that doubles from 100 ms to 2 s, up to a fifth of it shortened at
// random so that the followers do not all read at the same moment. The
// failures of every follower are logged together, a few lines per outage.
func (e *Engine) rideOut(ctx context.Context, id string, read func() error) error {
	wait := rideOutFirst
	for {
		err := read()
		if err == nil {
			e.followReads.Succeeded()
			return nil
		}
		if !errors.Is(err, ErrUnavailable) {
			return err
		}
		if ctx.Err() == nil {
			e.followReads.Failed("read delegation events for a follower; it waits and reads again", err, "delegation", id)
			t := time.NewTimer(wait - rand.N(wait/5))
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w; stopped waiting for the store: %w", err, context.Cause(ctx))
		}
		wait = min(2*wait, rideOutMax)
	}
}
