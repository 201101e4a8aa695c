// Package policies decides where work may go, from rules operators write in
// CEL over the candidate agent, the request, the delegation chain and the
// caller.
//
// A policy is a YAML document: a name, an optional request-level `when`, a
// `default` (deny or allow) and rules. Each rule has an optional `when` and
// one of `allow`, `deny` (CEL booleans, with a `reason` or
// `reasonExpression`) or `rank` (a CEL number). Policies are parsed,
// type-checked and compiled once at load ([Compile]); errors point into the
// YAML as file:line:col. Evaluation ([Set.Evaluate]) then runs the compiled
// programs against each candidate and explains every decision.
//
// Combining is simple. A candidate is refused by a policy when any of its
// applicable deny rules matches, or when none of its allow rules matches and
// the policy's default is deny. A candidate must be allowed by every policy
// in the set. Survivors are ordered by the sum of their ranks, highest
// first, ties broken by agent id.
//
// The same files hold authorization policies (`kind: authorization`): allow
// and deny rules over the caller, the action it asks for and the resource
// it acts on, which decide what each caller may do ([Set.Authorize]); a
// built-in default ([DefaultAuthorizationPolicy]) lets admins do
// everything and callers act on what they own.
//
// An [Engine] holds the current [Set], reloads it when the files change or
// on request, and swaps it atomically only when the new files compile, so a
// broken edit never replaces a working set.
package policies
