package delegation

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
)

// loggedBytes is what the store holds of a delegation: its record and its
// log, in JSON.
func loggedBytes(t *testing.T, s Store, id string) (record, log int) {
	t.Helper()
	r, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(r)
	evs, err := s.Events(t.Context(), id, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		eb, _ := json.Marshal(ev)
		log += len(eb)
	}
	return len(b), log
}

// TestArtifacts_StreamedInLinearSpace streams one artifact as 200 chunks
// of 512 bytes: each chunk is logged as it came (appended), so the log holds
// about the artifact's size, the stored record holds none of it, and the
// delegation's record has the artifact whole, as a read from the store
// rebuilds it.
func TestArtifacts_StreamedInLinearSpace(t *testing.T) {
	t.Parallel()
	const chunks, size = 200, 512
	agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", Streaming: true}, testagent.Stream(1, chunks, size, nil))
	store := NewMemoryStore(0)
	f := newFixtureStore(t, Config{}, store)
	f.add(t, "writer", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "write", Skill: "write"})
	if err != nil {
		t.Fatal(err)
	}
	rec := waitState(t, d, a2a.TaskStateCompleted)
	want := strings.Repeat("a", chunks*size)
	if len(rec.Artifacts) != 1 {
		t.Fatalf("the record has %d artifacts, want 1", len(rec.Artifacts))
	}
	if got := rec.Artifacts[0]; got.Name != "answer 1" || artifactText(got) != want {
		t.Fatalf("the record's artifact is %q of %d bytes, want %q of %d bytes of a", got.Name, len(artifactText(got)), "answer 1", len(want))
	}
	record, log := loggedBytes(t, store, d.ID())
	if record > 8<<10 || log > 2*len(want) {
		t.Errorf("the store holds a record of %d bytes and a log of %d for an artifact of %d; want a small record and a log about the artifact's size", record, log, len(want))
	}
	evs, _, err := f.engine.Events(t.Context(), d.ID(), 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	appended := 0
	for _, ev := range evs {
		if ev.Kind == "artifact" && ev.Append {
			appended++
		}
	}
	if appended != chunks-1 {
		t.Errorf("%d artifact events append, want %d", appended, chunks-1)
	}
	stored, _, err := f.engine.rebuildArtifacts(t.Context(), mustGet(t, store, d.ID()))
	if err != nil {
		t.Fatalf("rebuild the artifacts from the store: %v", err)
	}
	if len(stored) != 1 || artifactText(stored[0]) != want {
		t.Errorf("artifacts rebuilt from the store: %d, want the artifact whole", len(stored))
	}
}

// mustGet reads a stored record.
func mustGet(t *testing.T, s Store, id string) Record {
	t.Helper()
	r, err := s.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestArtifacts_RestatedBeforeTheLogForgetsThem streams more artifact
// chunks than a delegation's log keeps: every artifact is logged again
// whole before the events they are rebuilt from leave the log, so the
// store still rebuilds them all, in order.
func TestArtifacts_RestatedBeforeTheLogForgetsThem(t *testing.T) {
	t.Parallel()
	const maxEvents = 40
	agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", Streaming: true}, testagent.Stream(3, 30, 100, nil))
	store := NewMemoryStore(0)
	store.maxEvents = maxEvents
	f := newFixtureStore(t, Config{MaxEvents: maxEvents}, store)
	f.add(t, "writer", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "write", Skill: "write"})
	if err != nil {
		t.Fatal(err)
	}
	rec := waitState(t, d, a2a.TaskStateCompleted)
	r := mustGet(t, store, d.ID())
	if first, _ := store.Events(t.Context(), d.ID(), 0, 1); len(first) == 0 || first[0].Seq == 1 {
		t.Fatalf("the log kept its first event: the test needs one that forgot some")
	}
	arts, _, err := f.engine.rebuildArtifacts(t.Context(), r)
	if err != nil || len(arts) != 3 {
		t.Fatalf("rebuilt %d artifacts, %v; want 3", len(arts), err)
	}
	for i, a := range arts {
		if a.ID != rec.Artifacts[i].ID {
			t.Errorf("artifact %d rebuilt as %s, want %s", i, a.ID, rec.Artifacts[i].ID)
		}
		if text := artifactText(a); text != artifactText(rec.Artifacts[i]) || len(text) != 3000 {
			t.Errorf("artifact %d rebuilt with %d bytes, not the 3000 it had", i, len(text))
		}
	}
}

