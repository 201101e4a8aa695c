package a2aserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/google/go-cmp/cmp"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/orchd/orchd/auth"
	"github.com/orchd/orchd/internal/syncbuf"
	"github.com/orchd/orchd/internal/testwait"
	"github.com/orchd/orchd/internal/webhooktest"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/store"
)

// loopbackNetworks is the development opt-in that lets webhooks on this
// machine, such as the tests' receivers, take notifications.
var loopbackNetworks = []string{"127.0.0.0/8", "::1/128"}

// TestPushURLCheck_AllowHosts: with the default networks (public ones
// only), a host named in allowHosts is let in wherever it resolves, while
// an address is not.
func TestPushURLCheck_AllowHosts(t *testing.T) {
	t.Parallel()
	check, err := newPushURLCheck(nil, []string{"localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if err := check.url(t.Context(), "http://localhost:9/"); err != nil {
		t.Errorf("a host in allowHosts: %v", err)
	}
	if err := check.url(t.Context(), "http://127.0.0.1:9/"); err == nil {
		t.Error("allowHosts let an address in")
	}
}

// pushOutOn is a sender over a memory config store holding one config of
// alice's for task "t" with url, and the metrics reader it counts into.
func pushOutOn(t *testing.T, cfg PushConfig, url string) (*PushOut, *sdkmetric.ManualReader, *syncbuf.Buffer) {
	t.Helper()
	if pushIDHeader != webhooktest.IDHeader {
		t.Fatalf("notifications carry their id in %s, but the tests' webhooks read %s", pushIDHeader, webhooktest.IDHeader)
	}
	configs, err := store.NewMemoryPushConfigs(cfg.StoreConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cc := a2asrv.NewCallContext(t.Context(), nil)
	cc.User = a2asrv.NewAuthenticatedUser("alice", nil)
	if _, err := configs.Save(ctx, "t", &a2a.PushConfig{ID: "c", URL: url, Token: "tok-secret-3"}); err != nil {
		t.Fatal(err)
	}
	reader := sdkmetric.NewManualReader()
	logs := &syncbuf.Buffer{}
	cfg.AllowNetworks = loopbackNetworks
	o, err := NewPushOut(cfg, registry.Config{}, configs, sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)), slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	return o, reader, logs
}

// counted is the orchd.push.notifications count with outcome.
func counted(t *testing.T, r *sdkmetric.ManualReader, outcome string) int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "orchd.push.notifications" {
				for _, dp := range sum.DataPoints {
					if v, _ := dp.Attributes.Value("outcome"); v.AsString() == outcome {
						n += dp.Value
					}
				}
			}
		}
	}
	return n
}

// givenUpLogged reads a text log: the push notifications given up logged
// one by one, and those the summary lines count.
func givenUpLogged(t *testing.T, logs string) (lines, summed int) {
	t.Helper()
	for line := range strings.Lines(logs) {
		switch {
		case strings.Contains(line, `msg="push notification given up"`):
			lines++
		case strings.Contains(line, `msg="push notifications given up and not logged one by one"`):
			m := regexp.MustCompile(` notifications=(\d+) `).FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("a summary without its count: %s", line)
			}
			n, _ := strconv.Atoi(m[1])
			summed += n
		}
	}
	return lines, summed
}

func statusEvent(state a2a.TaskState) a2a.Event {
	return &a2a.TaskStatusUpdateEvent{TaskID: "t", ContextID: "ctx", Status: a2a.TaskStatus{State: state}}
}

