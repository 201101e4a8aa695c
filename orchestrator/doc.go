// Package orchestrator wires orchd's parts into the daemon: it reads the
// configuration, builds the registry, serves the HTTP JSON API and owns
// every goroutine it starts until Run returns.
package orchestrator
