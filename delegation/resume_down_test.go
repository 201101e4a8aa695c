package delegation

import (
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// TestResume_AgentDownAtRestart: a delegation whose agent cannot be read
// when orchd starts again is polled, not dropped (and does not bring the
// process down): it completes when the agent comes back, and fails,
// saying so, when the agent stays away.
func TestResume_AgentDownAtRestart(t *testing.T) {
	t.Parallel()
	for _, comesBack := range []bool{true, false} {
		for _, streaming := range []bool{true, false} {
			name := map[bool]string{true: "comes back", false: "stays away"}[comesBack] + "/" + map[bool]string{true: "streaming", false: "polled"}[streaming]
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				store := NewMemoryStore(0)
				f, agent, d := delegateToWorker(t, store, streaming, time.Second)
				waitState(t, d, a2a.TaskStateWorking)
				agent.Stop()
				// Polls a second apart, backing off, leave the agent
				// seconds to come back before the task is given up as
				// lost; quick polls and a short silence give it up soon.
				cfg := Config{PollInterval: time.Second}
				if !comesBack {
					cfg = Config{PollInterval: 20 * time.Millisecond, SilenceTimeout: 300 * time.Millisecond}
				}
				_, resumed := f.restartFollowing(t, cfg, store, d.ID())
				if !comesBack {
					rec := waitRecord(t, resumed, "failed", func(r Record) bool { return r.State.Terminal() })
					if rec.State != a2a.TaskStateFailed || !strings.Contains(rec.Error, "lost track of task") {
						t.Errorf("state %s, error %q; want failed, naming the reads that failed", rec.State, rec.Error)
					}
					return
				}
				agent.Restart(t)
				waitState(t, resumed, a2a.TaskStateCompleted)
			})
		}
	}
}