// TestPushOut_CloseStopsRetries: close ends the retries of a webhook that
// always fails at once, and every notification left is given up, logged
// and counted, without the token.
func TestPushOut_CloseStopsRetries(t *testing.T) {
	t.Parallel()
	hook := webhooktest.Start(t, 1<<30, false)
	o, reader, logs := pushOutOn(t, PushConfig{Backoff: time.Hour, MaxBackoff: time.Hour}, hook.URL)
	const sent = 5
	for range sent {
		if err := o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: hook.URL}, statusEvent(a2a.TaskStateWorking)); err != nil {
			t.Fatal(err)
		}
	}
	testwait.Until(t, 10*time.Second, "a first attempt", func() bool { return len(hook.All()) > 0 })
	start := time.Now()
	o.Close()
	// close tries each queued notification once more, for up to
	// pushDrain, and never waits out an hour's backoff.
	if took := time.Since(start); took > pushDrain+2*time.Second {
		t.Errorf("close took %s with retries an hour apart", took)
	}
	if n := counted(t, reader, "given_up"); n != sent {
		t.Errorf("%d given up counted, want %d", n, sent)
	}
	// One line for the webhook's host, a summary for the rest.
	if lines, summed := givenUpLogged(t, logs.String()); lines != 1 || lines+summed != sent {
		t.Errorf("%d given up logged one by one and %d in summaries, want 1 and %d:\n%s", lines, summed, sent-1, logs)
	}
	if strings.Contains(logs.String(), "tok-secret-3") {
		t.Errorf("the log shows the token:\n%s", logs)
	}
	// After close, a notification is given up at once.
	_ = o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: hook.URL}, statusEvent(a2a.TaskStateCompleted))
	if n := counted(t, reader, "given_up"); n != sent+1 {
		t.Errorf("after close: %d given up, want %d", n, sent+1)
	}
}

// TestPushOut_CloseDelivers: what is still queued when orchd stops, such
// as the final states of the tasks it fails as it stops, is tried once
// more at once, so a webhook that answers gets it.
func TestPushOut_CloseDelivers(t *testing.T) {
	t.Parallel()
	hook := webhooktest.Start(t, 1, false)
	o, reader, _ := pushOutOn(t, PushConfig{Backoff: time.Hour, MaxBackoff: time.Hour}, hook.URL)
	// Three local POSTs take milliseconds, but a machine loaded with the
	// race detector and other tests has taken over pushDrain for them.
	o.drain = 10 * time.Second
	states := []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateInputRequired, a2a.TaskStateFailed}
	for _, st := range states {
		if err := o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: hook.URL}, statusEvent(st)); err != nil {
			t.Fatal(err)
		}
	}
	// The first attempt fails: an hour's backoff.
	testwait.Until(t, 10*time.Second, "a first attempt", func() bool { return len(hook.All()) > 0 })
	start := time.Now()
	o.Close()
	if took := time.Since(start); took > o.drain {
		t.Errorf("close took %s, over its drain of %s", took, o.drain)
	}
	got := hook.Delivered()
	if len(got) != len(states) {
		t.Fatalf("%d delivered, want %d", len(got), len(states))
	}
	for i, r := range got {
		if st := r.Event.(*a2a.TaskStatusUpdateEvent).Status.State; st != states[i] {
			t.Errorf("notification %d is %s, want %s", i, st, states[i])
		}
	}
	if n := counted(t, reader, "given_up"); n != 0 {
		t.Errorf("%d given up", n)
	}
}

// TestPushOut_CloseRetriesAnAttemptInFlight: a notification whose attempt
// is still waiting for the webhook when orchd starts to stop, and then
// fails, gets its one last try too.
func TestPushOut_CloseRetriesAnAttemptInFlight(t *testing.T) {
	t.Parallel()
	arrived, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if calls.Add(1) == 1 {
			close(arrived)
			<-release // answered once close has begun
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(hook.Close)
	o, reader, _ := pushOutOn(t, PushConfig{Backoff: time.Hour, MaxBackoff: time.Hour}, hook.URL)
	o.drain = 10 * time.Second
	if err := o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: hook.URL}, statusEvent(a2a.TaskStateFailed)); err != nil {
		t.Fatal(err)
	}
	<-arrived
	closed := make(chan struct{})
	go func() { defer close(closed); o.Close() }()
	testwait.Until(t, 10*time.Second, "close to begin draining", o.isDraining)
	close(release)
	<-closed
	if n := calls.Load(); n != 2 {
		t.Errorf("the webhook was called %d times, want the failed attempt and one last try", n)
	}
	if n := counted(t, reader, "delivered"); n != 1 {
		t.Errorf("%d delivered, want 1", n)
	}
	if n := counted(t, reader, "given_up"); n != 0 {
		t.Errorf("%d given up", n)
	}
}

