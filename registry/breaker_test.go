package registry

import (
	"errors"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/orchd/orchd/internal/testwait"
)

// breakerStep is one thing that happens to an agent's breaker, and how it
// must stand afterwards.
type breakerStep struct {
	// do is fail, ok, abandon, admit, refresh-ok, refresh-fail or wait.
	do   string
	wait time.Duration
	// admitErr is whether admit must be refused.
	admitErr bool

	state    BreakerState
	failures int
	opens    int
	// refusal is a substring of CallRefusal's answer; "" means none.
	refusal string
}

func TestBreaker_Transitions(t *testing.T) {
	t.Parallel()
	refused := errors.New("dial tcp 127.0.0.1:9: connect: connection refused")
	const open, closed, half = BreakerOpen, BreakerClosed, BreakerHalfOpen
	fail := func(st BreakerState, failures, opens int, refusal string) breakerStep {
		return breakerStep{do: "fail", state: st, failures: failures, opens: opens, refusal: refusal}
	}
	threeFailures := []breakerStep{fail(closed, 1, 0, ""), fail(closed, 2, 0, ""),
		fail(open, 3, 1, "3 calls failed in a row, last: dial tcp 127.0.0.1:9: connect: connection refused; retry after 10s")}
	tests := []struct {
		name  string
		steps []breakerStep
	}{
		{"three failures in a row open it", append(threeFailures,
			breakerStep{do: "admit", admitErr: true, state: open, failures: 3, opens: 1, refusal: "retry after 10s"},
			breakerStep{do: "wait", wait: 4 * time.Second, state: open, failures: 3, opens: 1, refusal: "retry after 6s"},
			breakerStep{do: "wait", wait: 5*time.Second + 800*time.Millisecond, state: open, failures: 3, opens: 1, refusal: "retry after 200ms"})},
		{"a success in between starts the count again", []breakerStep{
			fail(closed, 1, 0, ""), fail(closed, 2, 0, ""),
			{do: "ok", state: closed},
			fail(closed, 1, 0, ""), fail(closed, 2, 0, "")}},
		{"calls the caller gave up on or caused count neither way", []breakerStep{
			fail(closed, 1, 0, ""), fail(closed, 2, 0, ""),
			{do: "abandon", state: closed, failures: 2},
			{do: "abandon", state: closed, failures: 2},
			fail(open, 3, 1, "retry after 10s")}},
		{"after the backoff one call tries while the others are refused", append(threeFailures,
			breakerStep{do: "wait", wait: 10 * time.Second, state: open, failures: 3, opens: 1},
			breakerStep{do: "admit", state: half, failures: 3, opens: 1, refusal: "3 calls failed in a row, last: dial tcp 127.0.0.1:9: connect: connection refused; one call is trying it again"},
			breakerStep{do: "admit", admitErr: true, state: half, failures: 3, opens: 1, refusal: "one call is trying it again"},
			breakerStep{do: "ok", state: closed},
			breakerStep{do: "admit", state: closed})},
		{"a failed try doubles the backoff up to the cap", append(threeFailures,
			breakerStep{do: "wait", wait: 10 * time.Second, state: open, failures: 3, opens: 1},
			breakerStep{do: "admit", state: half, failures: 3, opens: 1, refusal: "trying"},
			fail(open, 4, 2, "4 calls failed in a row, last: dial tcp 127.0.0.1:9: connect: connection refused; retry after 20s"),
			breakerStep{do: "wait", wait: 20 * time.Second, state: open, failures: 4, opens: 2},
			breakerStep{do: "admit", state: half, failures: 4, opens: 2, refusal: "trying"},
			fail(open, 5, 3, "retry after 40s"),
			breakerStep{do: "wait", wait: 40 * time.Second, state: open, failures: 5, opens: 3},
			breakerStep{do: "admit", state: half, failures: 5, opens: 3, refusal: "trying"},
			fail(open, 6, 4, "retry after 40s"))},
		{"failures within the backoff do not extend it", append(threeFailures,
			breakerStep{do: "wait", wait: 5 * time.Second, state: open, failures: 3, opens: 1, refusal: "retry after 5s"},
			fail(open, 3, 1, "retry after 5s"))},
		{"after the backoff any failure reopens it", append(threeFailures,
			breakerStep{do: "wait", wait: 10 * time.Second, state: open, failures: 3, opens: 1},
			fail(open, 4, 2, "retry after 20s"))},
		{"a try that ends without a verdict lets the next call try", append(threeFailures,
			breakerStep{do: "wait", wait: 10 * time.Second, state: open, failures: 3, opens: 1},
			breakerStep{do: "admit", state: half, failures: 3, opens: 1, refusal: "trying"},
			breakerStep{do: "abandon", state: open, failures: 3, opens: 1},
			breakerStep{do: "admit", state: half, failures: 3, opens: 1, refusal: "trying"})},
		{"a try that never ends is given up on after the longest backoff", append(threeFailures,
			breakerStep{do: "wait", wait: 10 * time.Second, state: open, failures: 3, opens: 1},
			breakerStep{do: "admit", state: half, failures: 3, opens: 1, refusal: "trying"},
			breakerStep{do: "wait", wait: 39 * time.Second, state: half, failures: 3, opens: 1, refusal: "trying"},
			breakerStep{do: "wait", wait: time.Second, state: half, failures: 3, opens: 1},
			breakerStep{do: "admit", state: half, failures: 3, opens: 1, refusal: "trying"})},
		{"a card refresh closes it but the next opening lasts longer", append(append(threeFailures,
			breakerStep{do: "refresh-ok", state: closed, opens: 1}),
			fail(closed, 1, 1, ""), fail(closed, 2, 1, ""), fail(open, 3, 2, "retry after 20s"),
			breakerStep{do: "ok", state: closed})},
		{"a failed card refresh after the backoff reopens it", append(threeFailures,
			breakerStep{do: "wait", wait: 10 * time.Second, state: open, failures: 3, opens: 1},
			breakerStep{do: "refresh-fail", state: open, failures: 3, opens: 2, refusal: "last: card refresh: fetch card"},
			breakerStep{do: "admit", admitErr: true, state: open, failures: 3, opens: 2, refusal: "retry after 20s"})},
		{"a failed card refresh within the backoff changes nothing", append(threeFailures,
			breakerStep{do: "refresh-fail", state: open, failures: 3, opens: 1, refusal: "connection refused; retry after 10s"})},
		{"a card refresh of a closed breaker keeps its count", []breakerStep{
			fail(closed, 1, 0, ""),
			{do: "refresh-ok", state: closed, failures: 1},
			fail(closed, 2, 0, "")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newCardServer(t, card("B", ""))
			clk := newClock()
			r := newTestRegistry(t, Config{Now: clk.Now, BreakerMinBackoff: 10 * time.Second, BreakerMaxBackoff: 40 * time.Second})
			if _, err := r.Add(t.Context(), Spec{ID: "b", URL: s.URL}); err != nil {
				t.Fatal(err)
			}
			for i, st := range tt.steps {
				var admitErr error
				switch st.do {
				case "fail":
					r.CallFailed("b", refused)
				case "ok":
					r.CallSucceeded("b")
				case "abandon":
					r.CallAbandoned("b")
				case "admit":
					admitErr = r.Admit("b")
				case "refresh-ok", "refresh-fail":
					status := http.StatusOK
					if st.do == "refresh-fail" {
						status = http.StatusBadGateway
					}
					s.set(func(s *cardServer) { s.status = status })
					if _, err := r.Refresh(t.Context(), "b"); (err != nil) != (status != http.StatusOK) {
						t.Fatalf("step %d: refresh: %v", i, err)
					}
				case "wait":
					clk.Advance(st.wait)
				default:
					t.Fatalf("step %d: unknown %q", i, st.do)
				}
				a, _ := r.Get("b")
				b := a.Breaker
				where := st.do
				if st.do == "wait" {
					where += " " + st.wait.String()
				}
				type view struct {
					State           BreakerState
					Failures, Opens int
				}
				if diff := cmp.Diff(view{st.state, st.failures, st.opens}, view{b.State, b.Failures, b.Opens}); diff != "" {
					t.Fatalf("step %d (%s): breaker (-want +got):\n%s", i, where, diff)
				}
				if got := r.CallRefusal(a); st.refusal == "" && got != "" || !strings.Contains(got, st.refusal) {
					t.Fatalf("step %d (%s): refusal %q, want %q", i, where, got, st.refusal)
				}
				if st.do == "admit" && (admitErr != nil) != st.admitErr {
					t.Fatalf("step %d: Admit = %v, want refused %v", i, admitErr, st.admitErr)
				}
				if admitErr != nil && (!errors.Is(admitErr, ErrBreakerOpen) || !strings.Contains(admitErr.Error(), st.refusal)) {
					t.Fatalf("step %d: Admit = %v, want ErrBreakerOpen saying %q", i, admitErr, st.refusal)
				}
				// The registry view: healthy only while closed, with why.
				if a.Healthy != b.closed() || a.Healthy != (a.UnhealthyReason == "") ||
					!a.Healthy && !strings.Contains(a.UnhealthyReason, "breaker "+string(b.State)+": ") {
					t.Fatalf("step %d (%s): healthy %v, reason %q with breaker %s", i, where, a.Healthy, a.UnhealthyReason, b.State)
				}
				// An open breaker brings the card's next revalidation
				// forward to when its backoff ends.
				if b.State == BreakerOpen && a.nextCheck.After(b.RetryAt) {
					t.Fatalf("step %d (%s): next card check %v after retry at %v", i, where, a.nextCheck, b.RetryAt)
				}
			}
		})
	}
}

