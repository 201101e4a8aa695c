package testagent

import (
	"net/http"
	"sync"
)

// Request is what the agent saw of one A2A request besides its body: the
// JSON-RPC method and the HTTP headers.
type Request struct {
	Method string
	Header http.Header
}

// requestLog records the agent's A2A requests.
type requestLog struct {
	mu   sync.Mutex
	reqs []Request
}

func (l *requestLog) add(method string, h http.Header) {
	l.mu.Lock()
	l.reqs = append(l.reqs, Request{Method: method, Header: h.Clone()})
	l.mu.Unlock()
}

// Requests lists the A2A requests the agent received, in order, with the
// headers each came with: to check what a caller passed on (trace
// context, say) on every call, not only the first.
func (a *Agent) Requests() []Request {
	a.requests.mu.Lock()
	defer a.requests.mu.Unlock()
	return append([]Request(nil), a.requests.reqs...)
}
