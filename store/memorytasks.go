package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
)

// DefaultMemoryEndedTasks is how many ended tasks a MemoryTasks keeps
// when MemoryTasksConfig.MaxEnded is 0, as many as the memory mode's
// delegation store keeps records (delegation.DefaultMemoryRecords).
const DefaultMemoryEndedTasks = 10_000

// MemoryTasksConfig configures MemoryTasks. The zero value is usable.
type MemoryTasksConfig struct {
	// MaxEnded bounds the ended tasks (COMPLETED, FAILED, CANCELED,
	// REJECTED) kept: beyond it, those that ended longest ago are
	// forgotten. Tasks that have not ended are all kept.
	// DefaultMemoryEndedTasks when 0.
	MaxEnded int
	// Authenticator names the user a call acts for, as in TasksConfig;
	// a2asrv.NewTaskStoreAuthenticator() when nil.
	Authenticator taskstore.Authenticator
	// Now is the clock of the tasks' last-update times, which List sorts
	// and pages by; time.Now when nil.
	Now func() time.Time
}

// MemoryTasks is an a2a-go task store (taskstore.Store) in process
// memory, for orchd's memory mode: its tasks are lost when the process
// ends. It answers as Tasks does (the same checks, owners, errors and
// List), but for what a bucket brings: it keeps the latest MaxEnded ended
// tasks instead of keeping each for a retention time, List reads every
// task of the caller, and versions count 1, 2, 3 per task, as in a2a-go's
// taskstore.InMemory.
//
// Why not taskstore.InMemory: it copies each task it stores or returns
// through encoding/gob with a new encoder and decoder, compiling the
// task's types again each time, which took a quarter of orchd's CPU on a
// hop whose agent answers with a task (docs/benchmarks.md). MemoryTasks
// keeps each task's JSON, as Tasks does, and decodes it afresh for each
// read, so callers may change what they get and what they stored. Like
// Tasks, and unlike InMemory, metadata and data parts come back as JSON
// decodes them, and an empty or over-long task id is refused.
//
// A MemoryTasks is safe for concurrent use.
type MemoryTasks struct {
	cfg MemoryTasksConfig

	mu    sync.RWMutex
	tasks map[a2a.TaskID]*memoryTask
	// ended holds the ids of tasks stored ended, oldest first; one
	// written ended twice is there twice, and is forgotten at its first.
	ended []a2a.TaskID
}

var _ taskstore.Store = (*MemoryTasks)(nil)

// memoryTask is one stored task: its JSON, its version, and what List
// filters and sorts by, its owner included.
type memoryTask struct {
	body    []byte
	version taskstore.TaskVersion
	entry   taskIndexEntry
}

// NewMemoryTasks returns an empty MemoryTasks.
func NewMemoryTasks(cfg MemoryTasksConfig) *MemoryTasks {
	if cfg.Authenticator == nil {
		cfg.Authenticator = a2asrv.NewTaskStoreAuthenticator()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxEnded <= 0 {
		cfg.MaxEnded = DefaultMemoryEndedTasks
	}
	return &MemoryTasks{cfg: cfg, tasks: map[a2a.TaskID]*memoryTask{}}
}

// Create stores a new task owned by the calling user. It returns
// taskstore.ErrTaskAlreadyExists when a task with its id is stored,
// whoever owns it.
func (m *MemoryTasks) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	if task == nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("create task: no task: %w", a2a.ErrInvalidParams)
	}
	if _, err := taskToken(task.ID); err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("create task: %w", err)
	}
	user, err := m.cfg.Authenticator(ctx)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("create task %q: authenticate: %w", task.ID, err)
	}
	stored, err := m.stored(user, task)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("create task %q: %w", task.ID, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tasks[task.ID] != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("create task %q: %w", task.ID, taskstore.ErrTaskAlreadyExists)
	}
	stored.version = 1
	m.keepLocked(stored)
	return stored.version, nil
}

