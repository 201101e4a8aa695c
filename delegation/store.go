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
// number of records, forgetting the oldest ended ones first, so a daemon
// that runs for months does not grow without bound.
type MemoryStore struct {
	mu      sync.RWMutex
	records map[string]Record
	max     int
	// order lists record ids by creation, oldest first.
	order []string
}

// NewMemoryStore returns an empty MemoryStore keeping at most max records;
// max <= 0 means DefaultMemoryRecords.
func NewMemoryStore(max int) *MemoryStore {
	if max <= 0 {
		max = DefaultMemoryRecords
	}
	return &MemoryStore{records: map[string]Record{}, max: max}
}

// Put implements Store.
func (s *MemoryStore) Put(_ context.Context, r Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.records[r.ID]; !ok {
		s.order = append(s.order, r.ID)
	}
	s.records[r.ID] = r
	if len(s.records) > s.max {
		s.evict()
	}
	return nil
}

// evict forgets the oldest ended records until the store is within its
// bound; records of running delegations are kept. Callers hold mu.
func (s *MemoryStore) evict() {
	kept := s.order[:0]
	for i, id := range s.order {
		if len(s.records) <= s.max {
			kept = append(kept, s.order[i:]...)
			break
		}
		if s.records[id].State.Terminal() {
			delete(s.records, id)
			continue
		}
		kept = append(kept, id)
	}
	clear(s.order[len(kept):])
	s.order = kept
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, id string) (Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.records[id]
	if !ok {
		return Record{}, ErrNotFound
	}
	return r, nil
}

// List implements Store.
func (s *MemoryStore) List(_ context.Context, state a2a.TaskState) ([]Record, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Record, 0, len(s.records))
	for _, r := range s.records {
		if state == a2a.TaskStateUnspecified || r.State == state {
			out = append(out, r)
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
