package delegation

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/steering"
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
	// ChainIgnored says why the chain context the work arrived with was
	// not believed, so a new chain started here.
	ChainIgnored string `json:"chainIgnored,omitempty"`
	// Owner is the authenticated caller the delegation belongs to, nil
	// when it was created with no authentication configured.
	Owner *Principal `json:"owner,omitempty"`
	// Decision records how the agent was chosen.
	Decision *Decision `json:"decision"`
	// Via is the front and client the work came through, when the front
	// said (Request.Via).
	Via *Via `json:"via,omitempty"`
	// Result is the agent's answer when it replied with a message, or the
	// final status message.
	Result *a2a.Message `json:"result,omitempty"`
	// Artifacts are the artifacts the agent produced. A Store is given
	// records without them and keeps none: the log's artifact events hold
	// them (Progress.ArtifactsFrom).
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
	// Upstream is orchd's own A2A task that mirrors the delegation, when
	// the work came to orchd over A2A.
	Upstream *Upstream `json:"upstream,omitempty"`
	// Lineage is the chain of hops below the downstream hop, as that hop
	// (another orchd, trusted) last reported it: its own delegation
	// first, down to the leaf agent (lineage.go). nil when the hop
	// reported none, or is not believed.
	Lineage *Lineage `json:"lineage,omitempty"`
	// Progress is what another process needs to carry the delegation on
	// where this one left it. It is kept in the store and not shown by
	// the API.
	Progress *Progress `json:"progress,omitempty"`
}

// Upstream is the A2A task of orchd's own that mirrors a delegation, and
// whose it is.
type Upstream struct {
	// TaskID and ContextID identify the task.
	TaskID    a2a.TaskID `json:"taskId"`
	ContextID string     `json:"contextId,omitempty"`
	// User is the name of the user the task belongs to in orchd's task
	// store ("" for unauthenticated callers).
	User string `json:"user,omitempty"`
}

// TaskInfo implements a2a.TaskInfoProvider.
func (u Upstream) TaskInfo() a2a.TaskInfo {
	return a2a.TaskInfo{TaskID: u.TaskID, ContextID: u.ContextID}
}

// Progress is the part of a running delegation's state that is not the
// agent's: how its hop is followed and which signals went down it.
type Progress struct {
	// Streaming is true when the hop's card declares streaming, so the
	// task is followed by subscribing rather than polling.
	Streaming bool `json:"streaming,omitempty"`
	// Follow is how the hop is followed, chosen once when the work is
	// sent (follow.go): "push", "stream" or "poll"; empty in records kept
	// before it was recorded, followed as Streaming says.
	Follow string `json:"follow,omitempty"`
	// PushToken is the SHA-256 (hex) of the token the hop's agent sends
	// with its push notifications, when the hop is followed by push; the
	// token itself is never kept.
	PushToken string `json:"pushToken,omitempty"`
	// Steerable and Interruptible are the steering modes of the pinned
	// card.
	Steerable     bool `json:"steerable,omitempty"`
	Interruptible bool `json:"interruptible,omitempty"`
	// Lineage is set when the lineage the hop reports is believed: its
	// card declares the delegation extension and Config.TrustLineage
	// trusts it (lineage.go).
	Lineage bool `json:"lineage,omitempty"`
	// LastStatus is the id of the last status message applied, so a
	// status seen again after a takeover is not applied twice.
	LastStatus string `json:"lastStatus,omitempty"`
	// SteerSeq is the number of the last signal passed down.
	SteerSeq int64 `json:"steerSeq,omitempty"`
	// Receipts are the receipts of the latest signals (at most
	// MaxReceipts), so a retried message id is answered with its first
	// receipt by any process, after any restart.
	Receipts []steering.Receipt `json:"receipts,omitempty"`
	// ContainedAt is when the latest containment this delegation was
	// stopped for was made, so it is stopped once for each.
	ContainedAt time.Time `json:"containedAt,omitzero"`
	// ArtifactsFrom is the Seq of the event from which folding the log's
	// artifact events gives the delegation's artifacts, which the stored
	// record does not hold (artifacts.go); 0 while it has none.
	ArtifactsFrom int64 `json:"artifactsFrom,omitempty"`
}

