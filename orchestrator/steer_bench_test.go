package orchestrator

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2aext"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// BenchmarkSteerChain measures steering across A → B → C with a no-op
// steerable agent C, A and B each on the embedded store as orchd runs by
// default: "steer" is the time from the caller's :steer at A to
// the receipt, which comes back once C's executor has the steer queued;
// "interrupt" is the time from :interrupt at A to the acknowledgement,
// which waits for C, then B, then A to settle INPUT_REQUIRED. The
// "direct-" runs send the same signals straight to C with an a2a-go
// client, the baseline for the ratios.
//
//	go test ./orchestrator -run '^$' -bench SteerChain -benchtime 500x
func BenchmarkSteerChain(b *testing.B) {
	c := testagent.Start(b, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	bNode := durableNode(b, "b", "research", registry.Spec{ID: "c", URL: c.URL})
	a := durableNode(b, "a", "research", registry.Spec{ID: "b", URL: bNode})
	for _, path := range []struct {
		prefix string
		s      signaller
	}{
		{"direct-", newDirectSteering(b, c.URL)},
		{"", &chainSteering{base: a}},
	} {
		b.Run(path.prefix+"steer", func(b *testing.B) {
			timeSignals(b, path.s, steering.Steer, false)
		})
		b.Run(path.prefix+"interrupt", func(b *testing.B) {
			timeSignals(b, path.s, steering.Interrupt, true)
		})
		path.s.end(b)
	}
}

// durableNode is orchdNode on the embedded store, as orchd runs by
// default, instead of memory.
func durableNode(t testing.TB, self, skill string, agents ...registry.Spec) string {
	t.Helper()
	cfg := nodeConfig(t, self, skill, agents...)
	cfg.StateDir = t.TempDir()
	return startDaemon(t, cfg)
}

// signaller sends steering signals to one WORKING task at a time, through
// orchd or straight to the agent.
type signaller interface {
	// fresh ends the current task and starts a WORKING one.
	fresh(b *testing.B)
	signal(b *testing.B, c steering.Control, text string)
	// resume answers an interrupted task and waits until it works again.
	resume(b *testing.B)
	end(b *testing.B)
}

// timeSignals times one signal per iteration and reports p50 and p99.
// Each task takes ten signals: a2a-go copies a task's whole history on
// every update, so hundreds of signals on one task would measure that.
// After an interrupt the task is resumed, untimed.
func timeSignals(b *testing.B, s signaller, c steering.Control, resume bool) {
	var lat []time.Duration
	for i := 0; b.Loop(); i++ {
		if i%10 == 0 {
			b.StopTimer()
			s.fresh(b)
			b.StartTimer()
		}
		start := time.Now()
		s.signal(b, c, fmt.Sprintf("%s %d", c, i))
		lat = append(lat, time.Since(start))
		if resume {
			b.StopTimer()
			s.resume(b)
			b.StartTimer()
		}
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}

// chainSteering signals a delegation through the API of the orchd at base.
type chainSteering struct {
	base string
	rec  delegation.Record
}

func (s *chainSteering) fresh(b *testing.B) {
	s.end(b)
	if code := call(b, "POST", s.base+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &s.rec); code != 201 {
		b.Fatalf("delegate = %d", code)
	}
	waitFor(b, s.base, s.rec.ID, a2a.TaskStateWorking)
}

func (s *chainSteering) signal(b *testing.B, c steering.Control, text string) {
	if code := call(b, "POST", s.base+"/v1/delegations/"+s.rec.ID+":"+string(c), fmt.Sprintf(`{"text": %q}`, text), nil); code != 200 {
		b.Fatalf("%s = %d", c, code)
	}
}

func (s *chainSteering) resume(b *testing.B) {
	if code := call(b, "POST", s.base+"/v1/delegations/"+s.rec.ID+"/messages", `{"text": "go on"}`, nil); code != 200 {
		b.Fatalf("resume = %d", code)
	}
	waitFor(b, s.base, s.rec.ID, a2a.TaskStateWorking)
}

func (s *chainSteering) end(b *testing.B) {
	if s.rec.ID != "" {
		call(b, "POST", s.base+"/v1/delegations/"+s.rec.ID+":cancel", "", nil)
	}
}

// directSteering sends steering signals straight to an agent's task with
// an a2a-go client.
type directSteering struct {
	c    *a2aclient.Client
	task a2a.TaskID
}

func newDirectSteering(b *testing.B, url string) *directSteering {
	card, err := agentcard.NewResolver(nil).Resolve(b.Context(), url)
	if err != nil {
		b.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(b.Context(), card, a2aclient.WithCallInterceptors(a2aext.NewActivator(steering.URI)))
	if err != nil {
		b.Fatal(err)
	}
	return &directSteering{c: c}
}

func (d *directSteering) fresh(b *testing.B) {
	d.end(b)
	res, err := d.c.SendMessage(b.Context(), &a2a.SendMessageRequest{
		Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("survey")),
		Config:  &a2a.SendMessageConfig{ReturnImmediately: true}})
	if err != nil {
		b.Fatal(err)
	}
	d.task = res.(*a2a.Task).ID
	d.waitWorking(b)
}

func (d *directSteering) resume(b *testing.B) {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go on"))
	m.TaskID = d.task
	if _, err := d.c.SendMessage(b.Context(), &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{ReturnImmediately: true}}); err != nil {
		b.Fatal(err)
	}
	d.waitWorking(b)
}

func (d *directSteering) waitWorking(b *testing.B) {
	testwait.Succeeds(b, 10*time.Second, "task "+string(d.task)+" working", func() error {
		t, err := d.c.GetTask(b.Context(), &a2a.GetTaskRequest{ID: d.task})
		if err != nil {
			b.Fatal(err)
		}
		if t.Status.State != a2a.TaskStateWorking {
			return fmt.Errorf("it is %s", t.Status.State)
		}
		return nil
	})
}

func (d *directSteering) signal(b *testing.B, c steering.Control, text string) {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	m.TaskID = d.task
	m.Metadata = map[string]any{steering.ControlKey: string(c)}
	if _, err := d.c.SendMessage(b.Context(), &a2a.SendMessageRequest{Message: m}); err != nil {
		b.Fatalf("%s: %v", c, err)
	}
}

func (d *directSteering) end(b *testing.B) {
	if d.task != "" {
		if _, err := d.c.CancelTask(b.Context(), &a2a.CancelTaskRequest{ID: d.task}); err != nil {
			b.Fatal(err)
		}
	}
}
