package delegation

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// ErrNotFound means no delegation has the id.
var ErrNotFound = errors.New("delegation not found")

// Record is a delegation as it is stored: its state, its lineage (the
// downstream hop) and how its agent was chosen.
type Record struct {
	// ID identifies the delegation.
	ID string `json:"id"`
	// State is the delegation's state, named as A2A task states.
	State a2a.TaskState `json:"state"`
	// Downstream is the hop the work went to.
	Downstream Hop `json:"downstream"`
	// Chain is the chain context sent with the work.
	Chain Chain `json:"chain"`
	// Decision records how the agent was chosen.
	Decision *Decision `json:"decision"`
	// Result is the agent's answer when it replied with a message, or the
	// final status message.
	Result *a2a.Message `json:"result,omitempty"`
	// Artifacts are the artifacts the agent produced.
	Artifacts []*a2a.Artifact `json:"artifacts,omitempty"`
	// Error says why a failed delegation failed, naming the hop.
	Error string `json:"error,omitempty"`
	// LastEvent is the Seq of the delegation's latest event: follow its
	// events after it to see only what comes next.
	LastEvent int64 `json:"lastEvent"`
	// CreatedAt and UpdatedAt are when the delegation started and last
	// changed.
	CreatedAt time.Time `json:"createdAt"`
	UpdatedAt time.Time `json:"updatedAt"`
}

// Hop is the downstream side of a delegation: which agent, the exact card
// it was validated against, and its task.
type Hop struct {
	// Agent is the registry id.
	Agent string `json:"agent"`
	// CardDigest pins the card the agent was validated against.
	CardDigest string `json:"cardDigest"`
	// TaskID and ContextID identify the agent's task; both are empty when
	// the agent answered with a message.
	TaskID    a2a.TaskID `json:"taskId,omitempty"`
	ContextID string     `json:"contextId,omitempty"`
}

// Store keeps delegation records. Implementations must be safe for
// concurrent use; the in-memory one is [MemoryStore], and a durable one can
// take its place.
type Store interface {
	// Put creates or replaces a record.
	Put(ctx context.Context, r Record) error
	// Get returns the record with the id, or ErrNotFound.
	Get(ctx context.Context, id string) (Record, error)
	// List returns the records in the given state (all when state is
	// unspecified), newest first.
	List(ctx context.Context, state a2a.TaskState) ([]Record, error)
}

// DefaultMemoryRecords is how many records a MemoryStore keeps when
// NewMemoryStore is given no bound.
const DefaultMemoryRecords = 10_000

// MemoryStore is a Store in process memory. It keeps at most a fixed
// number of records, forgetting those that ended longest ago first, so a
// daemon that runs for months does not grow without bound. Records of
// running delegations are kept even past the bound; they can be forgotten
// once they end. Making room costs O(1), amortised, whatever the bound.
type MemoryStore struct {
	mu      sync.RWMutex
	records map[string]stored
	max     int
	// ended queues the ids of ended records, the one that ended first at
	// ended[head]: the order they are forgotten in. Every record in it is
	// marked queued, so it holds each id at most once. A record put back
	// to a running state stays queued and is skipped when its turn comes.
	ended []string
	head  int
}

// stored is a record and whether its id is queued in ended.
type stored struct {
	Record
	queued bool
}

// NewMemoryStore returns an empty MemoryStore keeping at most max records;
// max <= 0 means DefaultMemoryRecords.
func NewMemoryStore(max int) *MemoryStore {
	if max <= 0 {
		max = DefaultMemoryRecords
	}
	return &MemoryStore{records: map[string]stored{}, max: max}
}

// Put implements Store.
func (s *MemoryStore) Put(_ context.Context, r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	queued := s.records[r.ID].queued
	if !queued && r.State.Terminal() {
		s.ended = append(s.ended, r.ID)
		queued = true
	}
	s.records[r.ID] = stored{Record: r, queued: queued}
	for len(s.records) > s.max && s.head < len(s.ended) {
		s.evictOne()
	}
	return nil
}

// evictOne takes the next id off the ended queue and forgets its record,
// unless the record runs again. Callers hold mu and check the queue is not
// empty.
func (s *MemoryStore) evictOne() {
	id := s.ended[s.head]
	s.ended[s.head] = ""
	s.head++
	switch {
	case s.head == len(s.ended):
		s.ended, s.head = s.ended[:0], 0
	case s.head >= 64 && s.head >= len(s.ended)/2:
		// Reuse the consumed front. The copy moves no more ids than were
		// taken since the last one, so a Put stays O(1) amortised.
		n := copy(s.ended, s.ended[s.head:])
		clear(s.ended[n:])
		s.ended, s.head = s.ended[:n], 0
	}
	if st, ok := s.records[id]; ok {
		if st.State.Terminal() {
			delete(s.records, id)
			return
		}
		st.queued = false
		s.records[id] = st
	}
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, id string) (Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.records[id]
	if !ok {
		return Record{}, ErrNotFound
	}
	return r.Record, nil
}

// List implements Store.
func (s *MemoryStore) List(_ context.Context, state a2a.TaskState) ([]Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Record, 0, len(s.records))
	for _, r := range s.records {
		if state == a2a.TaskStateUnspecified || r.State == state {
			out = append(out, r.Record)
		}
	}
	slices.SortFunc(out, func(a, b Record) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

var _ Store = (*MemoryStore)(nil)