// MaxReceipts bounds Progress.Receipts: a signal retried after this many
// later signals is passed on again.
const MaxReceipts = 256

// Hop is the downstream side of a delegation: which agent, the exact card
// it was validated against, and its task.
type Hop struct {
	// Agent is the registry id.
	Agent string `json:"agent"`
	// Name is the agent card's name when the work was sent.
	Name string `json:"name,omitempty"`
	// CardDigest pins the card the agent was validated against.
	CardDigest string `json:"cardDigest"`
	// TaskID and ContextID identify the agent's task; both are empty when
	// the agent answered with a message.
	TaskID    a2a.TaskID `json:"taskId,omitempty"`
	ContextID string     `json:"contextId,omitempty"`
}

// Store keeps delegation records and their event logs: what lets another
// process, or this one after a restart, answer for a delegation and carry
// it on. Implementations must be safe for concurrent use. [MemoryStore]
// keeps them in process memory (store: memory); the daemon's default keeps
// them on NATS JetStream (package store).
//
// A method that returns nil has made the write durable: the engine
// acknowledges nothing to a caller before its Put returned nil.
type Store interface {
	// Put creates or replaces a record.
	Put(ctx context.Context, r Record) error
	// Get returns the record with the id, or an error wrapping ErrNotFound.
	Get(ctx context.Context, id string) (Record, error)
	// List returns one page of records, newest first.
	List(ctx context.Context, q Query) (Page, error)
	// Append adds an event to the delegation's log. Events are appended
	// in Seq order, starting at 1; appending a Seq that is already in the
	// log keeps the first and returns nil, so a retried append is
	// harmless.
	Append(ctx context.Context, id string, ev Event) error
	// Events returns at most limit events of the delegation's log with a
	// Seq above after, in order. Events past the log's retention are
	// gone: the first returned may then have a Seq above after+1.
	Events(ctx context.Context, id string, after int64, limit int) ([]Event, error)
	// Wait returns once the delegation's log holds an event with a Seq
	// above after, or when ctx ends (with its error).
	Wait(ctx context.Context, id string, after int64) error
	// Running returns the ids of the delegations whose records are not
	// in a terminal state, for a process to carry on the ones nobody
	// follows.
	Running(ctx context.Context) ([]string, error)
}

// EndedStore is a Store that keeps a delegation which ended as it started
// (the agent's first answer ended the work) in one go: its events and its
// record together cost fewer round trips than an Append for each event
// and a Put. The engine uses it when its Store implements it.
type EndedStore interface {
	Store
	// PutEnded keeps the events, the whole log from Seq 1 in order, and
	// the record, in a terminal state. It returns nil once all are
	// durable, as Append and Put would have made them.
	PutEnded(ctx context.Context, r Record, evs []Event) error
}

// RunningLister is a Store that lists the delegations that may be
// running without reading their records, as Running does for every one:
// a start carrying 10,000 delegations on read each record twice (0.4 s
// of it, on the embedded store), and replicas sharing a store read every
// running record at each look for delegations nobody took. The engine
// reads the record of each delegation it carries on anyway, and skips
// one that ended. The engine uses it when its Store implements it.
type RunningLister interface {
	// MayRun returns the ids of every running delegation, and maybe of
	// some that ended: a process that stopped between the two writes of
	// a Put leaves its record ended and its delegation listed.
	MayRun(ctx context.Context) ([]string, error)
	// Ended tells the store that the caller read the record of a
	// delegation MayRun listed, and found it ended: it is not listed
	// again once the store sees so too.
	Ended(ctx context.Context, id string) error
}

// ManyReader is a Store that reads many delegations at once: their
// records, and the last event of each one's log, in a few round trips
// rather than two each. A start carrying 10,000 delegations on read them
// one by one, 20,000 round trips to the embedded store before it was
// ready. The engine uses it at a start when no other process shares the
// store (no Config.Leases): with Leases, a record is read only once its
// lease is taken, one by one.
type ManyReader interface {
	// ReadMany returns what it read of each of ids, by id; an id with no
	// record is left out. It may read ids in several round trips.
	ReadMany(ctx context.Context, ids []string) (map[string]Read, error)
}

