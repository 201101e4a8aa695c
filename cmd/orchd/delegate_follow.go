package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/spf13/cobra"

	"github.com/orchd/orchd/delegation"
)

// followRetries is how many times in a row following a delegation
// reconnects to an event stream that ended before the delegation did (the
// daemon stopped, a proxy closed the connection) before it gives up;
// the wait before each reconnection doubles from followBackoff to
// followBackoffMax: 23 s in all, past a daemon's restart and a NATS
// cluster's election (up to 9 s), during which the daemon answers 503.
const (
	followRetries    = 5
	followBackoff    = time.Second
	followBackoffMax = 8 * time.Second
)

// followed is where following a delegation stands.
type followed struct {
	// after is the sequence number of the last event seen; the stream is
	// (re)opened after it, with Last-Event-ID.
	after int64
	// from is the first sequence number whose waiting state (input or
	// auth required) stops following: older waits were answered. Events
	// are numbered from 1.
	from int64
	// state is the delegation's state as of the last event seen.
	state a2a.TaskState
}

// done reports whether the delegation ended or waits for input.
func (f *followed) done() bool {
	return f.state.Terminal() || f.waits()
}

// waits reports whether the delegation waits for input since an event
// from f.from on: its stream then stays open with nothing to send.
func (f *followed) waits() bool {
	return waiting(f.state) && f.after >= f.from
}

// waiting reports whether a delegation in state s waits for its caller.
func waiting(s a2a.TaskState) bool {
	return s == a2a.TaskStateInputRequired || s == a2a.TaskStateAuthRequired
}

// follow reads a delegation's events after f.after and calls fn for each
// until the delegation ends or waits for input. A stream that ends before
// that, or a server error answer (a proxy's 502 while the daemon
// restarts), is resumed where it stopped, up to followRetries times in a
// row; any other error answer is not retried.
func (c *apiClient) follow(ctx context.Context, id string, f *followed, fn func(delegation.Event)) error {
	for failures := 0; ; {
		seen := f.after
		err := c.followOnce(ctx, id, f, fn)
		var ae *apiError
		switch {
		case err == nil && f.done():
			// Not on an error: the record a follow starts from may
			// already say the delegation ended, before any event was read.
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.As(err, &ae) && ae.status < http.StatusInternalServerError:
			return err
		case f.after > seen:
			failures = 0
		}
		if failures++; failures > followRetries {
			if err == nil {
				err = errors.New("the event stream ended before the delegation did")
			}
			return fmt.Errorf("follow delegation %s (%d reconnections): %w", id, followRetries, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(followBackoff<<(failures-1), followBackoffMax)):
		}
	}
}

// followOnce reads one event stream until it ends or the delegation
// waits for input.
func (c *apiClient) followOnce(ctx context.Context, id string, f *followed, fn func(delegation.Event)) error {
	req, err := http.NewRequestWithContext(ctx, "GET", strings.TrimRight(c.base, "/")+"/v1/delegations/"+url.PathEscape(id)+"/events", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Last-Event-ID", fmt.Sprint(f.after))
	c.authorize(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("reach orchd at %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return newAPIError(resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev delegation.Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return fmt.Errorf("event stream: %w", err)
		}
		fn(ev)
		f.after, f.state = ev.Seq, ev.State
		if f.done() {
			return nil
		}
	}
	return sc.Err()
}

// followDelegation prints a delegation's events (as JSON lines with -o
// json) until it ends or waits for input, and turns how it ended into the
// command's outcome. Stopped by Ctrl-C (or its context), it detaches: the
// work goes on in the daemon, and it says how to follow or cancel it.
func followDelegation(cmd *cobra.Command, c *apiClient, id string, f *followed, output outputFormat) error {
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	out := cmd.OutOrStdout()
	enc := json.NewEncoder(out)
	var err error
	if !f.waits() {
		err = c.follow(ctx, id, f, func(ev delegation.Event) {
			if output == "json" {
				_ = enc.Encode(ev)
				return
			}
			printEvent(out, ev)
		})
	}
	if ctx.Err() != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("stopped following delegation %s; the work goes on in the daemon. "+
			"Follow it again with 'orchd tasks follow%s %s', or cancel it with 'orchd tasks cancel%s %s'", id, c.serverArg(), id, c.serverArg(), id)}
	}
	if err != nil {
		return err
	}
	return exitFor(cmd.ErrOrStderr(), c, id, f.state)
}
