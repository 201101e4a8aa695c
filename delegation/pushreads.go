package delegation

import (
	"slices"
	"sync"
)

// maxPushReads bounds the task reads push notifications and polls ask of
// one agent at once, from one process. A read is a GetTask call held open
// until the agent answers, with its goroutine and connection: at 10,000
// delegations to one a2a-go agent, a read per notification in flight at
// once held 2,300 reads and as many connections to the busy agent at the
// peak of the starts (2026-12-07). Past the bound a read waits in its
// agent's queue, and notifications that come meanwhile are folded into
// it, as they are into a read under way: the task read shows every status
// since the last, so nothing is lost, only read later. Polls are also
// paced (pace, pollBudget).
const maxPushReads = 64

// pushReads runs the reads of push and polling followers
// (pushFollower.run), at most maxPushReads at once per agent, in the order
// they were asked for. Its workers are the engine's goroutines: started
// when reads wait, gone when none does.
type pushReads struct {
	mu     sync.Mutex
	agents map[string]*agentReads
}

// agentReads is one agent's queue of reads and how many workers serve it.
type agentReads struct {
	waiting []*pushFollower
	workers int
}

// add queues f's read of its task at its agent's, starting a worker when
// fewer than maxPushReads serve the agent. It reports false when the
// engine is closed, and f is not queued.
func (r *pushReads) add(e *Engine, f *pushFollower) bool {
	r.mu.Lock()
	if r.agents == nil {
		r.agents = map[string]*agentReads{}
	}
	q := r.agents[f.agent]
	if q == nil {
		q = &agentReads{}
		r.agents[f.agent] = q
	}
	start := q.workers < maxPushReads
	if start {
		if !e.track() {
			if q.workers == 0 && len(q.waiting) == 0 {
				delete(r.agents, f.agent)
			}
			r.mu.Unlock()
			return false
		}
		q.workers++
	}
	q.waiting = append(q.waiting, f)
	r.mu.Unlock()
	if start {
		go r.work(e, f.agent, q)
	}
	return true
}

// work runs the reads waiting for agent until none is left. A read of a
// closed engine's follower ends at once (run sees its context done).
func (r *pushReads) work(e *Engine, agent string, q *agentReads) {
	defer e.wg.Done()
	for {
		r.mu.Lock()
		if len(q.waiting) == 0 {
			q.workers--
			if q.workers == 0 {
				delete(r.agents, agent)
			}
			r.mu.Unlock()
			return
		}
		f := q.waiting[0]
		q.waiting[0] = nil
		q.waiting = q.waiting[1:]
		r.mu.Unlock()
		f.run()
	}
}

// remove takes f's read out of its agent's queue, if it waits there yet,
// and reports whether it did: a follower stopped meanwhile (a cancel, the
// deadline) ends without waiting for the reads ahead of it. Callers hold
// f's hook's lock (the one lock order: pushHook.mu, then pushReads.mu).
func (r *pushReads) remove(f *pushFollower) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.agents[f.agent]
	if q == nil {
		return false
	}
	i := slices.Index(q.waiting, f)
	if i < 0 {
		return false
	}
	q.waiting = slices.Delete(q.waiting, i, i+1)
	return true
}
