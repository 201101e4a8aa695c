package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/delegation"
)

// Defaults of TasksConfig.
const (
	// DefaultTasksBucket is the key-value bucket orchd keeps A2A tasks in.
	DefaultTasksBucket = "orchd-tasks"
	// DefaultTaskRetention is how long an ended task stays readable.
	DefaultTaskRetention = 7 * 24 * time.Hour
	// DefaultMaxTaskBytes bounds one stored task. It is lowered to what
	// the NATS server accepts in one message when that is less.
	DefaultMaxTaskBytes = 8 << 20
	// DefaultMaxListEntries bounds the index entries one List reads.
	DefaultMaxListEntries = 10_000
	// DefaultTaskTimeout bounds one store operation.
	DefaultTaskTimeout = 5 * time.Second
	// DefaultTaskRideOut is how long a versioned update waits for an
	// unavailable store: past a NATS cluster's election (up to 9 s) and
	// a server's restart.
	DefaultTaskRideOut = 30 * time.Second
)

// Limits the store keeps whatever the configuration says.
const (
	// maxTaskIDBytes bounds a task id; a longer one is refused on Create
	// and is not found by Get or Update.
	maxTaskIDBytes = 512
	// taskPayloadHeadroom is left under the server's max_payload for the
	// headers a write carries (expected sequence, TTL).
	taskPayloadHeadroom = 1 << 10
	// taskMarkerTTL is how long the bucket keeps the marker of an expired
	// or purged key, so watchers see the expiry; the marker then goes too.
	taskMarkerTTL = time.Minute
	// blindUpdateAttempts bounds the read-and-swap rounds of an Update
	// that does not name the version it replaces.
	blindUpdateAttempts = 8
	// taskRecordVersion is the version of the stored record's layout.
	taskRecordVersion = 1
)

// ErrTaskTooLarge is returned by Create and Update for a task whose stored
// record would be larger than TasksConfig.MaxTaskBytes.
var ErrTaskTooLarge = errors.New("task too large")

// ErrTooManyTasks is returned by List when the caller owns more stored
// tasks than TasksConfig.MaxListEntries: the newest of them cannot be told
// without reading all, so List refuses rather than answer a wrong page.
var ErrTooManyTasks = errors.New("too many tasks to list")

// errTaskRevMismatch is what a compare-and-swap that lost reports inside
// this file, whichever write path it took.
var errTaskRevMismatch = errors.New("task revision mismatch")

// TasksConfig configures Tasks. The zero value is usable: every field has
// a default.
type TasksConfig struct {
	// Bucket is the key-value bucket; DefaultTasksBucket when empty.
	Bucket string
	// Replicas is how many servers keep the bucket (1 to 5); 1 when 0.
	Replicas int
	// Retention is how long a task stays after it ended (COMPLETED,
	// FAILED, CANCELED or REJECTED); DefaultTaskRetention when 0. It
	// counts in whole seconds on the NATS server's clock and must be at
	// least one second. Tasks that have not ended never expire.
	Retention time.Duration
	// MaxTaskBytes bounds one stored task record (its JSON and a small
	// header); larger writes fail with ErrTaskTooLarge. When 0 it is
	// DefaultMaxTaskBytes or, if less, what the connected server takes in
	// one message; a value above the latter is refused by NewTasks.
	MaxTaskBytes int
	// MaxListEntries bounds the index entries one List reads, that is the
	// stored tasks of one user; beyond it List fails with ErrTooManyTasks.
	// DefaultMaxListEntries when 0.
	MaxListEntries int
	// MaxBucketBytes caps the bucket's size on the server; writes beyond
	// it fail. When 0 the bucket is bounded only by the server's
	// JetStream store limit.
	MaxBucketBytes int64
	// Timeout bounds each store operation; DefaultTaskTimeout when 0.
	Timeout time.Duration
	// RideOut is how long an update naming the version it replaces (as
	// a2a-go stores each event of an execution) tries again while the
	// store is unavailable, each try bounded by Timeout;
	// DefaultTaskRideOut when 0, none when negative.
	RideOut time.Duration
	// Hints bounds the tasks whose owner and revision this process
	// remembers, so an update naming the revision it replaces swaps
	// without reading the task first: one round trip instead of two for
	// each event of a task remembered. Tasks that ended are not kept.
	// Set it above the tasks served at once; DefaultHints when 0, at
	// most MaxHints.
	Hints int
	// Authenticator names the user a call acts for; tasks belong to the
	// user who created them. a2asrv.NewTaskStoreAuthenticator() when nil,
	// as in a2a-go's own handler.
	Authenticator taskstore.Authenticator
	// LegacyUser names the owner of a task stored before user names were
	// marked as unambiguous (a header without "users": 1): the task
	// belongs to LegacyUser(its stored user). orchd's names changed form
	// then, and an earlier name could equal a later one of another
	// caller; LegacyUser maps earlier names out of the callers' reach.
	// Nil keeps stored names as they are.
	LegacyUser func(user string) string
	// Now is the clock of the tasks' last-update times, which List sorts
	// and pages by; time.Now when nil.
	Now func() time.Time
	// Logger receives what the store cannot return: a failed index write
	// after its task was stored. Discarded when nil.
	Logger *slog.Logger
}

