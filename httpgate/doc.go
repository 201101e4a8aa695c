// Package httpgate is what every request passes on its way to one of
// orchd's fronts (the HTTP JSON API, orchd as an A2A agent, the console):
// the plumbing they share, so that each front keeps only its own protocol.
//
// In the order a request meets them:
//
//   - AwaitFirstByte hands the HTTP server a new connection once its first
//     byte arrives, so it may wait for its first request as long as an
//     idle one waits for its next.
//   - AccessLog writes one record per request (and per gRPC call).
//   - BrowserGuard refuses what a web page of another site could make the
//     operator's browser send.
//   - StreamDeadlines bounds each write of an event stream.
//   - Gate authenticates the caller, on every route: Wrap answers a
//     refused caller itself, Admit lets the front answer in its own
//     protocol (Refused).
//   - BodyLimits reads the body whole, bounded in size and depth, and in
//     the bytes held across every request; a front passes in how it
//     answers a refusal (RefusalWriter) and, for a refused caller, what it
//     reads instead (StandIn).
//   - Authorizer asks the authorization policies what the caller may do.
//
// The plain HTTP routes answer errors with ErrorBody (WriteError); a
// front with its own error shape (A2A's bindings) passes it in instead,
// so nothing here imports a front.
package httpgate
