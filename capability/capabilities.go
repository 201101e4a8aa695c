package capability

import "strings"

// Tier is a capability's place in the capability declaration contract.
type Tier int

const (
	// TierImplicit capabilities are supported by every compliant agent and
	// never declared: SendMessage, GetTask, ListTasks and CancelTask.
	TierImplicit Tier = 1
	// TierDeclared capabilities are optional and count only when the card
	// declares them: streaming, push notifications, extensions and the
	// contract's boolean capabilities.
	TierDeclared Tier = 2
	// TierDeprecated capabilities still work but are discouraged; declaring
	// one adds a warning to the profile.
	TierDeprecated Tier = 3
)

// String returns "implicit", "declared" or "deprecated".
func (t Tier) String() string {
	switch t {
	case TierImplicit:
		return "implicit"
	case TierDeclared:
		return "declared"
	case TierDeprecated:
		return "deprecated"
	}
	return "unknown"
}

// Canonical capability names. Cards may spell the declared ones in camelCase
// or snake_case; profiles always use these snake_case names. Extensions are
// capabilities too, named by their URI.
const (
	SendMessage = "send_message"
	GetTask     = "get_task"
	ListTasks   = "list_tasks"
	CancelTask  = "cancel_task"

	Streaming               = "streaming"
	PushNotifications       = "push_notifications"
	ExtendedAgentCard       = "extended_agent_card"
	PauseResume             = "pause_resume"
	ContextReuse            = "context_reuse"
	MultiTenant             = "multi_tenant"
	MessageHistoryInjection = "message_history_injection"

	// Steerable and Interruptible are the steering extension's modes, listed
	// as capabilities so a delegation can require them by name.
	Steerable     = "steerable"
	Interruptible = "interruptible"

	// ArtifactStreaming is the contract's direct artifact streaming, which
	// message streaming supersedes.
	ArtifactStreaming = "artifact_streaming"
	// StateTransitionHistory is the 0.3 capability that A2A 1.0 removed.
	StateTransitionHistory = "state_transition_history"
)

// ImplicitCapabilities lists the Tier 1 capabilities every profile carries.
var implicitCapabilities = [...]string{SendMessage, GetTask, ListTasks, CancelTask}

// DefaultDeprecated lists the capabilities that are Tier 3 unless
// [Options.Deprecated] adds more.
var defaultDeprecated = [...]string{ArtifactStreaming, StateTransitionHistory}

// cardCapabilityKeys maps every spelling a card may use under "capabilities"
// to the canonical name. streaming_message is the contract's name for
// streaming.
var cardCapabilityKeys = map[string]string{
	"streaming":                 Streaming,
	"streaming_message":         Streaming,
	"streamingMessage":          Streaming,
	"pushNotifications":         PushNotifications,
	"push_notifications":        PushNotifications,
	"extendedAgentCard":         ExtendedAgentCard,
	"extended_agent_card":       ExtendedAgentCard,
	"pauseResume":               PauseResume,
	"pause_resume":              PauseResume,
	"contextReuse":              ContextReuse,
	"context_reuse":             ContextReuse,
	"multiTenant":               MultiTenant,
	"multi_tenant":              MultiTenant,
	"messageHistoryInjection":   MessageHistoryInjection,
	"message_history_injection": MessageHistoryInjection,
	"artifactStreaming":         ArtifactStreaming,
	"artifact_streaming":        ArtifactStreaming,
	"stateTransitionHistory":    StateTransitionHistory,
	"state_transition_history":  StateTransitionHistory,
}

// CanonicalName returns the canonical name for a capability spelled as a
// card, a policy or a request might spell it: "streamingMessage",
// "streaming_message" and "streaming" all give "streaming". Names it does not
// know, such as extension URIs, are returned unchanged.
func CanonicalName(name string) string {
	if c, ok := cardCapabilityKeys[name]; ok {
		return c
	}
	switch name {
	case "sendMessage", "SendMessage":
		return SendMessage
	case "getTask", "GetTask":
		return GetTask
	case "listTasks", "ListTasks":
		return ListTasks
	case "cancelTask", "CancelTask":
		return CancelTask
	}
	return name
}

// Capability is one entry of a profile's capability map.
type Capability struct {
	// Tier is the capability's tier in the declaration contract.
	Tier Tier `json:"tier"`
	// Declared is true when the card states the capability; Tier 1
	// capabilities and those implied by other fields (multi_tenant from an
	// interface tenant) are not declared.
	Declared bool `json:"declared"`
	// Deprecated is true for Tier 3 capabilities.
	Deprecated bool `json:"deprecated"`
}

// isDeprecated reports whether name is in the default deprecated list or in
// extra.
func isDeprecated(name string, extra []string) bool {
	for _, d := range defaultDeprecated {
		if d == name {
			return true
		}
	}
	for _, d := range extra {
		if CanonicalName(strings.TrimSpace(d)) == name {
			return true
		}
	}
	return false
}
