package policies

// DefaultAuthorizationName is the name of the built-in authorization
// policy. An authorization policy of this name in the policy files
// replaces it; one with no rules leaves only the files' own rules.
const DefaultAuthorizationName = "default-authorization"

// defaultAuthorizationFile names the built-in policy in diagnostics.
const defaultAuthorizationFile = "built-in:default-authorization.yaml"

// DefaultAuthorizationPolicy is the built-in authorization policy, in
// force unless the policy files replace it. Its rules only allow, so
// another policy's deny rule always overrides it and another policy's
// allow rule always widens it. The rules that name actions come first:
// they decide the common requests, and only the first matching rule runs
// when nothing denies.
//
//   - With no authentication configured (caller.method "none"), every
//     caller may do everything, as before orchd knew its callers.
//   - An authenticated caller with the role admin may do everything.
//   - An authenticated caller may list and read agents, read the policies
//     and dry-run them as itself (policies.evaluate on its own principal
//     and tenant), create delegations and list them, and read, cancel and
//     steer the delegations it owns: created by the same principal in the
//     same tenant, authenticated by the same method and vouched for by the
//     same issuer.
//   - Anyone else, such as an anonymous caller of a daemon that has
//     authentication configured, may do nothing.
const DefaultAuthorizationPolicy = `kind: authorization
policy: default-authorization
description: >-
  Without authentication configured, everyone may do everything. Admins may
  do everything. Authenticated callers may read agents and policies, create
  delegations, and act on the delegations they own.
rules:
  - name: read-agents-and-policies
    allow: |
      caller.authenticated &&
      (action in ["agents.list", "agents.read", "policies.read"] ||
       action == "policies.evaluate" && resource.owner == caller.principal && resource.tenant == caller.tenant)
    reason: authenticated callers may read agents and policies, and dry-run the policies as themselves
  - name: create-delegations
    allow: caller.authenticated && action in ["delegations.create", "delegations.list"]
    reason: authenticated callers may create delegations and list their own
  - name: own-delegations
    allow: |
      caller.authenticated && caller.principal != "" &&
      action in ["delegations.read", "delegations.cancel", "delegations.steer"] &&
      resource.owner == caller.principal && resource.tenant == caller.tenant &&
      resource.ownerMethod == caller.method && resource.ownerIssuer == caller.issuer
    reason: the caller owns the delegation
  - name: admin
    allow: caller.authenticated && "admin" in caller.roles
    reason: admins may do everything
  - name: no-authentication-configured
    allow: caller.method == "none"
    reason: no authentication is configured, so every caller may do everything
`
