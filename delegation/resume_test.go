package delegation

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
)

// restart closes the fixture's engine, as a stopping process would, and
// starts a new one on the same store and registry, which carries on what
// the first left running.
func (f *fixture) restart(t *testing.T, cfg Config, store Store) *Engine {
	t.Helper()
	f.engine.Close()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 20 * time.Millisecond
	}
	cfg.HTTPClient = f.engine.cfg.HTTPClient
	e := NewEngine(f.reg, f.pol, store, cfg, nil)
	t.Cleanup(e.Close)
	if err := e.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	f.engine = e
	return e
}

// restartFollowing is restart, failing the test unless the new engine
// follows delegation id; it returns the engine and the delegation.
func (f *fixture) restartFollowing(t *testing.T, cfg Config, store Store, id string) (*Engine, *Delegation) {
	t.Helper()
	e := f.restart(t, cfg, store)
	d, ok := e.Get(id)
	if !ok {
		t.Fatal("the new engine does not follow the running delegation")
	}
	return e, d
}

// workingOnStore starts an engine on a memory store with a worker agent
// (testagent.Work with delay, streaming or not), delegates to it and
// waits for the delegation to work, as working does, keeping the store
// for an engine started again on it.
func workingOnStore(t *testing.T, streaming bool, delay time.Duration) (*fixture, *MemoryStore, *testagent.Agent, *Delegation, Record) {
	t.Helper()
	store := NewMemoryStore(0)
	f, agent, d := delegateToWorker(t, store, streaming, delay)
	return f, store, agent, d, waitState(t, d, a2a.TaskStateWorking)
}

// delegateToWorker starts an engine on store with a worker agent
// (testagent.Work with delay, streaming or not) and delegates to it.
func delegateToWorker(t *testing.T, store Store, streaming bool, delay time.Duration) (*fixture, *testagent.Agent, *Delegation) {
	t.Helper()
	f := newFixtureStore(t, Config{}, store)
	agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work", Streaming: streaming}, testagent.Work(delay))
	f.add(t, "worker", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Skill: "work", Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go"))})
	if err != nil {
		t.Fatal(err)
	}
	return f, agent, d
}

func TestResume_CarriesOnAfterRestart(t *testing.T) {
	t.Parallel()
	for _, streaming := range []bool{true, false} {
		name := map[bool]string{true: "streaming", false: "polled"}[streaming]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, store, _, d, _ := workingOnStore(t, streaming, 400*time.Millisecond)
			e, resumed := f.restartFollowing(t, Config{}, store, d.ID())
			rec := waitState(t, resumed, a2a.TaskStateCompleted)
			if len(rec.Artifacts) != 1 || !strings.Contains(artifactText(rec.Artifacts[0]), "part two") {
				t.Errorf("artifacts = %v", rec.Artifacts)
			}
			evs, ended, err := e.Events(t.Context(), d.ID(), 0, 0)
			if err != nil || !ended {
				t.Fatalf("events: ended %v, %v", ended, err)
			}
			if terminal := logEnds(t, evs); terminal != 1 {
				t.Errorf("%d terminal events, want 1: %+v", terminal, evs)
			}
			stored, err := store.Get(t.Context(), d.ID())
			if err != nil {
				t.Fatal(err)
			}
			if stored.State != a2a.TaskStateCompleted {
				t.Errorf("stored record is %s (%s), want completed", stored.State, stored.Error)
			}
			if last := evs[len(evs)-1].Seq; stored.LastEvent != last {
				t.Errorf("stored record's last event %d, want %d", stored.LastEvent, last)
			}
		})
	}
}

// dyingStore passes writes to the store until the first event with
// state WORKING is in the log, and refuses every write after it: a
// process killed just after logging that event, before it wrote the
// record again.
type dyingStore struct {
	*MemoryStore
	dead atomic.Bool
}

func (s *dyingStore) Put(ctx context.Context, r Record) error {
	if s.dead.Load() {
		return errors.New("the process is dead")
	}
	return s.MemoryStore.Put(ctx, r)
}

func (s *dyingStore) Append(ctx context.Context, id string, ev Event) error {
	if s.dead.Load() {
		return errors.New("the process is dead")
	}
	err := s.MemoryStore.Append(ctx, id, ev)
	if ev.State == a2a.TaskStateWorking {
		s.dead.Store(true)
	}
	return err
}