// Tasks is an a2a-go task store (taskstore.Store) on a JetStream key-value
// bucket, so orchd's A2A tasks survive restarts and are shared by every
// orchd on the same NATS cluster.
//
// Each task is one key, t.<id> (an id with characters other than letters,
// digits, "-" and "_" is written "=" and its base64url form), whose value is
// a one-line header (layout version, owner, last update) and the task in
// a2a-go's JSON, the encoding A2A clients see. The key's revision is the task's version: Create is a
// create-if-absent, and Update a compare-and-swap on the version the
// caller read, so of concurrent writers of one version exactly one wins
// and the others get taskstore.ErrConcurrentModification. Get decodes the
// stored JSON afresh, so callers may change what they get; nothing else is
// copied.
//
// Owners: the header names the user a task belongs to, marked as a name
// of today's form; a task stored before the mark belongs to
// TasksConfig.LegacyUser of its stored user, as do its index entries.
//
// Retention: a task that has ended is written with a per-key TTL of
// Retention, so it vanishes that long after its last write; a task that
// has not ended is written without one and stays, also when the process
// running it died: such a task stays WORKING until something ends it. (A
// key-value Update
// cannot carry a TTL and would clear it, so ended tasks are written by
// publishing on the key's subject with the TTL and the expected revision.)
//
// Listing: each write of a task owned by a named user also writes a small
// index entry, u.<user hash>.<id>, holding what List filters and sorts by;
// List reads only the caller's entries, at most MaxListEntries of them,
// then the tasks of the page. An index entry carries the same TTL as its
// task and is written only while the task is still at the revision it
// describes, so a slow writer never overwrites a newer entry. Should the
// entry's write fail after its task was stored, the task is still stored
// (Update reports success and logs), and List repairs what it meets: an
// entry whose task is gone is removed, and a listed task shows its stored
// state. Tasks of the empty user are not indexed, since List refuses an
// unnamed caller.
//
// Behaviour differs from taskstore.InMemory in these ways, on purpose:
//   - versions are the bucket's revisions: increasing per task, not 1, 2, 3;
//   - metadata and data parts come back as JSON decodes them (float64,
//     []any, map[string]any), as A2A clients see them; integers beyond
//     2^53 lose precision; values JSON cannot encode (NaN, cycles) are
//     refused, while InMemory's checks refuse uint and struct values;
//   - a part with no content JSON keeps (nil content, nil data or raw
//     bytes, an empty URL) is refused, since the task could not be read
//     back;
//   - an empty task id, or one over 512 bytes, is refused by Create;
//   - an Update that names no version (taskstore.TaskVersionMissing)
//     swaps on the version it reads, a bounded number of times, instead of
//     overwriting blindly;
//   - page tokens have InMemory's form, but also work for ids with "_";
//   - ended tasks expire, and List is bounded by MaxListEntries.
//
// Errors of a store that cannot be reached or cannot keep a write wrap
// delegation.ErrUnavailable, with the operation and task id as context and
// nothing of the task's content; a2a-go's handler answers them as internal
// errors. A Tasks is safe for concurrent use.
type Tasks struct {
	js  jetstream.JetStream
	kv  jetstream.KeyValue
	cfg TasksConfig
	// subjects is the bucket's subject prefix, "$KV.<bucket>.".
	subjects string
	// owners remembers which user owned a task at a revision seen here,
	// so an Update naming that revision can swap without reading first:
	// if the swap succeeds the stored task was that very revision.
	owners *lru.Cache[a2a.TaskID, taskOwner]
}

var _ taskstore.Store = (*Tasks)(nil)

// taskOwner is a task's owner as seen at one revision.
type taskOwner struct {
	rev  uint64
	user string
}

// taskHeader is the first line of a stored task.
type taskHeader struct {
	V    int    `json:"v"`
	User string `json:"user"`
	// Users is taskUsersMarked when User was written as this store writes
	// names now; 0 in tasks stored before, whose owner is then
	// TasksConfig.LegacyUser(User).
	Users   int       `json:"users,omitempty"`
	Updated time.Time `json:"updated"`
}

// taskUsersMarked marks a header whose user is a name of today's form.
const taskUsersMarked = 1

// ownerOf returns the user a task belongs to whose header or index entry
// holds user, marked with users.
func (t *Tasks) ownerOf(user string, users int) string {
	if users == taskUsersMarked || t.cfg.LegacyUser == nil {
		return user
	}
	return t.cfg.LegacyUser(user)
}

// taskIndexEntry is a user's index entry for one task: what List filters,
// sorts and pages by.
type taskIndexEntry struct {
	ID        a2a.TaskID    `json:"id"`
	ContextID string        `json:"contextId,omitempty"`
	State     a2a.TaskState `json:"state"`
	Timestamp *time.Time    `json:"timestamp,omitempty"`
	Updated   time.Time     `json:"updated"`
	User      string        `json:"user"`
	// Users marks User as the task's header does.
	Users int `json:"users,omitempty"`

	// key and rev locate the entry in the bucket; not stored.
	key string
	rev uint64
}

