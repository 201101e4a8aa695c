// Package httpapi is orchd's HTTP JSON API, the front for callers that
// speak JSON over HTTP (the orchd CLI, scripts, other tools): the
// agents in the registry (/v1/agents), the policies (/v1/policies,
// /v1/policy:evaluate) and delegations with their events and input
// (/v1/delegations), plus /healthz, /readyz and the API's description at
// /openapi.yaml. Each request is translated to the registry, the policy
// engine or the delegation engine, after the shared plumbing of package
// httpgate (authentication, authorization, body limits). New builds it
// from its Deps; it imports no other front.
package httpapi