// TestResume_KilledAfterTheFirstEvent kills orchd, as far as its store
// can tell, between logging the first event of the agent's task and
// writing the record again: the task is known to the store all the same,
// and the next process follows it to its end.
func TestResume_KilledAfterTheFirstEvent(t *testing.T) {
	t.Parallel()
	for _, streaming := range []bool{true, false} {
		name := map[bool]string{true: "streaming", false: "polled"}[streaming]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			store := &dyingStore{MemoryStore: NewMemoryStore(0)}
			f, _, d := delegateToWorker(t, store, streaming, 400*time.Millisecond)
			waitState(t, d, a2a.TaskStateWorking)
			if !store.dead.Load() {
				t.Fatal("no WORKING event reached the store")
			}
			e, resumed := f.restartFollowing(t, Config{}, store.MemoryStore, d.ID())
			rec := waitState(t, resumed, a2a.TaskStateCompleted)
			if rec.Downstream.TaskID == "" || len(rec.Artifacts) != 1 {
				t.Errorf("record = %+v", rec)
			}
			// The status logged before the kill, not in the record, is
			// the log's: the task read again shows it, and it is not
			// logged twice.
			evs, _, err := e.Events(t.Context(), d.ID(), 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if n := statusesSaying(evs, "working"); n != 1 {
				t.Errorf("the agent's WORKING status is in the log %d times, want once: %+v", n, evs)
			}
		})
	}
}

func TestResume_WhatCannotBeFollowedFails(t *testing.T) {
	t.Parallel()
	store := NewMemoryStore(0)
	f := newFixtureStore(t, Config{}, store)
	agent := testagent.Start(t, testagent.Options{Name: "Hanger", Skill: "hang", Streaming: true}, testagent.Hang())
	f.add(t, "hanger", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Skill: "hang", Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go"))})
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, d, a2a.TaskStateWorking)
	// Orchd stopped before an agent answered: the record has no task.
	now := time.Now()
	if err := store.Put(t.Context(), Record{ID: "no-task", State: a2a.TaskStateSubmitted, Downstream: Hop{Agent: "hanger"}, CreatedAt: now, UpdatedAt: now}); err != nil {
		t.Fatal(err)
	}
	if err := f.reg.Remove("hanger"); err != nil {
		t.Fatal(err)
	}
	e := f.restart(t, Config{}, store)
	for id, want := range map[string]string{d.ID(): "no longer registered", "no-task": "before the agent answered"} {
		live, ok := e.Get(id)
		if !ok {
			t.Fatalf("%s not carried on", id)
		}
		rec := waitState(t, live, a2a.TaskStateFailed)
		if !strings.Contains(rec.Error, want) {
			t.Errorf("%s failed with %q, want %q", id, rec.Error, want)
		}
	}
	if ids, _ := store.Running(context.Background()); len(ids) != 0 {
		t.Errorf("still running in the store: %v", ids)
	}
}

func artifactText(a *a2a.Artifact) string {
	var b strings.Builder
	for _, p := range a.Parts {
		if t, ok := p.Content.(a2a.Text); ok {
			b.WriteString(string(t))
		}
	}
	return b.String()
}

// stepLosingStore keeps the record of the first step that logs an event
// after the first, and not the event, and refuses every write after it: a
// process killed while the two writes of a step were on their way, the
// record's kept and the event's not.
type stepLosingStore struct {
	*MemoryStore
	dead atomic.Bool
}

func (s *stepLosingStore) Put(ctx context.Context, r Record) error {
	if s.dead.Load() {
		return errors.New("the process is dead")
	}
	return s.MemoryStore.Put(ctx, r)
}

func (s *stepLosingStore) Append(ctx context.Context, id string, ev Event) error {
	if s.dead.Load() {
		return errors.New("the process is dead")
	}
	return s.MemoryStore.Append(ctx, id, ev)
}

func (s *stepLosingStore) PutStep(ctx context.Context, r Record, ev Event) error {
	if s.dead.Load() {
		return errors.New("the process is dead")
	}
	if ev.Seq >= 2 {
		s.dead.Store(true)
		_ = s.MemoryStore.Put(ctx, r)
		return errors.New("the process died before the event was kept")
	}
	if err := s.MemoryStore.Append(ctx, r.ID, ev); err != nil {
		return err
	}
	return s.MemoryStore.Put(ctx, r)
}

