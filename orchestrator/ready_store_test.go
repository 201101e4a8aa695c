package orchestrator

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/internal/testagent"
	"github.com/orchd/orchd/internal/testwait"
)

const workBody = `{"skill":"work","message":{"role":"ROLE_USER","parts":[{"text":"go"}]}}`

// TestReady_StoreFull fills the embedded store to store.maxBytes (with a
// stream of its own: what fills it does not matter to JetStream, which
// refuses every write once its use is over the limit): /readyz answers
// 503 saying the store is full, also after a restart, and 200 again, with
// no restart, once there is room. A write the full store refuses is not
// tried again until the store's timeout: new work is refused at once.
func TestReady_StoreFull(t *testing.T) {
	t.Parallel()
	agent := testagent.Start(t, testagent.Options{Name: "Worker", Skill: "work"}, testagent.Reply("done"))
	cfg := loadDefaults(t)
	cfg.StateDir = t.TempDir()
	cfg.Store.MaxBytes = 1 << 20
	// A write refused as full is not tried again until the timeout: a
	// long one tells the two apart however busy the machine.
	cfg.Store.Timeout = Duration(20 * time.Second)
	cfg.Listen = "127.0.0.1:0"
	run := func() (*Daemon, string, func()) {
		d, err := New(cfg, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		stop := sync.OnceFunc(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
		t.Cleanup(stop)
		testwait.Until(t, 10*time.Second, "the daemon binding its port", func() bool { return d.Addr() != nil })
		return d, "http://" + d.Addr().String(), stop
	}
	readyz := func(base string) (int, string) {
		var r httpapi.Readiness
		code := call(t, "GET", base+"/readyz", "", &r)
		return code, strings.Join(r.Reasons, " ")
	}
	d, base, stop := run()
	if code := call(t, "POST", base+"/v1/agents", `{"url":"`+agent.URL+`"}`, nil); code != 201 {
		t.Fatalf("add agent = %d", code)
	}
	js := d.state.st.JetStream()
	if _, err := js.CreateStream(t.Context(), jetstream.StreamConfig{Name: "filler", Subjects: []string{"filler"}, Storage: jetstream.FileStorage}); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 32<<10)
	for i := 0; ; i++ {
		if _, err := js.Publish(t.Context(), "filler", chunk); err != nil {
			t.Logf("full after %d KiB: %v", i*32, err)
			break
		}
		if i > 100 {
			t.Fatal("3 MiB went into a store of 1 MiB")
		}
	}
	if code, why := readyz(base); code != 503 || !strings.Contains(why, "state store full") {
		t.Errorf("/readyz on a full store = %d %q, want 503 saying it is full", code, why)
	}
	start := time.Now()
	if code := post(base+"/v1/delegations", workBody); code != 503 {
		t.Errorf("delegate on a full store = %d, want 503", code)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a delegation refused by a full store took %s to answer, as if its writes were tried until store.timeout (20s)", took)
	}
	stop()

	d, base, _ = run()
	if code, why := readyz(base); code != 503 || !strings.Contains(why, "state store full") {
		t.Errorf("/readyz after a restart on a full store = %d %q, want 503 saying it is full", code, why)
	}
	js = d.state.st.JetStream()
	filler, err := js.Stream(t.Context(), "filler")
	if err != nil {
		t.Fatal(err)
	}
	if err := filler.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code, why := readyz(base); code != 200 {
		t.Errorf("/readyz with room again = %d %q, want 200", code, why)
	}
	if code := post(base+"/v1/delegations", workBody); code != 201 {
		t.Errorf("delegate with room again = %d, want 201", code)
	}
	if err := js.DeleteStream(t.Context(), "filler"); err != nil {
		t.Fatal(err)
	}
}

// post posts body and returns the status, 0 when there was no answer
// within 20s.
func post(url, body string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}
