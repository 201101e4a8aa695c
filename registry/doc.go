// Package registry discovers A2A agents, keeps their capability profiles
// fresh and answers lookups without touching the network.
//
// Agents are added by base URL. The registry fetches the Agent Card from
// /.well-known/agent-card.json, falling back to the 0.2 path
// /.well-known/agent.json, builds a [capability.Profile] and indexes it by
// id, URL, skill id and tag, capability and extension URI. Lookups read
// immutable values under a read lock and do not allocate.
//
// Cards are cached as RFC 9111 describes: Cache-Control max-age, no-cache
// and no-store are honoured, entries are revalidated with ETag and
// Last-Modified, a default TTL applies when the server sends none, and
// concurrent requests for one URL share one fetch. A background refresher
// revalidates registered agents when they expire, so a lookup never waits
// on the network after the first fetch; when a refresh fails the last good
// card keeps serving and the agent is marked unhealthy after
// [Config.UnhealthyAfter] failures in a row. Changes between a card and its
// refresh are recorded as [capability.Drift].
//
// With [Config.Store] set, agents outlive the process: each is saved, with
// its card as fetched, its validators and its drift history, before Add
// reports it, and [Registry.Load] registers the saved ones at start
// without the network. Several processes may share one store; each
// watches it and applies the others' additions, changes and removals,
// telling its own saves from theirs by the store's revisions (see
// [AgentStore]).
//
// Fetching is guarded: bodies are size-limited, requests time out,
// redirects are bounded and may not downgrade https to http, and every
// connection's resolved address is checked before it connects so a card URL
// cannot reach loopback, private, link-local, multicast or any other
// special-purpose address from the IANA registries (via code.dny.dev/ssrf),
// nor one wrapped in NAT64, 6to4 or IPv4-compatible IPv6, unless
// [Config.AllowNetworks] or [Config.AllowHosts] lets it.
package registry