// TestResume_RecordAheadOfItsLog carries on a delegation whose record
// names an event its log never got: the next process numbers its events
// on from the log's last, so the log has no gap.
func TestResume_RecordAheadOfItsLog(t *testing.T) {
	t.Parallel()
	store := &stepLosingStore{MemoryStore: NewMemoryStore(0)}
	f, _, d := delegateToWorker(t, store, true, 400*time.Millisecond)
	testwait.Until(t, 10*time.Second, "a step after the first event reaches the store", store.dead.Load)
	kept, err := store.MemoryStore.Get(t.Context(), d.ID())
	if err != nil {
		t.Fatal(err)
	}
	logged, err := store.MemoryStore.Events(t.Context(), d.ID(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(logged) == 0 || logged[len(logged)-1].Seq >= kept.LastEvent {
		t.Fatalf("the record's last event %d is not ahead of the log %+v", kept.LastEvent, logged)
	}
	e, resumed := f.restartFollowing(t, Config{}, store.MemoryStore, d.ID())
	waitState(t, resumed, a2a.TaskStateCompleted)
	evs, ended, err := e.Events(t.Context(), d.ID(), 0, 0)
	if err != nil || !ended {
		t.Fatalf("events: ended %v, %v", ended, err)
	}
	logEnds(t, evs)
	if n := statusesSaying(evs, "working"); n != 1 {
		t.Errorf("the agent's WORKING status is in the log %d times, want once: %+v", n, evs)
	}
}

// statusesSaying counts the agent's status messages in evs whose text is
// text.
func statusesSaying(evs []Event, text string) int {
	n := 0
	for _, ev := range evs {
		if ev.Kind == "state" && ev.Message != nil && messageText(ev.Message) == text {
			n++
		}
	}
	return n
}

// TestResume_ReopensWithOneCall checks what a process carrying a
// streamed delegation on asks its agent: a task still working is
// subscribed to at once, its stream starting with the task, and nothing
// more; a task that ended while no process followed it, which an a2a-go
// agent will not subscribe to, is read instead. Both end COMPLETED with
// the agent's artifact.
func TestResume_ReopensWithOneCall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		endedFirst bool
		want       []string // the agent's calls after the restart
	}{
		{"still working", false, []string{"SubscribeToTask"}},
		{"ended meanwhile", true, []string{"SubscribeToTask", "GetTask"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, store, agent, d, rec := workingOnStore(t, true, 600*time.Millisecond)
			f.engine.Close()
			if tc.endedFirst {
				client := testagent.Client(t, agent.URL)
				testwait.Until(t, 10*time.Second, "the agent's task ended", func() bool {
					task, err := client.GetTask(t.Context(), &a2a.GetTaskRequest{ID: rec.Downstream.TaskID})
					return err == nil && task.Status.State.Terminal()
				})
				// a2a-go holds the execution a while after it stored the
				// end, and a subscription meanwhile is taken and given
				// the end: wait until it lets go, so orchd's is refused.
				testwait.Until(t, 10*time.Second, "the agent to refuse a subscription to the ended task", func() bool {
					for _, err := range client.SubscribeToTask(t.Context(), &a2a.SubscribeToTaskRequest{ID: rec.Downstream.TaskID}) {
						return err != nil
					}
					return false
				})
			}
			before := len(agent.Calls())
			_, resumed := f.restartFollowing(t, Config{}, store, d.ID())
			rec = waitState(t, resumed, a2a.TaskStateCompleted)
			if len(rec.Artifacts) != 1 || !strings.Contains(artifactText(rec.Artifacts[0]), "part two") {
				t.Errorf("artifacts = %v", rec.Artifacts)
			}
			if diff := cmp.Diff(tc.want, agent.Calls()[before:]); diff != "" {
				t.Errorf("the agent's calls after the restart (-want +got):\n%s", diff)
			}
		})
	}
}

// readCounter counts the records and logs read one by one from the memory
// store it wraps.
type readCounter struct {
	*MemoryStore
	gets, logs atomic.Int32
}

func (s *readCounter) Get(ctx context.Context, id string) (Record, error) {
	s.gets.Add(1)
	return s.MemoryStore.Get(ctx, id)
}

func (s *readCounter) Events(ctx context.Context, id string, after int64, limit int) ([]Event, error) {
	s.logs.Add(1)
	return s.MemoryStore.Events(ctx, id, after, limit)
}

// TestResume_ReadsTogetherAtAStart checks that a start carries on the
// running delegations of a store that reads many at once (ManyReader)
// without reading any record one by one, nor any log but to rebuild the
// artifacts each has already, and those of a store that does not with a
// record and two log reads each; both to their end.
func TestResume_ReadsTogetherAtAStart(t *testing.T) {
	t.Parallel()
	const running = 3
	for _, tc := range []struct {
		name               string
		many               bool
		wantGets, wantLogs int32
	}{
		{"ManyReader", true, 0, running},
		{"Store", false, running, 2 * running},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store := NewMemoryStore(0)
			f := newFixtureStore(t, Config{}, store)
			agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work", Streaming: true}, testagent.Work(time.Second))
			f.add(t, "worker", agent.URL)
			var ids []string
			for range running {
				d, err := f.engine.Delegate(t.Context(), Request{Skill: "work", Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go"))})
				if err != nil {
					t.Fatal(err)
				}
				waitRecord(t, d, "its first artifact", func(r Record) bool { return len(r.Artifacts) == 1 })
				ids = append(ids, d.ID())
			}
			counter := &readCounter{MemoryStore: store}
			var s Store = counter
			if !tc.many {
				s = struct{ Store }{counter} // ReadMany hidden
			}
			e := f.restart(t, Config{}, s)
			if gets, logs := counter.gets.Load(), counter.logs.Load(); gets != tc.wantGets || logs != tc.wantLogs {
				t.Errorf("the start read %d records and %d logs one by one, want %d and %d", gets, logs, tc.wantGets, tc.wantLogs)
			}
			for _, id := range ids {
				resumed, ok := e.Get(id)
				if !ok {
					t.Fatalf("the new engine does not follow delegation %s", id)
				}
				rec := waitState(t, resumed, a2a.TaskStateCompleted)
				if len(rec.Artifacts) != 1 || artifactText(rec.Artifacts[0]) != "part one, part two" {
					t.Errorf("delegation %s: artifacts = %v", id, rec.Artifacts)
				}
			}
		})
	}
}