// NewTasks opens the task store on js, creating or updating its bucket.
func NewTasks(ctx context.Context, js jetstream.JetStream, cfg TasksConfig) (*Tasks, error) {
	if js == nil {
		return nil, errors.New("tasks: no JetStream")
	}
	if err := cfg.withDefaults(js.Conn().MaxPayload()); err != nil {
		return nil, err
	}
	opCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	kv, err := openKV(opCtx, js, cfg.bucket())
	if err != nil {
		return nil, fmt.Errorf("tasks: open bucket %s: %w", cfg.Bucket, unavailable(ctx, err))
	}
	return newTasksOn(js, kv, cfg)
}

// Tasks opens the A2A task store in the Store's namespace (bucket
// <namespace>-tasks unless cfg names one, with the Store's replicas,
// retention and timeout where cfg leaves them zero), retrying while a
// cluster settles, as every bucket the Store sets up.
func (s *Store) Tasks(ctx context.Context, cfg TasksConfig) (*Tasks, error) {
	s.inherit(&cfg.Bucket, "-tasks", &cfg.Replicas, &cfg.Retention, &cfg.Timeout)
	if cfg.RideOut == 0 {
		cfg.RideOut = s.cfg.TaskRideOut
	}
	if err := cfg.withDefaults(s.nc.MaxPayload()); err != nil {
		return nil, err
	}
	kv, err := s.ensureKV(ctx, cfg.bucket())
	if err != nil {
		return nil, fmt.Errorf("tasks: open bucket %s: %w", cfg.Bucket, err)
	}
	return newTasksOn(s.js, kv, cfg)
}

// bucket is the configuration of the bucket c keeps tasks in; c has its
// defaults.
func (c *TasksConfig) bucket() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:         c.Bucket,
		Description:    "orchd A2A tasks and their per-user index",
		History:        1,
		Storage:        jetstream.FileStorage,
		Replicas:       c.Replicas,
		MaxValueSize:   int32(c.MaxTaskBytes),
		MaxBytes:       c.MaxBucketBytes,
		LimitMarkerTTL: taskMarkerTTL,
	}
}

// newTasksOn is the store on kv, a bucket made from cfg.bucket().
func newTasksOn(js jetstream.JetStream, kv jetstream.KeyValue, cfg TasksConfig) (*Tasks, error) {
	owners, err := lru.New[a2a.TaskID, taskOwner](cfg.Hints)
	if err != nil {
		return nil, fmt.Errorf("tasks: owner cache: %w", err)
	}
	return &Tasks{js: js, kv: kv, cfg: cfg, subjects: "$KV." + cfg.Bucket + ".", owners: owners}, nil
}

// withDefaults fills the zero fields of c and checks the rest; maxPayload
// is what the connected server takes in one message.
func (c *TasksConfig) withDefaults(maxPayload int64) error {
	if c.Bucket == "" {
		c.Bucket = DefaultTasksBucket
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Replicas < 1 || c.Replicas > 5 {
		return fmt.Errorf("tasks: replicas %d: want 1 to 5", c.Replicas)
	}
	if c.Retention == 0 {
		c.Retention = DefaultTaskRetention
	}
	if c.Retention < time.Second {
		return fmt.Errorf("tasks: retention %s: want at least 1s (the server counts TTLs in whole seconds)", c.Retention)
	}
	limit := int(maxPayload) - taskPayloadHeadroom
	switch {
	case c.MaxTaskBytes == 0:
		c.MaxTaskBytes = min(DefaultMaxTaskBytes, limit)
	case c.MaxTaskBytes < 0:
		return fmt.Errorf("tasks: max task bytes %d is negative", c.MaxTaskBytes)
	case c.MaxTaskBytes > limit:
		return fmt.Errorf("tasks: max task bytes %d exceeds the %d a message of the NATS server can carry (max_payload %d less %d for headers)",
			c.MaxTaskBytes, limit, maxPayload, taskPayloadHeadroom)
	}
	if c.MaxTaskBytes < 1 {
		return fmt.Errorf("tasks: the NATS server's max_payload %d leaves no room for a task", maxPayload)
	}
	if c.MaxListEntries == 0 {
		c.MaxListEntries = DefaultMaxListEntries
	}
	if c.MaxListEntries < 0 {
		return fmt.Errorf("tasks: max list entries %d is negative", c.MaxListEntries)
	}
	if c.MaxBucketBytes < 0 {
		return fmt.Errorf("tasks: max bucket bytes %d is negative", c.MaxBucketBytes)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTaskTimeout
	}
	if c.Timeout < 0 {
		return fmt.Errorf("tasks: timeout %s is negative", c.Timeout)
	}
	if c.RideOut == 0 {
		c.RideOut = DefaultTaskRideOut
	}
	if c.Hints == 0 {
		c.Hints = DefaultHints
	}
	if c.Hints < 1 || c.Hints > MaxHints {
		return fmt.Errorf("tasks: hints %d is not between 1 and %d", c.Hints, MaxHints)
	}
	if c.Authenticator == nil {
		c.Authenticator = a2asrv.NewTaskStoreAuthenticator()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// Create stores a new task owned by the calling user. It returns
// taskstore.ErrTaskAlreadyExists when a task with its id is stored,
// whoever owns it.
func (t *Tasks) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	if task == nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("create task: no task: %w", a2a.ErrInvalidParams)
	}
	tok, err := taskToken(task.ID)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("create task: %w", err)
	}
	user, err := t.cfg.Authenticator(ctx)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("create task %q: authenticate: %w", task.ID, err)
	}
	now := t.cfg.Now()
	value, err := t.encode(user, now, task)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("create task %q: %w", task.ID, err)
	}
	opCtx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	ttl := t.ttl(task)
	var opts []jetstream.KVCreateOpt
	if ttl > 0 {
		opts = append(opts, jetstream.KeyTTL(ttl))
	}
	rev, err := t.kv.Create(opCtx, "t."+tok, value, opts...)
	if errors.Is(err, jetstream.ErrKeyExists) {
		return taskstore.TaskVersionMissing, fmt.Errorf("create task %q: %w", task.ID, taskstore.ErrTaskAlreadyExists)
	}
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("create task %q: %w", task.ID, unavailable(ctx, err))
	}
	t.remember(task.ID, task.Status.State, taskOwner{rev: rev, user: user})
	t.index(opCtx, user, tok, task, now, rev, ttl)
	return taskstore.TaskVersion(rev), nil
}