// Update replaces a task of the calling user. It returns a2a.ErrTaskNotFound
// when no such task is stored or another user owns it, and
// taskstore.ErrConcurrentModification when req.PrevVersion is neither the
// stored version nor taskstore.TaskVersionMissing, which replaces whatever
// version is stored.
func (m *MemoryTasks) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	if req == nil || req.Task == nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("update task: no task: %w", a2a.ErrInvalidParams)
	}
	id := req.Task.ID
	user, err := m.cfg.Authenticator(ctx)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("update task %q: authenticate: %w", id, err)
	}
	stored, err := m.stored(user, req.Task)
	if err != nil {
		return taskstore.TaskVersionMissing, fmt.Errorf("update task %q: %w", id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.tasks[id]
	switch {
	case cur == nil || cur.entry.User != user:
		return taskstore.TaskVersionMissing, fmt.Errorf("update task %q: %w", id, a2a.ErrTaskNotFound)
	case req.PrevVersion != taskstore.TaskVersionMissing && req.PrevVersion != cur.version:
		return taskstore.TaskVersionMissing, fmt.Errorf("update task %q: version %d stored, not %d: %w", id, cur.version, req.PrevVersion, taskstore.ErrConcurrentModification)
	}
	stored.version = cur.version + 1
	m.keepLocked(stored)
	return stored.version, nil
}

// Get returns a fresh copy of a task of the calling user, with its version
// and owner. It returns a2a.ErrTaskNotFound when no such task is stored or
// another user owns it.
func (m *MemoryTasks) Get(ctx context.Context, id a2a.TaskID) (*taskstore.StoredTask, error) {
	user, err := m.cfg.Authenticator(ctx)
	if err != nil {
		return nil, fmt.Errorf("get task %q: authenticate: %w", id, err)
	}
	m.mu.RLock()
	cur := m.tasks[id]
	m.mu.RUnlock()
	if cur == nil || cur.entry.User != user {
		return nil, fmt.Errorf("get task %q: %w", id, a2a.ErrTaskNotFound)
	}
	task, err := cur.task()
	if err != nil {
		return nil, fmt.Errorf("get task %q: %w", id, err)
	}
	return &taskstore.StoredTask{Task: task, Version: cur.version, User: user}, nil
}

// List returns a page of the calling user's tasks as Tasks.List does. It
// returns a2a.ErrUnauthenticated for an unnamed caller.
func (m *MemoryTasks) List(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	l, user, err := newTaskListing(ctx, m.cfg.Authenticator, req)
	if err != nil {
		return nil, err
	}
	bodies := map[*taskIndexEntry]*memoryTask{}
	m.mu.RLock()
	entries := make([]*taskIndexEntry, 0, len(m.tasks))
	for _, cur := range m.tasks {
		if cur.entry.User == user {
			e := cur.entry
			entries = append(entries, &e)
			bodies[&e] = cur
		}
	}
	m.mu.RUnlock()
	owns := func(*taskIndexEntry) bool { return true } // only the caller's were taken
	return l.page(entries, owns, func(e *taskIndexEntry) (*a2a.Task, error) {
		task, err := bodies[e].task()
		if err != nil {
			return nil, fmt.Errorf("list tasks: task %q: %w", e.ID, err)
		}
		return task, nil
	})
}

// keepLocked stores t, and forgets the tasks that ended longest ago
// beyond MaxEnded. m.mu is held.
func (m *MemoryTasks) keepLocked(t *memoryTask) {
	m.tasks[t.entry.ID] = t
	if !t.entry.State.Terminal() {
		return
	}
	m.ended = append(m.ended, t.entry.ID)
	for len(m.ended) > m.cfg.MaxEnded {
		id := m.ended[0]
		m.ended[0] = "" // the backing array keeps no id it no longer needs
		m.ended = m.ended[1:]
		if cur := m.tasks[id]; cur != nil && cur.entry.State.Terminal() {
			delete(m.tasks, id)
		}
	}
}

// stored encodes task as user's, updated now, checked as Tasks checks
// what it stores; its version is the caller's to set.
func (m *MemoryTasks) stored(user string, task *a2a.Task) (*memoryTask, error) {
	if err := taskPartsEncodable(task); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := newTaskEncoder(&buf).Encode(task); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	t := &memoryTask{body: buf.Bytes(), entry: taskIndexEntry{ID: task.ID, ContextID: task.ContextID,
		State: task.Status.State, Updated: m.cfg.Now(), User: user}}
	if ts := task.Status.Timestamp; ts != nil {
		at := *ts // the caller's task may change afterwards
		t.entry.Timestamp = &at
	}
	return t, nil
}

// task decodes a fresh copy of the stored task.
func (t *memoryTask) task() (*a2a.Task, error) {
	task := &a2a.Task{}
	if err := json.Unmarshal(t.body, task); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return task, nil
}