// Read is what a ManyReader read of one delegation.
type Read struct {
	Record Record
	// Last is the last event of the delegation's log; nil when the log
	// is empty, or the store did not read it: the engine then reads the
	// log itself.
	Last *Event
}

// QuickStore is an EndedStore that may keep a delegation which ended as
// it started after its caller has the answer: the agent's work is over,
// and what is kept is the record of an exchange the caller already holds.
// The engine uses it, for that delegation only, when its Store implements
// it; work that goes on is acknowledged only once durable, as ever.
type QuickStore interface {
	EndedStore
	// QueueEnded keeps what PutEnded keeps, the whole log from Seq 1 and
	// the record in a terminal state, but may return before they are
	// durable: they are then written within the store's lag, together
	// with other writes, and the store's reads wait for them. When it
	// cannot queue them (its queue is full, or it takes none) it writes
	// them as PutEnded does before it returns. An error means they were
	// neither queued nor kept.
	QueueEnded(ctx context.Context, r Record, evs []Event) error
}

// LogSealer is a Store that can seal a delegation's log against the
// writes its earlier holder sent before it lost the delegation: a write
// a network held while both ends of the connection stayed open reaches
// the store once the network is back, maybe after another process took
// the delegation over and read its log. The engine seals the log of each
// delegation it takes over from another process, after taking its lease
// and before reading it, when its Store implements LogSealer; an event
// of the earlier holder's that arrives after the seal is refused, and
// one that arrived before it is in the log the engine reads.
type LogSealer interface {
	// Seal makes every later write to the delegation's log that expects
	// the log as it was before the seal fail. Readers of the log see
	// nothing of it.
	Seal(ctx context.Context, id string) error
}

// StepStore is a Store that keeps one step of a delegation, an event and
// the record as it stands after it, in one round trip instead of an
// Append and a Put, each waiting for the one before. The engine uses it
// when its Store implements it, for each event it emits with none before
// it left unsaved: a steering signal, an agent's status or artifact.
type StepStore interface {
	Store
	// PutStep appends ev to the delegation's log as Append does, and puts
	// r as Put does. It returns nil once both are durable. On an error
	// either may have been kept: an Append of ev and a Put of r after it
	// complete the step, never doubling the event.
	PutStep(ctx context.Context, r Record, ev Event) error
}

// Query selects a page of records.
type Query struct {
	// State keeps only the records in that state; unspecified keeps all.
	State a2a.TaskState
	// PageSize bounds the page: 1 to MaxPageSize, 0 meaning
	// DefaultPageSize.
	PageSize int
	// PageToken is the NextPageToken of the previous page; empty starts
	// with the newest record.
	PageToken string
	// Visible, when set, keeps only the records it reports true for (the
	// ones the caller may read); a page is filled from those.
	Visible func(Record) bool
}

// Keeps reports whether the query keeps r: its state, and Visible.
func (q Query) Keeps(r Record) bool {
	return (q.State == a2a.TaskStateUnspecified || r.State == q.State) && (q.Visible == nil || q.Visible(r))
}

// Page is one page of records.
type Page struct {
	// Records are the page's records, newest first.
	Records []Record
	// NextPageToken continues the listing; empty on the last page.
	NextPageToken string
}

// Paging bounds of [Query].
const (
	DefaultPageSize = 50
	MaxPageSize     = 1000
)

// ErrBadPageToken means a Query's PageToken was not one a List returned.
var ErrBadPageToken = errors.New("invalid page token")

// ErrUnavailable means the store could not keep or read state. The
// engine refuses new work while it is unavailable rather than accept what
// it cannot keep.
var ErrUnavailable = errors.New("state store unavailable")

// unavailable reports whether err is the store's being out of reach
// (ErrUnavailable), for the outage logs.
func unavailable(err error) bool { return errors.Is(err, ErrUnavailable) }

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
	// logs are the event logs, each bounded to maxEvents; a log goes with
	// its record.
	logs      map[string]*memoryLog
	maxEvents int
}

// stored is a record and whether its id is queued in ended.
type stored struct {
	Record
	queued bool
}