// Update replaces a task of the calling user. It returns a2a.ErrTaskNotFound
// when no such task is stored or another user owns it, and
// taskstore.ErrConcurrentModification when the stored version is not
// req.PrevVersion. A req.PrevVersion of taskstore.TaskVersionMissing means
// the caller does not track versions: the store then reads the current
// version and swaps on it, so a task is never resurrected after it
// expired, never changes owner and never loses an ended state's TTL to a
// racing write; after a bounded number of lost swaps it too returns
// taskstore.ErrConcurrentModification.
func (t *Tasks) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	if req == nil || req.Task == nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("update task: no task: %w", a2a.ErrInvalidParams)
	}
	id := req.Task.ID
	tok, err := taskToken(id)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("update task: %w", a2a.ErrTaskNotFound)
	}
	user, err := t.cfg.Authenticator(ctx)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("update task %q: authenticate: %w", id, err)
	}
	now := t.cfg.Now()
	value, err := t.encode(user, now, req.Task)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("update task %q: %w", id, err)
	}
	key, ttl := "t."+tok, t.ttl(req.Task)

	var rev uint64
	if prev := uint64(req.PrevVersion); req.PrevVersion != taskstore.TaskVersionMissing {
		if rev, err = t.updateRidingOut(ctx, id, key, user, value, prev, ttl); err != nil {
			return taskstore.TaskVersionMissing, err
		}
	} else {
		opCtx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
		defer cancel()
		for attempt := 0; ; attempt++ {
			if attempt == blindUpdateAttempts {
				return taskstore.TaskVersionMissing, fmt.Errorf("update task %q: changed under %d writes naming no version: %w", id, attempt, taskstore.ErrConcurrentModification)
			}
			cur, err := t.owner(opCtx, key, user)
			if err != nil {
				return taskstore.TaskVersionMissing, fmt.Errorf("update task %q: %w", id, unavailable(ctx, err))
			}
			rev, err = t.swap(opCtx, key, value, cur, ttl)
			if errors.Is(err, errTaskRevMismatch) {
				continue
			}
			if err != nil {
				return taskstore.TaskVersionMissing, fmt.Errorf("update task %q: %w", id, unavailable(ctx, err))
			}
			break
		}
	}
	t.remember(id, req.Task.Status.State, taskOwner{rev: rev, user: user})
	opCtx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	t.index(opCtx, user, tok, req.Task, now, rev, ttl)
	return taskstore.TaskVersion(rev), nil
}

// Updating a task through a moment the store is out of reach. a2a-go
// stores every event of an execution with the version it read; when that
// write fails, it marks the task FAILED, and when that write fails too,
// ends the execution with an error: the caller's stream ends, and the
// task stays as last stored while orchd's delegation goes on without
// it. A NATS cluster electing a leader after a node's crash refuses
// writes for up to 9 s. So a versioned update that fails for the store
// being unavailable is tried again for up to TasksConfig.RideOut,
// waiting taskRideOutFirst, doubling to taskRideOutMax, between tries;
// and a try that finds the task moved past the version it named checks
// whether the task holds the value it wrote, as when an earlier try was
// kept and only its acknowledgement was lost (nats.go sends a request
// made while it reconnects once it has, after the request timed out).
const (
	taskRideOutFirst = 100 * time.Millisecond
	taskRideOutMax   = 2 * time.Second
)

