// Package webhooktest runs receivers of A2A push notifications for tests:
// real HTTP servers on 127.0.0.1 that record what they get, as a caller's
// webhook would.
package webhooktest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// IDHeader carries a notification's id, the same on every attempt, as
// orchd sends it.
const IDHeader = "Orchd-Notification-Id"

// Received is one request a webhook got.
type Received struct {
	// ID is the notification's id (IDHeader); Token and Auth are its
	// A2A-Notification-Token and Authorization headers.
	ID, Token, Auth string
	// Status is what the webhook answered: 200, 503 while it fails, 400
	// for a body that is not a notification.
	Status int
	// Event is the notification's event.
	Event a2a.Event
}

// Webhook is a real receiver on 127.0.0.1 recording what it gets. It
// answers 503 to its first fail requests; with hang set it answers
// nothing until the request ends.
type Webhook struct {
	*httptest.Server
	mu   sync.Mutex
	got  []Received
	fail int
	hang bool
	// Hanging counts the requests a hanging webhook holds.
	Hanging atomic.Int32
	// stop releases hanging requests when the test ends, before Close
	// waits for them.
	stop chan struct{}
}

// Start runs a webhook until the test ends: one that fails its first
// fail requests (503), or, with hang, one that never answers.
func Start(t testing.TB, fail int, hang bool) *Webhook {
	t.Helper()
	w := &Webhook{fail: fail, hang: hang, stop: make(chan struct{})}
	w.Server = httptest.NewServer(http.HandlerFunc(w.serve))
	t.Cleanup(func() { close(w.stop); w.Close() })
	return w
}

func (w *Webhook) serve(rw http.ResponseWriter, r *http.Request) {
	if w.hang {
		w.Hanging.Add(1)
		defer w.Hanging.Add(-1)
		select {
		case <-r.Context().Done():
		case <-w.stop:
		}
		return
	}
	b, _ := io.ReadAll(r.Body)
	var sr a2a.StreamResponse
	rec := Received{ID: r.Header.Get(IDHeader), Token: r.Header.Get("A2A-Notification-Token"), Auth: r.Header.Get("Authorization"), Status: 200}
	if err := json.Unmarshal(b, &sr); err != nil {
		rec.Status = 400
	}
	rec.Event = sr.Event
	w.mu.Lock()
	if w.fail > 0 {
		w.fail--
		rec.Status = 503
	}
	w.got = append(w.got, rec)
	w.mu.Unlock()
	rw.WriteHeader(rec.Status)
}

// Delivered returns the requests answered 2xx, in arrival order.
func (w *Webhook) Delivered() []Received {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.DeleteFunc(slices.Clone(w.got), func(r Received) bool { return r.Status != 200 })
}

// All returns every request, in arrival order.
func (w *Webhook) All() []Received {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

// WaitState waits until a delivered notification shows state, and
// returns those delivered by then.
func (w *Webhook) WaitState(t testing.TB, state a2a.TaskState) []Received {
	t.Helper()
	return w.WaitFor(t, "state "+string(state), func(r Received) bool { return StateOf(r.Event) == state })
}

// WaitFor waits until a delivered notification satisfies ok, for up to
// 20 seconds, and returns those delivered by then.
func (w *Webhook) WaitFor(t testing.TB, what string, ok func(Received) bool) []Received {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := w.Delivered()
		if slices.ContainsFunc(got, ok) {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("no notification with %s within 20s; got %s", what, States(got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// StateOf is the task state an event carries, "" for artifacts.
func StateOf(ev a2a.Event) a2a.TaskState {
	switch e := ev.(type) {
	case *a2a.Task:
		return e.Status.State
	case *a2a.TaskStatusUpdateEvent:
		return e.Status.State
	}
	return ""
}

// States lists the requests' events for a failure message: each one's
// state, or "artifact".
func States(rs []Received) string {
	var b strings.Builder
	for _, r := range rs {
		switch r.Event.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			b.WriteString("artifact ")
		default:
			b.WriteString(string(StateOf(r.Event)) + " ")
		}
	}
	return b.String()
}
