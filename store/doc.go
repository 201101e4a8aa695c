// Package store keeps orchd's durable state on NATS JetStream: delegation
// records and their event logs, and the leases that decide which process
// follows a running delegation.
//
// By default the state lives in a NATS server embedded in the daemon,
// storing on disk under the state directory; no other process is needed.
// Given a URL, the same state lives on an external NATS cluster instead,
// where several orchd processes share it and carry on each other's
// delegations (see [Config]).
//
// [Open] starts or connects to the server and returns a [Store]. Its
// [Store.Delegations] implements delegation.Store and its [Store.Leases]
// implements delegation.Leases. Every error that comes from a store that
// cannot be reached or cannot keep a write wraps delegation.ErrUnavailable,
// so the API can answer 503 with the reason.
package store