// updateRidingOut swaps value in at key over revision prev as
// updateOnce does, trying again while the store is unavailable, and
// returns the revision written.
func (t *Tasks) updateRidingOut(ctx context.Context, id a2a.TaskID, key, user string, value []byte, prev uint64, ttl time.Duration) (uint64, error) {
	giveUp := time.Now().Add(t.cfg.RideOut)
	wait := taskRideOutFirst
	for {
		rev, err := t.updateOnce(ctx, id, key, user, value, prev, ttl)
		if errors.Is(err, taskstore.ErrConcurrentModification) {
			if kept, ok := t.holds(ctx, key, value); ok {
				return kept, nil // value carries the update's time: it is this update's
			}
		}
		if err == nil || !errors.Is(err, delegation.ErrUnavailable) || ctx.Err() != nil || time.Now().Add(wait).After(giveUp) ||
			t.js.Conn().IsClosed() { // closed for good: no reconnection comes
			return rev, err
		}
		select {
		case <-ctx.Done():
			return rev, err
		case <-time.After(wait):
		}
		wait = min(2*wait, taskRideOutMax)
	}
}

// updateOnce swaps value in at key over revision prev, one try bounded
// by the store's timeout. It fails with ErrConcurrentModification when
// the task is at another revision, and with a2a.ErrTaskNotFound when it
// is gone or another user's.
func (t *Tasks) updateOnce(ctx context.Context, id a2a.TaskID, key, user string, value []byte, prev uint64, ttl time.Duration) (uint64, error) {
	opCtx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	if o, ok := t.owners.Get(id); !ok || o.rev != prev || o.user != user {
		cur, err := t.owner(opCtx, key, user)
		if err != nil {
			return 0, fmt.Errorf("update task %q: %w", id, unavailable(ctx, err))
		}
		if cur != prev {
			return 0, fmt.Errorf("update task %q: version %d is not the stored %d: %w", id, prev, cur, taskstore.ErrConcurrentModification)
		}
	}
	rev, err := t.swap(opCtx, key, value, prev, ttl)
	if errors.Is(err, errTaskRevMismatch) {
		// Lost: tell a gone or foreign task from a newer version.
		if _, err := t.owner(opCtx, key, user); err != nil {
			return 0, fmt.Errorf("update task %q: %w", id, unavailable(ctx, err))
		}
		return 0, fmt.Errorf("update task %q: version %d is not the stored one: %w", id, prev, taskstore.ErrConcurrentModification)
	}
	if err != nil {
		return 0, fmt.Errorf("update task %q: %w", id, unavailable(ctx, err))
	}
	return rev, nil
}

// holds reports whether key holds value, and at which revision.
func (t *Tasks) holds(ctx context.Context, key string, value []byte) (uint64, bool) {
	opCtx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	entry, err := t.kv.Get(opCtx, key)
	if err != nil || !bytes.Equal(entry.Value(), value) {
		return 0, false
	}
	return entry.Revision(), true
}

// remember notes that user owned task id at rev, so that the update
// naming that revision swaps without reading first. A task in an ended
// state is forgotten instead: it is seldom updated again, and the tasks
// that end, by the thousand a second, would push out those still
// running, each of whose updates the hint saves a round trip.
func (t *Tasks) remember(id a2a.TaskID, state a2a.TaskState, o taskOwner) {
	if state.Terminal() {
		t.owners.Remove(id)
		return
	}
	t.owners.Add(id, o)
}

// MaxTaskBytes is the largest task record the store keeps
// (TasksConfig.MaxTaskBytes, after its default).
func (t *Tasks) MaxTaskBytes() int { return t.cfg.MaxTaskBytes }

// Get returns a fresh copy of a task of the calling user, with its version
// and owner. It returns a2a.ErrTaskNotFound when no such task is stored or
// another user owns it.
func (t *Tasks) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	tok, err := taskToken(id)
	if err != nil {
		return nil, fmt.Errorf("get task: %w", a2a.ErrTaskNotFound)
	}
	opCtx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	entry, err := t.kv.Get(opCtx, "t."+tok)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("get task %q: %w", id, a2a.ErrTaskNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get task %q: %w", id, unavailable(ctx, err))
	}
	hdr, body, err := splitTaskRecord(entry.Value())
	if err != nil {
		return nil, fmt.Errorf("get task %q: %w", id, err)
	}
	user, err := t.cfg.Authenticator(ctx)
	if err != nil {
		return nil, fmt.Errorf("get task %q: authenticate: %w", id, err)
	}
	owner := t.ownerOf(hdr.User, hdr.Users)
	if owner != user {
		return nil, fmt.Errorf("get task %q: %w", id, a2a.ErrTaskNotFound)
	}
	task := &a2a.Task{}
	if err := json.Unmarshal(body, task); err != nil {
		return nil, fmt.Errorf("get task %q: decode: %w", id, err)
	}
	t.remember(id, task.Status.State, taskOwner{rev: entry.Revision(), user: owner})
	return &taskstore.StoredTask{Task: task, Version: taskstore.TaskVersion(entry.Revision()), User: owner}, nil
}

