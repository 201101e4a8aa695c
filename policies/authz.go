package policies

import (
	"slices"
	"time"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// Actions are what a caller may ask orchd to do, as authorization policies
// see them (`action`). Every HTTP API route and A2A method maps to exactly
// one; [Actions] lists them all, and a policy that compares `action` with a
// string that is not one of them does not load.
const (
	// ActionAgentsList lists the registered agents (GET /v1/agents).
	ActionAgentsList = "agents.list"
	// ActionAgentsRead reads one agent's profile and card.
	ActionAgentsRead = "agents.read"
	// ActionAgentsRegister adds an agent or replaces its registration.
	ActionAgentsRegister = "agents.register"
	// ActionAgentsDelete removes an agent.
	ActionAgentsDelete = "agents.delete"
	// ActionAgentsRefresh refetches an agent's card now.
	ActionAgentsRefresh = "agents.refresh"
	// ActionAgentsContain contains an agent or releases it
	// (POST /v1/agents/{id}:contain and :release).
	ActionAgentsContain = "agents.contain"
	// ActionDelegationsCreate starts a delegation: POST /v1/delegations and
	// A2A SendMessage or SendStreamingMessage that starts a new task.
	ActionDelegationsCreate = "delegations.create"
	// ActionDelegationsList lists delegations (and A2A ListTasks); each
	// listed delegation is then checked with [ActionDelegationsRead].
	ActionDelegationsList = "delegations.list"
	// ActionDelegationsRead reads one delegation or follows its events:
	// A2A GetTask and SubscribeToTask.
	ActionDelegationsRead = "delegations.read"
	// ActionDelegationsCancel cancels a delegation (and A2A CancelTask).
	ActionDelegationsCancel = "delegations.cancel"
	// ActionDelegationsSteer changes a running delegation: steering,
	// interrupting, and follow-up messages (A2A SendMessage to an existing
	// task).
	ActionDelegationsSteer = "delegations.steer"
	// ActionPoliciesRead reads the policies in force (GET /v1/policies).
	ActionPoliciesRead = "policies.read"
	// ActionPoliciesReload reloads the policy files now.
	ActionPoliciesReload = "policies.reload"
	// ActionPoliciesEvaluate is a delegation policy dry run
	// (POST /v1/policy:evaluate).
	ActionPoliciesEvaluate = "policies.evaluate"
	// ActionMetricsRead scrapes /metrics.
	ActionMetricsRead = "metrics.read"
)

// actions is every action, in documentation order.
var actions = []string{
	ActionAgentsList, ActionAgentsRead, ActionAgentsRegister, ActionAgentsDelete, ActionAgentsRefresh, ActionAgentsContain,
	ActionDelegationsCreate, ActionDelegationsList, ActionDelegationsRead, ActionDelegationsCancel, ActionDelegationsSteer,
	ActionPoliciesRead, ActionPoliciesReload, ActionPoliciesEvaluate,
	ActionMetricsRead,
}

// actionValues are the actions as CEL values, boxed once.
var actionValues = func() []ref.Val {
	vals := make([]ref.Val, len(actions))
	for i, a := range actions {
		vals[i] = types.String(a)
	}
	return vals
}()

// Actions returns every action an authorization policy can see, in
// documentation order.
func Actions() []string { return slices.Clone(actions) }

// knownAction reports whether action is one of [Actions].
func knownAction(action string) bool { return slices.Contains(actions, action) }

// Resource kinds: what an action acts on (`resource.kind`).
const (
	// ResourceAgent is a registered agent; its ID is the agent's id.
	ResourceAgent = "agent"
	// ResourceDelegation is a delegation; its ID is the delegation's (the
	// A2A task's) id, and Owner and Tenant are whoever created it.
	ResourceDelegation = "delegation"
	// ResourcePolicies is the policy set.
	ResourcePolicies = "policies"
	// ResourceMetrics is the metrics endpoint.
	ResourceMetrics = "metrics"
)

// resourceKinds is every resource kind.
var resourceKinds = []string{ResourceAgent, ResourceDelegation, ResourcePolicies, ResourceMetrics}

// Caller methods with a meaning of their own in authorization (see
// [Caller.Method]); any other value names the authentication method that
// identified the caller.
const (
	// MethodNone means no authentication is configured at all, as on a
	// development daemon listening on loopback. The default authorization
	// policy allows such callers everything, as orchd did before it knew
	// its callers.
	MethodNone = "none"
	// MethodAnonymous means authentication is configured but the request
	// carried no credential. The default authorization policy allows such
	// callers nothing.
	MethodAnonymous = "anonymous"
)

// Resource is what an action acts on (`resource`). Fields that do not
// apply are empty: listing has no ID, and only delegations have an Owner.
type Resource struct {
	// Kind is one of ResourceAgent, ResourceDelegation, ResourcePolicies
	// or ResourceMetrics.
	Kind string `json:"kind" yaml:"kind"`
	// ID is the agent's or delegation's id.
	ID string `json:"id" yaml:"id"`
	// Owner is the principal that created a delegation. For
	// ActionDelegationsCreate and ActionDelegationsList it is the caller's
	// own principal: a delegation is owned by who creates it.
	Owner string `json:"owner" yaml:"owner"`
	// Tenant is the tenant the delegation was created in (the creator's
	// tenant); for create and list, the caller's.
	Tenant string `json:"tenant" yaml:"tenant"`
	// OwnerMethod and OwnerIssuer are the creator's Caller.Method and
	// Caller.Issuer: the owner is the caller with all four of Owner,
	// Tenant, OwnerMethod and OwnerIssuer. OwnerMethod is empty for a
	// delegation stored before owners carried their method, which no
	// caller owns (docs/security.md).
	OwnerMethod string `json:"ownerMethod" yaml:"ownerMethod"`
	OwnerIssuer string `json:"ownerIssuer" yaml:"ownerIssuer"`
}

// AuthzInput is everything an authorization policy sees.
type AuthzInput struct {
	// Caller is who asks (`caller`), as authentication identified them.
	Caller Caller `json:"caller" yaml:"caller"`
	// Action is what they ask to do (`action`), one of [Actions].
	Action string `json:"action" yaml:"action"`
	// Resource is what they ask to do it to (`resource`).
	Resource Resource `json:"resource" yaml:"resource"`
	// Now is the evaluation time (`now`); zero means the current time.
	Now time.Time `json:"now" yaml:"now"`
}

// AuthzDecision is whether a caller may do an action, and which rule
// decided.
type AuthzDecision struct {
	// Allowed is true when some allow rule matched and no deny rule did.
	Allowed bool `json:"allowed"`
	// Policy and Rule name the rule that decided: the first matching deny
	// rule, else the first matching allow rule, else the first rule that
	// failed. Both are empty when no rule matched and the request was
	// denied because nothing allowed it.
	Policy string `json:"policy,omitempty"`
	Rule   string `json:"rule,omitempty"`
	// Reason says why, in words fit for a log or an error response: the
	// deciding rule's reason, or why nothing allowed the request.
	Reason string `json:"reason"`
	// Explain lists every rule and policy `when` with its outcome, in
	// evaluation order; only [Set.ExplainAuthorization] fills it.
	Explain []RuleResult `json:"explain,omitempty"`
	// PolicySet is the digest of the set that decided.
	PolicySet string `json:"policySet"`
}

// A2AAction maps an A2A method, as a2a-go's CallContext names it, to the
// action it performs. newTask tells SendMessage and SendStreamingMessage
// that start a task (ActionDelegationsCreate) from follow-up messages to an
// existing one (ActionDelegationsSteer). It returns false for a method it
// does not know, which the caller should refuse.
func A2AAction(method string, newTask bool) (string, bool) {
	switch method {
	case "SendMessage", "SendStreamingMessage":
		if newTask {
			return ActionDelegationsCreate, true
		}
		return ActionDelegationsSteer, true
	case "GetTask", "SubscribeToTask", "GetTaskPushConfig", "ListTaskPushConfigs":
		return ActionDelegationsRead, true
	case "ListTasks":
		return ActionDelegationsList, true
	case "CancelTask":
		return ActionDelegationsCancel, true
	case "CreateTaskPushConfig", "DeleteTaskPushConfig":
		return ActionDelegationsSteer, true
	case "GetExtendedAgentCard":
		return ActionAgentsRead, true
	}
	return "", false
}