// Many calls at once after the backoff: exactly one is let through to try
// the agent again.
func TestBreaker_OneCallTriesAgain(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("B", ""))
	clk := newClock()
	r := newTestRegistry(t, Config{Now: clk.Now, BreakerAfter: 2, BreakerMinBackoff: time.Second})
	if _, err := r.Add(t.Context(), Spec{ID: "b", URL: s.URL}); err != nil {
		t.Fatal(err)
	}
	// Failures and successes race with lookups.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 50 {
				if i%2 == 0 {
					r.CallFailed("b", syscall.ECONNREFUSED)
				} else {
					r.CallSucceeded("b")
				}
				a, _ := r.Get("b")
				_ = r.CallRefusal(a)
				_ = r.BySkill("research")
			}
		})
	}
	wg.Wait()
	r.CallSucceeded("b")
	r.CallFailed("b", syscall.ECONNREFUSED)
	r.CallFailed("b", syscall.ECONNREFUSED)
	if a, _ := r.Get("b"); a.Breaker.State != BreakerOpen {
		t.Fatalf("breaker %s after two failures", a.Breaker.State)
	}
	clk.Advance(time.Second)
	const callers = 32
	admitted := make(chan error, callers)
	for range callers {
		wg.Go(func() { admitted <- r.Admit("b") })
	}
	wg.Wait()
	close(admitted)
	through := 0
	for err := range admitted {
		if err == nil {
			through++
		} else if !errors.Is(err, ErrBreakerOpen) {
			t.Errorf("Admit = %v", err)
		}
	}
	if through != 1 {
		t.Errorf("%d calls let through to try again, want 1", through)
	}
}