// List returns a page of the calling user's tasks, newest update first, as
// taskstore.InMemory does: filtered by context, state and status time,
// paged by PageSize (1 to 100, 50 when 0) and PageToken, each task's
// history cut to HistoryLength (100 when unset, all when negative) and its
// artifacts dropped unless IncludeArtifacts. It returns
// a2a.ErrUnauthenticated for an unnamed caller and ErrTooManyTasks when the
// caller owns more than MaxListEntries stored tasks.
func (t *Tasks) List(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	l, user, err := newTaskListing(ctx, t.cfg.Authenticator, req)
	if err != nil {
		return nil, err
	}
	opCtx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	entries, err := t.readIndex(opCtx, user)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", unavailable(ctx, err))
	}
	owns := func(e *taskIndexEntry) bool { return t.ownerOf(e.User, e.Users) == user }
	return l.page(entries, owns, func(e *taskIndexEntry) (*a2a.Task, error) {
		task, err := t.listed(opCtx, user, e)
		if err != nil {
			return nil, fmt.Errorf("list tasks: %w", unavailable(ctx, err))
		}
		return task, nil
	})
}

// taskListing is a List request, checked: what Tasks and MemoryTasks
// answer alike once each has the caller's index entries.
type taskListing struct {
	req      *a2a.ListTasksRequest
	pageSize int
	after    *taskIndexEntry // from the page token; nil for the first page
}

// newTaskListing checks a List call: its caller, whom auth must name
// (else a2a.ErrUnauthenticated), and req's page size and token. It
// returns the listing and the caller.
func newTaskListing(ctx context.Context, auth taskstore.Authenticator, req *a2a.ListTasksRequest) (taskListing, string, error) {
	const defaultPageSize = 50
	user, err := auth(ctx)
	if user == "" || err != nil {
		return taskListing{}, "", a2a.ErrUnauthenticated
	}
	if req == nil {
		req = &a2a.ListTasksRequest{}
	}
	l := taskListing{req: req, pageSize: req.PageSize}
	if l.pageSize == 0 {
		l.pageSize = defaultPageSize
	} else if l.pageSize < 1 || l.pageSize > 100 {
		return taskListing{}, "", fmt.Errorf("page size must be between 1 and 100 inclusive, got %d: %w", l.pageSize, a2a.ErrInvalidRequest)
	}
	if req.PageToken != "" {
		if l.after, err = decodeTaskPageToken(req.PageToken); err != nil {
			return taskListing{}, "", err
		}
	}
	return l, user, nil
}

// page answers the listing from entries: those owns keeps and the
// request's filters match, newest update first, the page after the token;
// read returns the task of each entry of the page (nil: skip it), whose
// history and artifacts page then trims as asked.
func (l taskListing) page(entries []*taskIndexEntry, owns func(*taskIndexEntry) bool, read func(*taskIndexEntry) (*a2a.Task, error)) (*a2a.ListTasksResponse, error) {
	const defaultMaxHistory = 100
	req := l.req
	entries = slices.DeleteFunc(entries, func(e *taskIndexEntry) bool {
		return !owns(e) ||
			(req.ContextID != "" && e.ContextID != req.ContextID) ||
			(req.Status != a2a.TaskStateUnspecified && e.State != req.Status) ||
			(req.StatusTimestampAfter != nil && e.Timestamp != nil && e.Timestamp.Before(*req.StatusTimestampAfter))
	})
	slices.SortFunc(entries, func(a, b *taskIndexEntry) int {
		if c := b.Updated.Compare(a.Updated); c != 0 {
			return c
		}
		return strings.Compare(string(b.ID), string(a.ID))
	})
	total := len(entries)
	page := entries
	if l.after != nil {
		page = entries[sort.Search(len(entries), func(i int) bool {
			if c := entries[i].Updated.Compare(l.after.Updated); c != 0 {
				return c < 0
			}
			return entries[i].ID < l.after.ID
		}):]
	}
	var next string
	if len(page) > l.pageSize {
		page = page[:l.pageSize]
		last := page[l.pageSize-1]
		next = encodeTaskPageToken(last.Updated, last.ID)
	}

	historyLength := defaultMaxHistory
	if req.HistoryLength != nil {
		historyLength = *req.HistoryLength
	}
	var tasks []*a2a.Task
	for _, e := range page {
		task, err := read(e)
		if err != nil {
			return nil, err
		}
		if task == nil {
			continue
		}
		if historyLength == 0 {
			task.History = []*a2a.Message{}
		} else if historyLength > 0 && len(task.History) > historyLength {
			task.History = task.History[len(task.History)-historyLength:]
		}
		if !req.IncludeArtifacts {
			task.Artifacts = nil
		}
		tasks = append(tasks, task)
	}
	return &a2a.ListTasksResponse{Tasks: tasks, TotalSize: total, PageSize: l.pageSize, NextPageToken: next}, nil
}

