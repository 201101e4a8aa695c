package main

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/steering"
)

// kindLong is the long-working agent's kind: the scale run's agent
// (longHandlers).
const kindLong = "long"

// steersPath is where the long and steerable agents list the steers
// they took (steerLog).
const steersPath = "/steers"

// tickPrefix starts the status message of each of the long agent's
// ticks: "tick <n> <unix nanoseconds when sent>".
const tickPrefix = "tick "

// donePrefix starts the long agent's COMPLETED status message after its
// work: "done after <n> ticks" without the unit, so the run can check
// that each of the n ticks reached the log once.
const donePrefix = "done after "

// steerPrefix starts the text of each steer the scale and steering runs
// send: "steer <key> <n>", the key naming the delegation or task; the
// agent keeps the n it took per key, in the order it took them.
const steerPrefix = "steer "

// longHandlers serves the long agent, answering JSON-RPC at /rpc: a
// steerable, interruptible a2a-go agent that streams a task which works
// args[0] (a duration), sending a WORKING status every args[1] whose
// message says when it was sent, then an artifact saying pong and
// COMPLETED; an optional args[2] is how long it stays silent first (its
// ticks then are not sent, and not counted). A steer is acknowledged as
// it is taken; an interrupt stops the work INPUT_REQUIRED, and the next
// message to the task completes it.
func longHandlers(args []string) ([]func(string) http.Handler, error) {
	if len(args) != 2 && len(args) != 3 {
		return nil, fmt.Errorf("long: want the work and tick durations, and maybe the silent one, got %q", args)
	}
	work, err := time.ParseDuration(args[0])
	if err != nil {
		return nil, fmt.Errorf("long: work: %w", err)
	}
	tick, err := time.ParseDuration(args[1])
	if err != nil || tick <= 0 {
		return nil, fmt.Errorf("long: tick %q is not a positive duration", args[1])
	}
	var silent time.Duration
	if len(args) == 3 {
		if silent, err = time.ParseDuration(args[2]); err != nil || silent < 0 {
			return nil, fmt.Errorf("long: silent %q is not a duration", args[2])
		}
	}
	return []func(string) http.Handler{func(base string) http.Handler {
		return steeringHandler(base, "Bench long", "works a while, streaming ticks and taking steers", kindLong,
			func(st *steering.Steering) steeringWork {
				return &longExec{st: st, work: work, tick: tick, silent: silent}
			})
	}}, nil
}

// longExec is the long agent's work. It counts its executions and the
// signals they took, and keeps the steers taken per delegation.
type longExec struct {
	st         *steering.Steering
	work, tick time.Duration
	silent     time.Duration // no tick is sent this long after the work starts
	runs       atomic.Int64
	taken      signalsTaken
}

func (x *longExec) counted() (*atomic.Int64, *signalsTaken) { return &x.runs, &x.taken }

func (x *longExec) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	x.runs.Add(1)
	return func(yield func(a2a.Event, error) bool) {
		inbox := x.st.Open(ec)
		defer func() { x.taken.add(inbox.Close()...) }()
		if ec.StoredTask != nil { // the answer to an interrupt: finish
			if yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart(pong)), nil) {
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart("done"))), nil)
			}
			return
		}
		if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) || !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, nil), nil) {
			return
		}
		begun := time.Now()
		end, quiet := begun.Add(x.work), begun.Add(x.silent)
		t := time.NewTicker(x.tick)
		defer t.Stop()
		ticks := 0
		for {
			select {
			case <-ctx.Done():
				return
			case <-inbox.Ready():
				if !x.taken.handle(inbox.Take(), func(sig steering.Signal) bool {
					if sig.Control == steering.Interrupt {
						yield(inbox.Interrupted(ec, "interrupted, what next?"), nil)
						return false
					}
					return yield(steering.Acknowledged(ec, sig), nil)
				}) {
					return
				}
				continue
			case now := <-t.C:
				if now.Before(quiet) {
					continue
				}
				if now.Before(end) {
					ticks++
					text := tickPrefix + strconv.Itoa(ticks) + " " + strconv.FormatInt(time.Now().UnixNano(), 10)
					if !yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateWorking, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(text))), nil) {
						return
					}
					continue
				}
			}
			if yield(a2a.NewArtifactEvent(ec, a2a.NewTextPart(pong)), nil) {
				yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCompleted, a2a.NewMessageForTask(a2a.MessageRoleAgent, ec, a2a.NewTextPart(donePrefix+strconv.Itoa(ticks)))), nil)
			}
			return
		}
	}
}

func (x *longExec) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2a.Event, error] {
	return func(yield func(a2a.Event, error) bool) {
		yield(a2a.NewStatusUpdateEvent(ec, a2a.TaskStateCanceled, nil), nil)
	}
}

// signalsTaken counts the signals an agent's executions took and keeps
// the steers among them (steerLog). A signal acknowledged to its sender
// counts as taken once the executor takes it from its inbox, and so does
// one the work ended with still queued (Inbox.Close returns it) or taken
// in the same batch after the signal the work stopped on: each was
// delivered, and the sender was told so.
type signalsTaken struct {
	n      atomic.Int64
	steers steerLog
}

// add counts sigs as taken.
func (t *signalsTaken) add(sigs ...steering.Signal) {
	for _, sig := range sigs {
		t.n.Add(1)
		if sig.Control == steering.Steer {
			t.steers.took(sig.Message)
		}
	}
}

// handle takes sigs in order, each counted before take handles it, until
// take says the work stops; the ones after count too. It reports whether
// the work goes on.
func (t *signalsTaken) handle(sigs []steering.Signal, take func(steering.Signal) bool) bool {
	for i, sig := range sigs {
		t.add(sig)
		if !take(sig) {
			t.add(sigs[i+1:]...)
			return false
		}
	}
	return true
}

// steerLog keeps the steers an agent took ("steer <key> <n>", see
// steerPrefix) per key, in order, and serves them as JSON (key → the n
// of each); other messages it ignores. The zero value is ready.
type steerLog struct {
	mu     sync.Mutex
	steers map[string][]int
}

// took keeps a steer.
func (l *steerLog) took(m *a2a.Message) {
	if m == nil || len(m.Parts) != 1 {
		return
	}
	rest, ok := strings.CutPrefix(m.Parts[0].Text(), steerPrefix)
	f := strings.Fields(rest)
	if !ok || len(f) != 2 {
		return
	}
	n, err := strconv.Atoi(f[1])
	if err != nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.steers == nil {
		l.steers = map[string][]int{}
	}
	l.steers[f[0]] = append(l.steers[f[0]], n)
}

func (l *steerLog) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	l.mu.Lock()
	out := make(map[string][]int, len(l.steers))
	for k, v := range l.steers {
		out[k] = slices.Clone(v)
	}
	l.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}
