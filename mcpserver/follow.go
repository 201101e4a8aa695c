package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/orchd/orchd/delegation"
)

// Following a delegation while a tool call waits: its events as they come,
// and progress notifications to the client at each one and at least every
// Config.Heartbeat, since many clients give up on a call that is silent
// for 60 s. The events are read from the store's log, so any replica
// follows any delegation.

// eventBatch is how many events one read of the log returns.
const eventBatch = 256

// maxWaitEvents bounds the events one orchd_wait returns; the next call
// takes the rest.
const maxWaitEvents = 100

// progress sends a call's progress notifications, when the client asked
// for them with a progress token.
type progress struct {
	req *mcp.CallToolRequest
	// n is the last progress sent: each notification's is higher.
	n float64
}

// progressOf returns the progress of req.
func progressOf(req *mcp.CallToolRequest) *progress { return &progress{req: req} }

// send notifies the client, if it asked for progress, with msg.
func (p *progress) send(ctx context.Context, msg string) {
	if p == nil || p.req == nil || p.req.Session == nil {
		return
	}
	tok := p.req.Params.GetProgressToken()
	if tok == nil {
		return
	}
	p.n++
	// A notification the client missed is not worth failing the call.
	_ = p.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: p.n, Message: msg})
}

// follow waits up to wait for the delegation of rec to reach a state done
// accepts, sending progress at each event, and returns its record then,
// or when the wait ends. A delegation already there returns at once.
func (s *Server) follow(ctx context.Context, rec delegation.Record, wait time.Duration, p *progress, done func(a2a.TaskState) bool) (delegation.Record, error) {
	if done(rec.State) || wait <= 0 {
		return rec, nil
	}
	end := time.Now().Add(wait)
	after := rec.LastEvent
	for {
		evs, ended, err := s.engine.Events(ctx, rec.ID, after, eventBatch)
		if err != nil {
			return delegation.Record{}, err
		}
		stop := ended
		for _, ev := range evs {
			after = ev.Seq
			p.send(ctx, progressText(ev))
			stop = stop || done(ev.State)
		}
		if stop {
			break
		}
		if len(evs) < eventBatch && !s.await(ctx, rec.ID, after, end, p) {
			break
		}
	}
	return s.engine.Lookup(ctx, rec.ID)
}

// events returns the events of delegation id after after, waiting up to
// wait for the first one, sending progress while it waits.
func (s *Server) events(ctx context.Context, id string, after int64, wait time.Duration, p *progress) ([]Event, error) {
	end := time.Now().Add(wait)
	for {
		evs, ended, err := s.engine.Events(ctx, id, after, maxWaitEvents)
		if err != nil {
			return nil, err
		}
		if len(evs) > 0 || ended {
			out := make([]Event, 0, len(evs))
			for _, ev := range evs {
				out = append(out, eventOf(ev))
			}
			return out, nil
		}
		if !s.await(ctx, id, after, end, p) {
			return nil, nil
		}
	}
}

// await waits until the log of delegation id holds an event after after
// (true), or until end, ctx's end or the daemon's stopping (false),
// sending a heartbeat's progress every Config.Heartbeat meanwhile.
func (s *Server) await(ctx context.Context, id string, after int64, end time.Time, p *progress) bool {
	for {
		left := time.Until(end)
		if left <= 0 || ctx.Err() != nil {
			return false
		}
		wctx, cancel := context.WithTimeout(ctx, min(left, s.cfg.Heartbeat))
		waited := make(chan struct{})
		go func() { // ends when the wait does
			select {
			case <-s.stopping:
				cancel()
			case <-waited:
			}
		}()
		err := s.engine.WaitEvents(wctx, id, after)
		close(waited)
		cancel()
		switch {
		case err == nil:
			return true
		case !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
			s.log.WarnContext(ctx, "wait for delegation events", "delegation", id, "error", err)
			return false
		case s.isStopping():
			return false
		}
		p.send(ctx, fmt.Sprintf("still waiting on delegation %s", id))
	}
}

// isStopping reports whether the daemon began to stop.
func (s *Server) isStopping() bool {
	select {
	case <-s.stopping:
		return true
	default:
		return false
	}
}

// progressText is the progress message of ev.
func progressText(ev delegation.Event) string {
	e := eventOf(ev)
	msg := fmt.Sprintf("event %d: %s, %s", e.Seq, e.Kind, e.State)
	if e.Text != "" {
		msg += ": " + truncate(e.Text, 200)
	}
	return msg
}

// eventOf is ev as the tools show it.
func eventOf(ev delegation.Event) Event {
	e := Event{Seq: ev.Seq, Kind: ev.Kind, State: stateName(ev.State), Text: ev.Error}
	switch {
	case ev.Message != nil:
		e.Text = text(ev.Message.Parts)
	case ev.Artifact != nil:
		e.Text = artifactText(ev.Artifact.Parts)
	}
	return e
}

// truncate cuts s to at most n bytes, on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