// listed reads the task an index entry of user points at: nil when it is
// gone (its entry is then removed) or, against all odds, not user's.
func (t *Tasks) listed(ctx context.Context, user string, e *taskIndexEntry) (*a2a.Task, error) {
	tok := e.key[strings.LastIndexByte(e.key, '.')+1:]
	entry, err := t.kv.Get(ctx, "t."+tok)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		// Only this revision of the entry: a newer one describes a task
		// written meanwhile.
		if err := t.kv.Purge(ctx, e.key, jetstream.LastRevision(e.rev), jetstream.PurgeTTL(taskMarkerTTL)); err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			t.cfg.Logger.Warn("remove index entry of a gone task", "task", e.ID, "error", err)
		}
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read task %q: %w", e.ID, err)
	}
	hdr, body, err := splitTaskRecord(entry.Value())
	if err != nil {
		return nil, fmt.Errorf("read task %q: %w", e.ID, err)
	}
	if t.ownerOf(hdr.User, hdr.Users) != user {
		return nil, nil
	}
	task := &a2a.Task{}
	if err := json.Unmarshal(body, task); err != nil {
		return nil, fmt.Errorf("read task %q: decode: %w", e.ID, err)
	}
	return task, nil
}

// readIndex reads every index entry of user, at most MaxListEntries.
func (t *Tasks) readIndex(ctx context.Context, user string) ([]*taskIndexEntry, error) {
	w, err := t.kv.Watch(ctx, "u."+userToken(user)+".>", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("read index: %w", err)
	}
	defer stopWatch(w, listDrainWait)
	var entries []*taskIndexEntry
	err = readInitial(ctx, w, func(kve jetstream.KeyValueEntry) error {
		if len(entries) == t.cfg.MaxListEntries {
			return fmt.Errorf("more than %d stored tasks of this user: %w", t.cfg.MaxListEntries, ErrTooManyTasks)
		}
		e := &taskIndexEntry{key: kve.Key(), rev: kve.Revision()}
		if err := json.Unmarshal(kve.Value(), e); err != nil {
			t.cfg.Logger.Warn("skip undecodable index entry", "key", kve.Key(), "error", err)
			return nil
		}
		entries = append(entries, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read index: %w", err)
	}
	return entries, nil
}

// owner reads the stored version of the task at key and checks that user
// owns it: a2a.ErrTaskNotFound when it is gone or someone else's.
func (t *Tasks) owner(ctx context.Context, key, user string) (uint64, error) {
	entry, err := t.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, a2a.ErrTaskNotFound
	}
	if err != nil {
		return 0, err
	}
	hdr, _, err := splitTaskRecord(entry.Value())
	if err != nil {
		return 0, err
	}
	if t.ownerOf(hdr.User, hdr.Users) != user {
		return 0, a2a.ErrTaskNotFound
	}
	return entry.Revision(), nil
}

// swap writes value at key if the key's revision is prev, with the TTL
// ttl when it is not 0. It returns errTaskRevMismatch when it lost.
func (t *Tasks) swap(ctx context.Context, key string, value []byte, prev uint64, ttl time.Duration) (uint64, error) {
	if ttl == 0 {
		rev, err := t.kv.Update(ctx, key, value, prev)
		// Checked first: a revision mismatch also reads as ErrKeyExists.
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return 0, errTaskRevMismatch
		}
		return rev, err
	}
	// kv.Update sends no TTL, and a write without one clears the key's:
	// an ended task is published on its subject with both.
	ack, err := t.js.Publish(ctx, t.subjects+key, value,
		jetstream.WithMsgTTL(ttl), jetstream.WithExpectLastSequencePerSubject(prev))
	if isWrongLastSequence(err) {
		return 0, errTaskRevMismatch
	}
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// index writes user's index entry for task, stored at key t.<tok> and
// revision rev, with the task's TTL. It writes only while the task is
// still at rev, so an entry never goes back to an older state; a failure
// is logged, the task being stored already.
func (t *Tasks) index(ctx context.Context, user, tok string, task *a2a.Task, updated time.Time, rev uint64, ttl time.Duration) {
	if user == "" {
		return
	}
	b, err := json.Marshal(taskIndexEntry{ID: task.ID, ContextID: task.ContextID, State: task.Status.State,
		Timestamp: task.Status.Timestamp, Updated: updated, User: user, Users: taskUsersMarked})
	if err != nil {
		t.cfg.Logger.Warn("encode task index entry", "task", task.ID, "error", err)
		return
	}
	opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequenceForSubject(rev, t.subjects+"t."+tok)}
	if ttl > 0 {
		opts = append(opts, jetstream.WithMsgTTL(ttl))
	}
	_, err = t.js.Publish(ctx, t.subjects+"u."+userToken(user)+"."+tok, b, opts...)
	if err != nil && !isWrongLastSequence(err) { // a mismatch: a newer write indexes itself
		t.cfg.Logger.Warn("index task", "task", task.ID, "error", err)
	}
}

// ttl is the TTL task is written with: Retention once it ended, else none.
func (t *Tasks) ttl(task *a2a.Task) time.Duration {
	if task.Status.State.Terminal() {
		return t.cfg.Retention
	}
	return 0
}

