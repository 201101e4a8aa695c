package store

import (
	"sync"

	"github.com/hashicorp/golang-lru/v2/simplelru"
)

// writeHints is what this process remembers of its own writes of
// delegations, so that a write need not read the store first: whether a
// delegation's index entry exists, whether its r. key is written or
// removed, and its log's last event. Each hint is only that: a wrong or
// forgotten one costs a read or a retry, never a wrong answer.
//
// Running delegations and the others are remembered apart, each the
// least recently written forgotten first. A running delegation's every
// event is one round trip to the server while it is remembered (PutStep)
// and three to five once forgotten; the delegations that end, quick ones
// by the thousand a second, are written once or twice more at most. Kept
// apart, those never push the running ones out.
type writeHints struct {
	mu sync.Mutex
	// running holds the delegations whose last write left them running,
	// and those written without saying (an append).
	running *simplelru.LRU[string, hint]
	// ended holds those whose last write was of their end, or of a
	// record that ended as it started.
	ended *simplelru.LRU[string, hint]
}

// hint is what writeHints keeps of one delegation.
type hint struct {
	indexed bool      // its index entry exists
	mark    markState // its r. key
	tail    eventTail // its log's last event, when tailKnown
	// tailKnown says tail is the log's last event.
	tailKnown bool
	// record is the stream sequence (the KV revision) of this process's
	// last write of the record, when recordKnown: its next write expects
	// it (Delegations.writeRecord).
	record      uint64
	recordKnown bool
}

// markState is what a process knows of a delegation's r. key.
type markState uint8

const (
	markUnknown markState = iota
	markWritten           // the delegation runs: its r. key is written
	markRemoved           // its r. key is removed, or was never written
)

// endedHints bounds the delegations remembered once they ended: a
// delegation is seldom written after its end, and then it reads first.
const endedHints = 4096

// newWriteHints remembers up to running delegations that run, and
// endedHints that ended.
func newWriteHints(running int) *writeHints {
	r, _ := simplelru.NewLRU[string, hint](running, nil) // only a non-positive size fails
	e, _ := simplelru.NewLRU[string, hint](endedHints, nil)
	return &writeHints{running: r, ended: e}
}

// get returns what is remembered of key: the zero hint, every part
// unknown, when nothing is.
func (h *writeHints) get(key string) hint {
	h.mu.Lock()
	defer h.mu.Unlock()
	if v, ok := h.running.Get(key); ok {
		return v
	}
	v, _ := h.ended.Get(key)
	return v
}

// place says which delegations a write's hint is kept with.
type place uint8

const (
	placeKept    place = iota // where it is; with the running ones if new
	placeRunning              // the write leaves the delegation running
	placeEnded                // the write is of a delegation that ended
)

// update changes what is remembered of key with change, and keeps it
// where p says.
func (h *writeHints) update(key string, p place, change func(*hint)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	v, inRunning := h.running.Get(key)
	if !inRunning {
		var inEnded bool
		if v, inEnded = h.ended.Get(key); inEnded && p == placeKept {
			p = placeEnded
		}
	}
	change(&v)
	if p == placeEnded {
		h.running.Remove(key)
		h.ended.Add(key, v)
		return
	}
	h.ended.Remove(key)
	h.running.Add(key, v)
}

// indexed says whether key's index entry is known to exist.
func (h *writeHints) indexed(key string) bool { return h.get(key).indexed }

// markOf says what is known of key's r. key.
func (h *writeHints) markOf(key string) markState { return h.get(key).mark }

// tailOf returns key's log's last event, if known.
func (h *writeHints) tailOf(key string) (eventTail, bool) {
	v := h.get(key)
	return v.tail, v.tailKnown
}

// isNew says whether this process knows nothing of key's writes: neither
// its index entry nor its log.
func (h *writeHints) isNew(key string) bool {
	v := h.get(key)
	return !v.indexed && !v.tailKnown
}

// setIndexed notes that key's index entry exists, written for a
// delegation that ended or not.
func (h *writeHints) setIndexed(key string, ended bool) {
	p := placeRunning
	if ended {
		p = placeEnded
	}
	h.update(key, p, func(v *hint) { v.indexed = true })
}

// setMark notes key's r. key as written (the delegation runs) or removed
// (it ended).
func (h *writeHints) setMark(key string, m markState) {
	p := placeRunning
	if m == markRemoved {
		p = placeEnded
	}
	h.update(key, p, func(v *hint) { v.mark = m })
}

// setTail notes t as key's log's last event, written by a write that
// leaves the delegation where p says.
func (h *writeHints) setTail(key string, p place, t eventTail) {
	h.update(key, p, func(v *hint) { v.tail, v.tailKnown = t, true })
}

// forgetTail forgets key's log's last event, if remembered: the next
// append reads it.
func (h *writeHints) forgetTail(key string) {
	h.amend(key, func(v *hint) { v.tail, v.tailKnown = eventTail{}, false })
}

// recordOf returns the revision of key's record this process last wrote,
// if known.
func (h *writeHints) recordOf(key string) (uint64, bool) {
	v := h.get(key)
	return v.record, v.recordKnown
}

// setRecord notes rev as the revision of key's record, written by a
// write that leaves the delegation where p says.
func (h *writeHints) setRecord(key string, p place, rev uint64) {
	h.update(key, p, func(v *hint) { v.record, v.recordKnown = rev, true })
}

// forgetRecord forgets the revision of key's record, if remembered: the
// next write of the record expects none.
func (h *writeHints) forgetRecord(key string) {
	h.amend(key, func(v *hint) { v.record, v.recordKnown = 0, false })
}

// amend changes what is remembered of key with change, where it is kept,
// and remembers nothing new when nothing is.
func (h *writeHints) amend(key string, change func(*hint)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range []*simplelru.LRU[string, hint]{h.running, h.ended} {
		if v, ok := c.Peek(key); ok {
			change(&v)
			c.Add(key, v)
		}
	}
}
