// Package testengine gives the tests of other packages what a delegation
// engine is built from, as the daemon builds it, on loopback: a registry
// that may reach 127.0.0.0/8 holding the test's agents, the built-in
// policies, and an HTTP client through the registry's transport. What it
// opens is closed when the test ends.
package testengine

import (
	"net/http"
	"testing"

	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
)

// Parts are what delegation.NewEngine takes besides a store and config.
type Parts struct {
	Registry   *registry.Registry
	Policies   *policies.Engine
	HTTPClient *http.Client // for delegation.Config.HTTPClient
}

// New builds the parts with agents registered, failing the test if it
// cannot.
func New(t testing.TB, agents ...registry.Spec) Parts {
	t.Helper()
	nets := registry.Config{AllowNetworks: []string{"127.0.0.0/8"}}
	reg, err := registry.New(nets, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(reg.Close)
	for _, a := range agents {
		if _, err := reg.Add(t.Context(), a); err != nil {
			t.Fatal(err)
		}
	}
	pol, err := policies.NewEngine(nil, policies.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	transport, err := registry.NewTransport(nets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(transport.CloseIdleConnections)
	return Parts{Registry: reg, Policies: pol, HTTPClient: &http.Client{Transport: transport}}
}