// NewMemoryStore returns an empty MemoryStore keeping at most max records;
// max <= 0 means DefaultMemoryRecords. Each record's event log keeps its
// latest DefaultMaxEvents events.
func NewMemoryStore(max int) *MemoryStore {
	if max <= 0 {
		max = DefaultMemoryRecords
	}
	return &MemoryStore{records: map[string]stored{}, max: max, logs: map[string]*memoryLog{}, maxEvents: DefaultMaxEvents}
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
		s.evictOneLocked()
	}
	return nil
}

// evictOneLocked takes the next id off the ended queue and forgets its record,
// unless the record runs again. Callers hold mu and check the queue is not
// empty.
func (s *MemoryStore) evictOneLocked() {
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
			delete(s.logs, id)
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

// ReadMany implements ManyReader.
func (s *MemoryStore) ReadMany(_ context.Context, ids []string) (map[string]Read, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]Read, len(ids))
	for _, id := range ids {
		r, ok := s.records[id]
		if !ok {
			continue
		}
		read := Read{Record: r.Record}
		if l := s.logs[id]; l != nil && len(l.events) > 0 {
			last := l.events[len(l.events)-1]
			read.Last = &last
		}
		out[id] = read
	}
	return out, nil
}

// List implements Store. It sorts the kept records on each call: the
// memory store is for throwaway runs, bounded to a few thousand records.
func (s *MemoryStore) List(_ context.Context, q Query) (Page, error) {
	size, err := q.size()
	if err != nil {
		return Page{}, err
	}
	var after *cursor
	if q.PageToken != "" {
		c, err := parseCursor(q.PageToken)
		if err != nil {
			return Page{}, err
		}
		after = &c
	}
	s.mu.RLock()
	out := make([]Record, 0, len(s.records))
	for _, r := range s.records {
		if q.Keeps(r.Record) && (after == nil || after.before(r.Record)) {
			out = append(out, r.Record)
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(out, newestFirst)
	var p Page
	if len(out) > size {
		out = out[:size]
		p.NextPageToken = cursorOf(out[size-1]).String()
	}
	p.Records = out
	return p, nil
}

// newestFirst orders records as List returns them: newest first, then by
// id.
func newestFirst(a, b Record) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

// Append implements Store.
func (s *MemoryStore) Append(_ context.Context, id string, ev Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[id]
	if l == nil {
		l = &memoryLog{}
		s.logs[id] = l
	}
	if last := l.first + int64(len(l.events)) - 1; len(l.events) > 0 && ev.Seq <= last {
		return nil // a retried append
	}
	if len(l.events) == 0 {
		l.first = ev.Seq
	}
	l.events = append(l.events, ev)
	if over := len(l.events) - s.maxEvents; over > 0 {
		l.events = slices.Delete(l.events, 0, over)
		l.first += int64(over)
	}
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
	return nil
}

// Events implements Store.
func (s *MemoryStore) Events(_ context.Context, id string, after int64, limit int) ([]Event, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	l := s.logs[id]
	if l == nil {
		return nil, nil
	}
	start := max(after+1-l.first, 0)
	if start >= int64(len(l.events)) {
		return nil, nil
	}
	evs := l.events[start:]
	if limit > 0 && len(evs) > limit {
		evs = evs[:limit]
	}
	return slices.Clone(evs), nil
}

// Wait implements Store.
func (s *MemoryStore) Wait(ctx context.Context, id string, after int64) error {
	for {
		s.mu.Lock()
		l := s.logs[id]
		if l == nil {
			l = &memoryLog{}
			s.logs[id] = l
		}
		if len(l.events) > 0 && l.first+int64(len(l.events))-1 > after {
			s.mu.Unlock()
			return nil
		}
		if l.changed == nil {
			l.changed = make(chan struct{})
		}
		changed := l.changed
		s.mu.Unlock()
		select {
		case <-changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Running implements Store.
func (s *MemoryStore) Running(context.Context) ([]string, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var ids []string
	for id, r := range s.records {
		if !r.State.Terminal() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// memoryLog is one delegation's event log in a MemoryStore: the latest
// events, the first at Seq first, and a channel closed at the next append.
type memoryLog struct {
	events []Event
	first  int64
	// changed is closed at the next append; nil until someone waits.
	changed chan struct{}
}

var (
	_ Store      = (*MemoryStore)(nil)
	_ ManyReader = (*MemoryStore)(nil)
)
