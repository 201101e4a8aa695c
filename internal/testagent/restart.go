package testagent

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
)

// Stop closes the agent's listener and every connection to it, as if its
// process had died: calls to its URL are refused from now on. Restart
// serves it again.
func (a *Agent) Stop() {
	a.CloseClientConnections()
	a.Close()
}

// Restart serves a stopped agent again on the address it had, as a
// restarted process would: same URL, same card, and what it recorded so
// far. It fails the test when the address cannot be bound again.
func (a *Agent) Restart(t testing.TB) {
	t.Helper()
	addr := a.Listener.Addr().String()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("restart agent on %s: %v", addr, err)
	}
	srv := httptest.NewUnstartedServer(a.Config.Handler)
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	a.Server = srv
}

// BrokenStatus serves a valid card whose A2A endpoint answers every call
// with the HTTP status.
func BrokenStatus(t testing.TB, name, skill string, status int) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	card := &a2a.AgentCard{Name: name, Description: "broken", Version: "1",
		SupportedInterfaces: []*a2a.AgentInterface{a2a.NewAgentInterface(srv.URL+"/rpc", a2a.TransportProtocolJSONRPC)},
		Skills:              []a2a.AgentSkill{{ID: skill, Name: skill, Tags: []string{}}}}
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewStaticAgentCardHandler(card))
	mux.HandleFunc("/rpc", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, http.StatusText(status), status)
	})
	return srv
}