// encode lays out the stored record of task: a header line and the task's
// JSON. Both are single lines, since JSON escapes newlines in strings.
func (t *Tasks) encode(user string, updated time.Time, task *a2a.Task) ([]byte, error) {
	if err := taskPartsEncodable(task); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := newTaskEncoder(&buf)
	if err := enc.Encode(taskHeader{V: taskRecordVersion, User: user, Users: taskUsersMarked, Updated: updated}); err != nil {
		return nil, fmt.Errorf("encode header: %w", err)
	}
	if err := enc.Encode(task); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	if buf.Len() > t.cfg.MaxTaskBytes {
		return nil, fmt.Errorf("%d bytes stored, over the limit of %d: %w", buf.Len(), t.cfg.MaxTaskBytes, ErrTaskTooLarge)
	}
	return buf.Bytes(), nil
}

// newTaskEncoder writes a stored task's JSON to w as A2A clients see it,
// a line per value, with "<", ">" and "&" left as they are.
func newTaskEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc
}

// splitTaskRecord parses a stored record's header and returns the task's
// JSON after it.
func splitTaskRecord(v []byte) (taskHeader, []byte, error) {
	var hdr taskHeader
	i := bytes.IndexByte(v, '\n')
	if i < 0 {
		return hdr, nil, errors.New("stored task record has no header")
	}
	if err := json.Unmarshal(v[:i], &hdr); err != nil {
		return hdr, nil, fmt.Errorf("stored task header: %w", err)
	}
	if hdr.V != taskRecordVersion {
		return hdr, nil, fmt.Errorf("stored task record version %d, this orchd reads %d", hdr.V, taskRecordVersion)
	}
	return hdr, v[i+1:], nil
}

// taskPartsEncodable refuses parts a2a-go's JSON writes but cannot read
// back: no content, nil data, nil raw bytes, an empty URL.
func taskPartsEncodable(task *a2a.Task) error {
	check := func(where string, parts a2a.ContentParts) error {
		for i, p := range parts {
			if p == nil {
				continue
			}
			ok := false
			switch c := p.Content.(type) {
			case a2a.Text:
				ok = true
			case a2a.Raw:
				ok = c != nil
			case a2a.Data:
				ok = c.Value != nil
			case a2a.URL:
				ok = c != ""
			}
			if !ok {
				return fmt.Errorf("%s part %d has no content JSON can carry (%T): %w", where, i, p.Content, a2a.ErrInvalidParams)
			}
		}
		return nil
	}
	msg := func(where string, m *a2a.Message) error {
		if m == nil {
			return nil
		}
		return check(where, m.Parts)
	}
	if err := msg("status message", task.Status.Message); err != nil {
		return err
	}
	for i, m := range task.History {
		if err := msg(fmt.Sprintf("history message %d", i), m); err != nil {
			return err
		}
	}
	for i, a := range task.Artifacts {
		if a == nil {
			continue
		}
		if err := check(fmt.Sprintf("artifact %d", i), a.Parts); err != nil {
			return err
		}
	}
	return nil
}

// taskToken is the key token of a task id: the id itself when it is made
// of letters, digits, "-" and "_" (a UUID is), else "=" and its unpadded
// base64url form, which no plain id can be.
func taskToken(id a2a.TaskID) (string, error) {
	switch {
	case id == "":
		return "", fmt.Errorf("empty task id: %w", a2a.ErrInvalidParams)
	case len(id) > maxTaskIDBytes:
		return "", fmt.Errorf("task id of %d bytes, over %d: %w", len(id), maxTaskIDBytes, a2a.ErrInvalidParams)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return "=" + base64.RawURLEncoding.EncodeToString([]byte(id)), nil
		}
	}
	return string(id), nil
}

// userToken is the key token of a user's index: a hash, so any name fits
// a key and names do not show in subjects.
func userToken(user string) string {
	sum := sha256.Sum256([]byte(user))
	return hex.EncodeToString(sum[:16])
}

// encodeTaskPageToken writes a page token as taskstore.InMemory does:
// base64url of "<RFC 3339 time>_<task id>".
func encodeTaskPageToken(updated time.Time, id a2a.TaskID) string {
	return base64.URLEncoding.EncodeToString([]byte(updated.Format(time.RFC3339Nano) + "_" + string(id)))
}

// decodeTaskPageToken reads a page token into the entry it continues
// after. The time ends at the first "_", which RFC 3339 never holds, so ids
// may hold "_". It returns a2a.ErrParseError for anything else.
func decodeTaskPageToken(token string) (*taskIndexEntry, error) {
	b, err := base64.URLEncoding.DecodeString(token)
	if err != nil {
		return nil, a2a.ErrParseError
	}
	ts, id, ok := strings.Cut(string(b), "_")
	if !ok {
		return nil, a2a.ErrParseError
	}
	updated, err := time.Parse(time.RFC3339Nano, ts)
	if err != nil {
		return nil, a2a.ErrParseError
	}
	return &taskIndexEntry{ID: a2a.TaskID(id), Updated: updated}, nil
}