// TestArtifacts_BoundsFailTheWork runs agents past each bound: the
// delegation fails naming the setting, keeps nothing past it, and the
// agent's task is canceled.
func TestArtifacts_BoundsFailTheWork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                    string
		cfg                     Config
		artifacts, chunks, size int
		setting                 string
	}{
		{"bytes", Config{MaxArtifactBytes: 50 << 10}, 1, 100, 1 << 10, "delegation.maxArtifactBytes"},
		{"count", Config{MaxArtifacts: 3}, 5, 1, 10, "delegation.maxArtifacts"},
		{"event", Config{MaxEventBytes: 4 << 10}, 1, 2, 8 << 10, "delegation.maxEventBytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hold := make(chan struct{})
			t.Cleanup(func() { close(hold) })
			agent := testagent.Start(t, testagent.Options{Name: "Writer", Skill: "write", Streaming: true},
				testagent.Stream(tc.artifacts, tc.chunks, tc.size, hold))
			f := newFixture(t, tc.cfg)
			f.add(t, "writer", agent.URL)
			d, err := f.engine.Delegate(t.Context(), Request{Text: "write", Skill: "write"})
			if err != nil {
				t.Fatal(err)
			}
			rec := waitState(t, d, a2a.TaskStateFailed)
			if !strings.Contains(rec.Error, tc.setting) || !strings.Contains(rec.Error, "canceled the task") {
				t.Errorf("error %q, want one naming %s", rec.Error, tc.setting)
			}
			var n int64
			for _, a := range rec.Artifacts {
				n += artifactSize(a)
			}
			cfg := f.engine.cfg
			if n > cfg.MaxArtifactBytes || len(rec.Artifacts) > cfg.MaxArtifacts {
				t.Errorf("kept %d artifacts of %d bytes past the bounds", len(rec.Artifacts), n)
			}
			testwait.Until(t, 10*time.Second, "the agent's task canceled", func() bool { return agent.Cancels() > 0 })
		})
	}
}

// TestPoll_AnswerTooLargeFailsTheWork polls an agent whose task grows past
// what orchd reads of an answer: the delegation fails at the first such
// read, saying so, and the agent's task is canceled; orchd never reads it
// whole.
func TestPoll_AnswerTooLargeFailsTheWork(t *testing.T) {
	t.Parallel()
	hold, accepted := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(hold) })
	stream := testagent.Stream(1, 1, 256<<10, hold)
	// The artifact comes once orchd has the agent's first answer: a busy
	// machine could otherwise see it in that answer, which then fails
	// the delegation's start rather than a poll.
	agent := testagent.Start(t, testagent.Options{Name: "Batch", Skill: "batch"},
		func(ctx context.Context, ec *a2asrv.ExecutorContext, yield func(a2a.Event, error) bool) {
			if !yield(a2a.NewSubmittedTask(ec, ec.Message), nil) {
				return
			}
			select {
			case <-accepted:
			case <-ctx.Done():
				return
			}
			stream(ctx, ec, func(ev a2a.Event, err error) bool {
				if _, submitted := ev.(*a2a.Task); submitted {
					return true // sent already
				}
				return yield(ev, err)
			})
		})
	f := newFixture(t, Config{})
	f.engine.answerLimit = 64 << 10
	f.add(t, "batch", agent.URL)
	d, err := f.engine.Delegate(t.Context(), Request{Text: "crunch", Skill: "batch"})
	close(accepted)
	if err != nil {
		t.Fatal(err)
	}
	rec := waitState(t, d, a2a.TaskStateFailed)
	if !strings.Contains(rec.Error, "larger than orchd reads") || len(rec.Artifacts) != 0 {
		t.Errorf("error %q with %d artifacts, want the answer refused", rec.Error, len(rec.Artifacts))
	}
	testwait.Until(t, 10*time.Second, "the agent's task canceled", func() bool { return agent.Cancels() > 0 })
}

// TestJSONStringSize compares jsonStringSize with encoding/json on texts
// an agent may send: plain, HTML-escaped, control bytes, line separators
// and invalid UTF-8. It must never count less than encoding/json writes,
// or an event the bound let through could be larger than the store takes.
func TestJSONStringSize(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "plain text", "<b>a & b</b>", "line\nbreak\ttab\r\"quoted\" \\", "\x00\x01\x1f\b\f",
		"\u2028\u2029", "héllo wörld 日本", "\xff\xfe bad", strings.Repeat("<", 1000)} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := jsonStringSize(s); got < int64(len(b)) || got > int64(len(b))+int64(4*strings.Count(s, "\b")+4*strings.Count(s, "\f")) {
			t.Errorf("jsonStringSize(%q) = %d, encoding/json writes %d", s, got, len(b))
		}
	}
}

// FuzzJSONStringSize checks jsonStringSize against encoding/json on any
// text: never less, and more only by the short escapes it counts long.
func FuzzJSONStringSize(f *testing.F) {
	for _, seed := range []string{"", "plain", "<&>", "\x00\b\f\n", "\u2028", "\xff", "日本"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		b, err := json.Marshal(s)
		if err != nil {
			t.Skip()
		}
		got, want := jsonStringSize(s), int64(len(b))
		if got < want || got > want+int64(4*(strings.Count(s, "\b")+strings.Count(s, "\f"))) {
			t.Errorf("jsonStringSize(%q) = %d, encoding/json writes %d", s, got, want)
		}
	})
}
