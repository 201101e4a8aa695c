package testagent

import (
	"net/http"
	"net/http/httptest"
	"sync"
)

// hold is a method whose answers wait for release.
type hold struct {
	method   string
	released chan struct{}
}

// Hold delays the agent's answers to the unary JSON-RPC method (GetTask,
// say): each such request is served when it arrives, so its answer says
// how things stood then, but the answer is sent only once release is
// called, as from an agent whose answers are slow to come back. release
// sends every held answer and stops holding; calling it again does
// nothing.
func (a *Agent) Hold(method string) (release func()) {
	h := &hold{method: method, released: make(chan struct{})}
	a.held.Store(h)
	var once sync.Once
	return func() {
		once.Do(func() {
			a.held.CompareAndSwap(h, nil)
			close(h.released)
		})
	}
}

// serve answers r into a recorder at once and sends the answer on release,
// unless the caller or the agent gives up first.
func (h *hold) serve(a *Agent, next http.Handler, w http.ResponseWriter, r *http.Request) {
	rec := httptest.NewRecorder()
	next.ServeHTTP(rec, r)
	select {
	case <-h.released:
	case <-r.Context().Done():
		return
	case <-a.stopped.Done():
		return
	}
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}
