// Package orchestrator wires orchd's parts into the daemon: it reads the
// configuration, keeps the state, builds the registry, the policies and
// the delegation engine over the store, mounts the fronts in front of
// them, and owns every goroutine it starts until Run returns.
//
// What it holds:
//
//   - Configuration: the config file's sections, their defaults
//     (defaults.yaml) and checks (config.go, validate.go, configerrors.go,
//     and the sections of each part: httpconfig.go, logconfig.go,
//     agentconfig.go), converted to each part's own Go config.
//   - State: the state directory, its lock and identity (statedir.go,
//     statelock_*.go), and the state store (statestore.go).
//   - Wiring and lifecycle: New builds the parts and the HTTP handler,
//     Run serves and stops them, Close releases them (daemon.go); the
//     checks on what the daemon listens on and advertises (listen.go); its
//     readiness (ready.go).
//
// The fronts each translate one protocol to the delegation engine and
// live in their own packages: the HTTP JSON API (httpapi), orchd as an
// A2A agent (a2aserver) and the web console (console, mounted by
// console.go). Every request passes httpgate's plumbing first. New puts
// them on one handler, outermost first: the access log, the browser
// guard, stream write deadlines, then the routes, each behind the gate.
package orchestrator