// TestPushOut_Bounds: past the per-config queue bound notifications are
// given up at once and SendPush never waits; a failing webhook gets
// MaxAttempts tries of a notification, then it is given up.
func TestPushOut_Bounds(t *testing.T) {
	t.Parallel()
	t.Run("queue", func(t *testing.T) {
		t.Parallel()
		dead := webhooktest.Start(t, 0, true)
		o, reader, _ := pushOutOn(t, PushConfig{QueuePerConfig: 3}, dead.URL)
		defer o.Close()
		start := time.Now()
		for range 10 {
			_ = o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: dead.URL}, statusEvent(a2a.TaskStateWorking))
		}
		if took := time.Since(start); took > time.Second {
			t.Errorf("10 SendPush to a dead webhook took %s", took)
		}
		// The first is in flight, two wait behind it: seven have no room.
		if n := counted(t, reader, "given_up"); n != 7 {
			t.Errorf("%d given up at once, want 7", n)
		}
	})
	t.Run("tenant queue", func(t *testing.T) {
		t.Parallel()
		dead := webhooktest.Start(t, 0, true)
		o, reader, _ := pushOutOn(t, PushConfig{QueuePerTenant: 5}, dead.URL)
		defer o.Close()
		acme := auth.WithPrincipal(t.Context(), &auth.Principal{ID: "alice", Tenant: "acme"})
		globex := auth.WithPrincipal(t.Context(), &auth.Principal{ID: "bob", Tenant: "globex"})
		for range 10 {
			_ = o.SendPush(acme, &a2a.PushConfig{ID: "c", TaskID: "t", URL: dead.URL}, statusEvent(a2a.TaskStateWorking))
		}
		if n := counted(t, reader, "given_up"); n != 5 {
			t.Errorf("%d of acme's 10 given up, want 5 over its share of the queue", n)
		}
		for range 3 {
			_ = o.SendPush(globex, &a2a.PushConfig{ID: "c", TaskID: "t", URL: dead.URL}, statusEvent(a2a.TaskStateWorking))
		}
		if n := counted(t, reader, "given_up"); n != 5 {
			t.Errorf("%d given up after globex's 3, want still 5: acme's share is not globex's", n)
		}
	})
	t.Run("attempts", func(t *testing.T) {
		t.Parallel()
		failing := webhooktest.Start(t, 1<<30, false)
		o, reader, _ := pushOutOn(t, PushConfig{MaxAttempts: 3, Backoff: time.Millisecond}, failing.URL)
		defer o.Close()
		_ = o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: failing.URL}, statusEvent(a2a.TaskStateWorking))
		testwait.Until(t, 10*time.Second, "the notification given up", func() bool { return counted(t, reader, "given_up") >= 1 })
		got := failing.All()
		if len(got) != 3 || got[0].ID != got[2].ID {
			t.Errorf("the webhook saw %d attempts, want 3 of one notification id", len(got))
		}
	})
}

