package policies

import "time"

// Request is what a delegation asks for, as policies see it (`request`).
type Request struct {
	// Skill is the requested skill id or tag.
	Skill string `json:"skill" yaml:"skill"`
	// Capabilities lists capabilities the work requires, by canonical name
	// or extension URI.
	Capabilities []string `json:"capabilities" yaml:"capabilities"`
	// Protocol is a version constraint the agent must satisfy, such as
	// ">= 1.0"; "" means any.
	Protocol string `json:"protocol" yaml:"protocol"`
	// InputModes and OutputModes are the media types the work uses.
	InputModes  []string `json:"inputModes" yaml:"inputModes"`
	OutputModes []string `json:"outputModes" yaml:"outputModes"`
	// Metadata carries anything else the caller sent.
	Metadata map[string]any `json:"metadata" yaml:"metadata"`
}

// Chain describes the delegation chain the request arrived through
// (`chain`). At the root, Depth is 0 and Path is empty.
type Chain struct {
	// Depth is how many hops the work has already taken.
	Depth int `json:"depth" yaml:"depth"`
	// MaxDepth is the most hops the chain allows.
	MaxDepth int `json:"maxDepth" yaml:"maxDepth"`
	// Path lists the identities of the orchestrators the work passed
	// through, from the root to here.
	Path []string `json:"path" yaml:"path"`
	// RootTask is the id of the task at the root of the chain.
	RootTask string `json:"rootTask" yaml:"rootTask"`
}

// Caller is who asked (`caller`).
type Caller struct {
	// Principal identifies the caller.
	Principal string `json:"principal" yaml:"principal"`
	// Tenant is the caller's tenant.
	Tenant string `json:"tenant" yaml:"tenant"`
	// Roles are the roles the caller's credential grants, such as admin.
	Roles []string `json:"roles" yaml:"roles"`
	// Claims are the caller's verified claims, such as a token's.
	Claims map[string]any `json:"claims" yaml:"claims"`
	// Authenticated is true when a credential proved who the caller is.
	Authenticated bool `json:"authenticated" yaml:"authenticated"`
	// Method is how the caller was identified: an authentication method
	// such as "token", "jwt" or "mtls"; [MethodAnonymous] when
	// authentication is configured but the request carried no credential;
	// [MethodNone] when no authentication is configured at all.
	Method string `json:"method" yaml:"method"`
	// Issuer is who vouched for the principal, where that is not this
	// orchd's own configuration: the issuer (iss) of a JWT, or the
	// trusted orchd that passed on work for its root caller (method
	// "peer"), as auth.peers names it. Empty otherwise. The same
	// principal and tenant under another method or issuer is another
	// caller.
	Issuer string `json:"issuer" yaml:"issuer"`
}

// Input is everything a policy sees besides the candidate agent.
type Input struct {
	// Request is what is asked for (`request`).
	Request Request `json:"request" yaml:"request"`
	// Chain is the delegation chain (`chain`).
	Chain Chain `json:"chain" yaml:"chain"`
	// Caller is who asks (`caller`).
	Caller Caller `json:"caller" yaml:"caller"`
	// Now is the evaluation time (`now`); zero means the current time.
	Now time.Time `json:"now" yaml:"now"`
}