// The refresher revalidates the card of an agent whose breaker is open
// when the backoff ends; a card that answers closes the breaker without
// any call.
func TestBreaker_RefresherFindsTheAgentBack(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("B", ""))
	s.set(func(s *cardServer) { s.cacheControl = "max-age=3600" })
	clk := newClock()
	r := newTestRegistry(t, Config{Now: clk.Now, BreakerMinBackoff: time.Minute, RefreshInterval: 5 * time.Millisecond})
	if _, err := r.Add(t.Context(), Spec{ID: "b", URL: s.URL}); err != nil {
		t.Fatal(err)
	}
	r.Start()
	for range 3 {
		r.CallFailed("b", syscall.ECONNREFUSED)
	}
	fetches := s.requests.Load()
	time.Sleep(50 * time.Millisecond)
	if a, _ := r.Get("b"); a.Breaker.State != BreakerOpen || s.requests.Load() != fetches {
		t.Fatalf("within the backoff: breaker %s, %d card fetches", a.Breaker.State, s.requests.Load()-fetches)
	}
	clk.Advance(time.Minute)
	testwait.Until(t, 10*time.Second, "the breaker to close", func() bool {
		a, _ := r.Get("b")
		return a.Breaker.closed() && a.Healthy
	})
}

func TestBreaker_Disabled(t *testing.T) {
	t.Parallel()
	s := newCardServer(t, card("B", ""))
	r := newTestRegistry(t, Config{BreakerAfter: -1})
	if _, err := r.Add(t.Context(), Spec{ID: "b", URL: s.URL}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		r.CallFailed("b", syscall.ECONNREFUSED)
	}
	a, _ := r.Get("b")
	if err := r.Admit("b"); err != nil {
		t.Errorf("breaker off: Admit = %v", err)
	}
	if !a.Healthy {
		t.Errorf("breaker off: unhealthy: %s", a.UnhealthyReason)
	}
	if diff := cmp.Diff(Breaker{State: BreakerClosed}, a.Breaker, cmpopts.IgnoreUnexported(Breaker{}), cmpopts.IgnoreFields(Breaker{}, "LastError")); diff != "" {
		t.Errorf("breaker off (-want +got):\n%s", diff)
	}
	if why := r.CallRefusal(a); why != "" {
		t.Errorf("breaker off: calls refused: %s", why)
	}
}

// TestBreaker_ClosedDoesNotAllocate guards the path every call to an
// agent that answers takes.
func TestBreaker_ClosedDoesNotAllocate(t *testing.T) {
	r, srv := fleet(t, 4)
	defer srv.Close()
	defer r.Close()
	a, _ := r.Get("agent-1")
	ops := map[string]func(){
		"Admit":         func() { _ = r.Admit("agent-1") },
		"CallSucceeded": func() { r.CallSucceeded("agent-1") },
		"CallAbandoned": func() { r.CallAbandoned("agent-1") },
		"CallRefusal":   func() { _ = r.CallRefusal(a) },
	}
	for name, fn := range ops {
		if n := testing.AllocsPerRun(1000, fn); n != 0 {
			t.Errorf("%s allocates %v times per call", name, n)
		}
	}
}

func BenchmarkBreaker(b *testing.B) {
	r, srv := fleet(b, 64)
	defer srv.Close()
	defer r.Close()
	a, _ := r.Get("agent-7")
	for name, fn := range map[string]func(){
		"Admit":         func() { _ = r.Admit("agent-7") },
		"CallSucceeded": func() { r.CallSucceeded("agent-7") },
		"CallRefusal":   func() { _ = r.CallRefusal(a) },
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				fn()
			}
		})
	}
}