// TestPushOut_GivenUpLogIsBounded: a dead webhook whose notifications are
// given up by the hundred, and thirty more hosts, cost ten WARN lines and
// one summary per period, which counts every one of the others; the
// summary comes when the period ends, and the next period logs afresh.
func TestPushOut_GivenUpLogIsBounded(t *testing.T) {
	t.Parallel()
	dead := webhooktest.Start(t, 0, true)
	// One notification fills the queue; the others are given up at once.
	o, reader, logs := pushOutOn(t, PushConfig{QueueSize: 1}, dead.URL)
	o.gaveUp.period = time.Hour // the summary comes at close
	o.drain = 10 * time.Millisecond
	send := func(url string) {
		_ = o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: url}, statusEvent(a2a.TaskStateWorking))
	}
	for range 501 {
		send(dead.URL)
	}
	for i := range 30 {
		send("http://127.0.0.1:" + strconv.Itoa(10000+i) + "/hook")
	}
	if lines, _ := givenUpLogged(t, logs.String()); lines != pushLogLines {
		t.Errorf("%d given up logged one by one during the period, want %d", lines, pushLogLines)
	}
	o.Close()
	// The one in flight is given up at close too: 531 in all.
	lines, summed := givenUpLogged(t, logs.String())
	type givenUp struct{ OneByOne, InAll, Counted int64 }
	got := givenUp{int64(lines), int64(lines + summed), counted(t, reader, "given_up")}
	if diff := cmp.Diff(givenUp{pushLogLines, 531, 531}, got); diff != "" {
		t.Errorf("notifications given up, logged one by one, logged in all and counted (-want +got):\n%s\nlog:\n%s", diff, logs)
	}
	if !strings.Contains(logs.String(), "hosts=\""+dead.Listener.Addr().String()+" (") {
		t.Errorf("the summary does not name the dead webhook's host first:\n%s", logs)
	}

	// A period that ends writes its summary by itself.
	o, _, logs = pushOutOn(t, PushConfig{QueueSize: 1}, dead.URL)
	defer o.Close()
	o.gaveUp.period = 50 * time.Millisecond
	o.drain = 10 * time.Millisecond
	for range 101 {
		_ = o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: dead.URL}, statusEvent(a2a.TaskStateWorking))
	}
	testwait.Until(t, 10*time.Second, "the period's summary", func() bool { _, summed := givenUpLogged(t, logs.String()); return summed == 99 })
	_ = o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: dead.URL}, statusEvent(a2a.TaskStateWorking))
	if lines, _ := givenUpLogged(t, logs.String()); lines != 2 {
		t.Errorf("%d logged one by one after a new period began, want 2:\n%s", lines, logs)
	}
}

// TestPushOut_NoRedirects: a webhook answering a redirect is not
// followed, so the token goes nowhere else, and the notification is given
// up without retries.
func TestPushOut_NoRedirects(t *testing.T) {
	t.Parallel()
	elsewhere := webhooktest.Start(t, 0, false)
	redirect := httptest.NewServer(http.RedirectHandler(elsewhere.URL, http.StatusTemporaryRedirect))
	t.Cleanup(redirect.Close)
	o, reader, logs := pushOutOn(t, PushConfig{Backoff: time.Millisecond}, redirect.URL)
	defer o.Close()
	_ = o.SendPush(t.Context(), &a2a.PushConfig{ID: "c", TaskID: "t", URL: redirect.URL}, statusEvent(a2a.TaskStateWorking))
	testwait.Succeeds(t, 10*time.Second, "the notification given up", func() error {
		if counted(t, reader, "given_up") < 1 {
			return fmt.Errorf("not yet; the log:\n%s", logs)
		}
		return nil
	})
	if n := len(elsewhere.All()); n != 0 {
		t.Errorf("the redirect was followed %d times", n)
	}
	if !strings.Contains(logs.String(), "answered 307, which no retry changes") {
		t.Errorf("log does not say why:\n%s", logs)
	}
}

// FuzzPushURLCheck checks webhook URLs whose host is an address (names
// would need DNS): a refusal wraps ErrInvalidParams and shows neither the
// URL's path nor its query; an address the guard allows is never refused.
func FuzzPushURLCheck(f *testing.F) {
	f.Add("http://10.20.30.40:9/hook?token=secret")
	f.Add("https://[fd00::1]/a")
	f.Add("http://127.0.0.1/x")
	f.Add("https://8.8.8.8/")
	f.Add("http://[::ffff:192.168.0.1]/p")
	c, err := newPushURLCheck([]string{"127.0.0.0/8"}, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err != nil {
			return
		}
		ip, err := netip.ParseAddr(u.Hostname())
		if err != nil {
			return // a name: resolving it is not this test's business
		}
		err = c.url(context.Background(), raw)
		if err == nil {
			return
		}
		if !errors.Is(err, a2a.ErrInvalidParams) {
			t.Fatalf("url(%q) = %v; want ErrInvalidParams", raw, err)
		}
		for _, part := range []string{u.RawQuery, u.Path} {
			if len(part) > 3 && strings.Contains(err.Error(), part) {
				t.Fatalf("url(%q) = %v: shows %q", raw, err, part)
			}
		}
		if ip = ip.Unmap().WithZone(""); ip.IsLoopback() && ip.Is4() {
			t.Fatalf("url(%q) refused an allowed address: %v", raw, err)
		}
	})
}
