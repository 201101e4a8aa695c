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
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/steering"
)

// BenchmarkSteerChain measures steering across A → B → C with a no-op
// steerable agent C: "steer" is the time from the caller's :steer at A to
// the receipt, which comes back once C's executor has the steer queued;
// "interrupt" is the time from :interrupt at A to the acknowledgement,
// which waits for C, then B, then A to settle INPUT_REQUIRED. The
// "direct-" runs send the same signals straight to C with an a2a-go
// client, the baseline for the ratios.
//
//	go test ./orchestrator -run '^$' -bench SteerChain -benchtime 500x
func BenchmarkSteerChain(b *testing.B) {
	c := testagent.Start(b, testagent.Options{Name: "C", Skill: "research", Streaming: true, Steering: true}, testagent.Steerable())
	bNode := orchdNode(b, "b", "research", registry.Spec{ID: "c", URL: c.URL})
	a := orchdNode(b, "a", "research", registry.Spec{ID: "b", URL: bNode})
	// Each task takes ten signals: a2a-go copies a task's whole history on
	// every update, so hundreds of steers on one task would measure that.
	var rec delegation.Record
	fresh := func(b *testing.B) {
		b.StopTimer()
		if rec.ID != "" {
			call(b, "POST", a+"/v1/delegations/"+rec.ID+":cancel", "", nil)
		}
		if code := call(b, "POST", a+"/v1/delegations", `{"text": "survey", "skill": "research"}`, &rec); code != 201 {
			b.Fatalf("delegate = %d", code)
		}
		waitFor(b, a, rec.ID, a2a.TaskStateWorking)
		b.StartTimer()
	}
	report := func(b *testing.B, lat []time.Duration) {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
	direct := directSteering(b, c.URL)
	b.Run("direct-steer", func(b *testing.B) {
		var lat []time.Duration
		i := 0
		for b.Loop() {
			if i%10 == 0 {
				b.StopTimer()
				direct.fresh(b)
				b.StartTimer()
			}
			i++
			start := time.Now()
			direct.signal(b, steering.Steer, fmt.Sprintf("steer %d", i))
			lat = append(lat, time.Since(start))
		}
		report(b, lat)
	})
	b.Run("direct-interrupt", func(b *testing.B) {
		var lat []time.Duration
		i := 0
		for b.Loop() {
			if i%10 == 0 {
				b.StopTimer()
				direct.fresh(b)
				b.StartTimer()
			}
			i++
			start := time.Now()
			direct.signal(b, steering.Interrupt, "stop")
			lat = append(lat, time.Since(start))
			b.StopTimer()
			direct.resume(b)
			b.StartTimer()
		}
		report(b, lat)
	})
	direct.end(b)
	b.Run("steer", func(b *testing.B) {
		var lat []time.Duration
		i := 0
		for b.Loop() {
			if i%10 == 0 {
				fresh(b)
			}
			i++
			start := time.Now()
			if code := call(b, "POST", a+"/v1/delegations/"+rec.ID+":steer", fmt.Sprintf(`{"text": "steer %d"}`, i), nil); code != 200 {
				b.Fatalf("steer = %d", code)
			}
			lat = append(lat, time.Since(start))
		}
		report(b, lat)
	})
	b.Run("interrupt", func(b *testing.B) {
		var lat []time.Duration
		i := 0
		for b.Loop() {
			if i%10 == 0 {
				fresh(b)
			}
			i++
			start := time.Now()
			if code := call(b, "POST", a+"/v1/delegations/"+rec.ID+":interrupt", "", nil); code != 200 {
				b.Fatalf("interrupt = %d", code)
			}
			lat = append(lat, time.Since(start))
			b.StopTimer()
			if code := call(b, "POST", a+"/v1/delegations/"+rec.ID+"/messages", `{"text": "go on"}`, nil); code != 200 {
				b.Fatalf("resume = %d", code)
			}
			waitFor(b, a, rec.ID, a2a.TaskStateWorking)
			b.StartTimer()
		}
		report(b, lat)
	})
	call(b, "POST", a+"/v1/delegations/"+rec.ID+":cancel", "", nil)
}

// directClient sends steering signals straight to an agent's task.
type directClient struct {
	c    *a2aclient.Client
	task a2a.TaskID
}

func directSteering(b *testing.B, url string) *directClient {
	card, err := agentcard.NewResolver(nil).Resolve(b.Context(), url)
	if err != nil {
		b.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(b.Context(), card, a2aclient.WithCallInterceptors(a2aext.NewActivator(steering.URI)))
	if err != nil {
		b.Fatal(err)
	}
	return &directClient{c: c}
}

// fresh ends the current task and starts a WORKING one.
func (d *directClient) fresh(b *testing.B) {
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

// resume answers an interrupted task so it works again.
func (d *directClient) resume(b *testing.B) {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("go on"))
	m.TaskID = d.task
	if _, err := d.c.SendMessage(b.Context(), &a2a.SendMessageRequest{Message: m, Config: &a2a.SendMessageConfig{ReturnImmediately: true}}); err != nil {
		b.Fatal(err)
	}
	d.waitWorking(b)
}

func (d *directClient) waitWorking(b *testing.B) {
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		t, err := d.c.GetTask(b.Context(), &a2a.GetTaskRequest{ID: d.task})
		if err != nil {
			b.Fatal(err)
		}
		if t.Status.State == a2a.TaskStateWorking {
			return
		}
	}
	b.Fatalf("task %s did not start working", d.task)
}

func (d *directClient) signal(b *testing.B, c steering.Control, text string) {
	m := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
	m.TaskID = d.task
	m.Metadata = map[string]any{steering.ControlKey: string(c)}
	if _, err := d.c.SendMessage(b.Context(), &a2a.SendMessageRequest{Message: m}); err != nil {
		b.Fatalf("%s: %v", c, err)
	}
}

func (d *directClient) end(b *testing.B) {
	if d.task != "" {
		if _, err := d.c.CancelTask(b.Context(), &a2a.CancelTaskRequest{ID: d.task}); err != nil {
			b.Fatal(err)
		}
	}
}
