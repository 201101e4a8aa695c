// Package capability turns an A2A Agent Card into a capability profile: the
// facts orchd decides on before it delegates any work.
//
// A profile records which A2A protocol versions an agent speaks over each
// binding (JSON-RPC, HTTP+JSON, gRPC), whether orchd's own client can talk to
// it, which capabilities it declares and at which tier of the capability
// declaration contract, the extensions it advertises with their parameters,
// the steering modes it offers, its skills, and a digest that pins exactly the
// card that was validated.
//
// Cards of every protocol generation are read: A2A 1.0 cards
// (supportedInterfaces), 0.3 cards (protocolVersion, url, preferredTransport,
// additionalInterfaces) and 0.2 cards. Fields that no SDK type holds, such as
// the contract's minProtocolVersion and maxProtocolVersion or the per-interface
// protocolVersions arrays, are read from the raw JSON.
//
// The package is a leaf: it fetches nothing and keeps no state. The registry
// package fetches and caches cards and calls [Build].
package capability
