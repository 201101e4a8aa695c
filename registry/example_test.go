package registry_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/orchd/orchd/registry"
)

// ExampleRegistry_Add registers an agent served on this machine and looks
// it up by capability.
func ExampleRegistry_Add() {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != registry.WellKnownPath {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "max-age=300")
		fmt.Fprint(w, `{"name": "Summarizer", "version": "1.2.0",
		  "supportedInterfaces": [{"url": "http://127.0.0.1/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
		  "capabilities": {"streaming": true},
		  "skills": [{"id": "summarize", "name": "Summarize", "tags": ["text"]}]}`)
	}))
	defer agent.Close()

	// The zero Config refuses loopback; allow it for this local agent.
	reg, err := registry.New(registry.Config{AllowNetworks: []string{"127.0.0.0/8"}}, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer reg.Close()

	a, err := reg.Add(context.Background(), registry.Spec{URL: agent.URL})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(a.ID, a.Versions(""), a.ClientCompatible)
	for _, s := range reg.ByCapability("streaming") {
		fmt.Println("streams:", s.ID)
	}
	// Output:
	// summarizer [1.0] true
	// streams: summarizer
}
