// Package credentials holds what orchd sends to authenticate itself to the
// agents it delegates to, and decides which of it each agent's card asks
// for.
//
// A [Config] per agent names where each secret lives: a file or an
// environment variable, never the configuration itself. [Satisfy] matches
// a Config against the security requirements of the agent's card
// (capability.Security) and says, as a [Status], whether orchd can meet
// one of them and with what. [Clients] builds, once per agent and Config,
// the http.RoundTripper that attaches the chosen credentials to every
// request for the agent's interfaces: an API key in a header, query
// parameter or cookie, an HTTP bearer or basic Authorization, an OAuth 2.0
// client-credentials token (fetched, cached and refreshed before it
// expires), a TLS client certificate, or the caller's own token when the
// Config forwards it ([WithCallerToken]).
//
// Secrets are read when first needed and re-read when their file changes;
// they never appear in logs, errors, JSON or fmt output. An agent that
// answers 401 or 403 gives a [*RefusedError], so a delegation reports that
// the agent refused orchd's credentials rather than a generic failure.
package credentials
