package mcpserver

import (
	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/orchd/orchd/steering"
)

// What describe read of the delegations that ended, kept: their logs and
// steering state no longer change, and reading them again from the store
// took three of the five store reads of a tasks/get of a completed task
// without artifacts (the log, and the record twice more, for the log's
// end and the steering state). The cache is bounded in entries and in the size of
// each; a view too large to keep is read each time, as before.

const (
	// maxEndedViews bounds the views kept: the least recently used goes
	// first.
	maxEndedViews = 1024
	// maxEndedViewBytes bounds the text one kept view holds: at most 4 MiB
	// together.
	maxEndedViewBytes = 4 << 10
)

// endedKey names the view of a delegation as its record stood: a record
// with another last event is another view.
type endedKey struct {
	id        string
	lastEvent int64
	// latest is whether the view holds the agent's latest words.
	latest bool
}

// endedViews keeps the views of ended delegations.
type endedViews struct {
	c *lru.Cache[endedKey, logView]
}

// newEndedViews returns an empty cache.
func newEndedViews() *endedViews {
	c, _ := lru.New[endedKey, logView](maxEndedViews) // only a non-positive size fails
	return &endedViews{c: c}
}

// get returns a copy of the view kept for k, which the caller may change.
func (e *endedViews) get(k endedKey) (logView, bool) {
	v, ok := e.c.Get(k)
	if !ok {
		return logView{}, false
	}
	v.requests = append([]Request(nil), v.requests...)
	v.receipts = append([]steering.Receipt(nil), v.receipts...)
	return v, true
}

// put keeps v for k, unless its text is over maxEndedViewBytes.
func (e *endedViews) put(k endedKey, v logView) {
	if v.size() > maxEndedViewBytes {
		return
	}
	e.c.Add(k, v)
}

// size is about how many bytes v's text takes.
func (v logView) size() int {
	n := len(v.latest)
	for _, r := range v.requests {
		n += len(r.ID) + len(r.Kind) + len(r.State) + len(r.Message) + len(r.Resolution)
	}
	for _, r := range v.receipts {
		n += len(r.Control) + len(r.MessageID) + len(r.ReferenceMessageID)
		for _, h := range r.Hops {
			n += len(h.Agent) + 8
		}
	}
	return n
}
