package delegation

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/orchd/orchd/internal/testwait"
)

// BenchmarkInFlightFollow measures orchd's memory per in-flight
// delegation followed by push, by a stream and by polling, against one
// agent that offers all three: a real a2a-go agent with push
// notifications (a2a-go's in-memory config store and HTTP sender), in a
// separate process so only orchd's side counts. Its tasks never finish.
// The figure is taken once every notification was taken and the task
// read after it.
//
//	go test ./delegation -run '^$' -bench InFlightFollow -benchtime 1x
func BenchmarkInFlightFollow(b *testing.B) {
	for _, tc := range []struct {
		follow string
		n      int
	}{{FollowPush, 10_000}, {FollowPoll, 10_000}, {FollowStream, 2_000}} {
		b.Run(fmt.Sprintf("%s-%d", tc.follow, tc.n), func(b *testing.B) {
			for b.Loop() {
				hook := startWebhook(b)
				url := agentProcess(b, "push-agent")
				f := newFixture(b, Config{Follow: tc.follow, PushURL: hook.URL + "/push/", PollInterval: time.Minute,
					SilenceTimeout: 10 * time.Minute, KeepFinished: tc.n})
				hook.engine.Store(f.engine)
				f.add(b, "forever", url)
				before := inUse()
				goroutines := runtime.NumGoroutine()
				ds := delegateAll(b, f, tc.n, func() Request { return Request{Text: "wait", Skill: "forever"} })
				if tc.follow == FollowPush {
					settle(b, f.engine, hook, 2*tc.n) // SUBMITTED and WORKING, each
				}
				per := float64(inUse()-before) / float64(tc.n)
				for _, d := range ds {
					if s := d.Record().State; s.Terminal() {
						b.Fatalf("delegation %s is %s, want in flight", d.ID(), s)
					}
					d.mu.Lock()
					mode := d.prog.Follow
					d.mu.Unlock()
					if mode != tc.follow {
						b.Fatalf("delegation %s is followed by %q, want %q", d.ID(), mode, tc.follow)
					}
				}
				b.ReportMetric(per, "B/delegation")
				b.ReportMetric(per/1024, "KiB/delegation")
				b.ReportMetric(float64(runtime.NumGoroutine()-goroutines)/float64(tc.n), "goroutines/delegation")
				f.engine.Close()
			}
		})
	}
}

// settle waits until the webhook took n notifications and no read of a
// task runs or is due.
func settle(b *testing.B, e *Engine, hook *webhook, n int) {
	b.Helper()
	testwait.Succeeds(b, 5*time.Minute, "notifications settled", func() error {
		if took := int(hook.took.Load()); took < n {
			return fmt.Errorf("%d of %d taken", took, n)
		}
		e.push.mu.Lock()
		defer e.push.mu.Unlock()
		for id, h := range e.push.hooks {
			h.mu.Lock()
			busy := h.f == nil || h.f.running || h.pending
			h.mu.Unlock()
			if busy {
				return fmt.Errorf("the follower of %s is not idle", id)
			}
		}
		return nil
	})
}
