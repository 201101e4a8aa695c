package registry

import (
	"time"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/credentials"
)

// Agent is a registered agent: its capability profile and the state of its
// card in the cache. Agents are immutable; the registry replaces an Agent
// value whenever anything about it changes, so a caller may keep and read
// one without locks.
type Agent struct {
	*capability.Profile

	// FetchedAt is when the card was last fetched or revalidated.
	FetchedAt time.Time `json:"fetchedAt"`
	// ExpiresAt is when the card stops being fresh and is revalidated.
	ExpiresAt time.Time `json:"expiresAt"`
	// ETag is the card's entity tag, if the server sent one.
	ETag string `json:"etag,omitempty"`
	// Healthy is false after Config.UnhealthyAfter failed refreshes in a
	// row (the agent keeps its last good profile meanwhile) and while its
	// Breaker is not closed.
	Healthy bool `json:"healthy"`
	// UnhealthyReason says why the agent is not healthy.
	UnhealthyReason string `json:"unhealthyReason,omitempty"`
	// Failures counts failed refreshes in a row.
	Failures int `json:"failures,omitempty"`
	// LastError is the most recent refresh error.
	LastError string `json:"lastError,omitempty"`
	// Breaker is the circuit breaker over calls to the agent's A2A
	// endpoint; while it is open new work is not sent to the agent.
	Breaker Breaker `json:"breaker"`
	// Drift lists the agent's most recent card changes, oldest first.
	Drift []DriftRecord `json:"drift,omitempty"`
	// Credentials says what the card requires of a caller and whether
	// the credentials configured for the agent meet it; an agent whose
	// requirement they do not meet is not chosen.
	Credentials credentials.Status `json:"credentials"`
	// Signature is what the check of the card's JWS signatures found
	// (A2A 1.0 §8.4), with the agent's pinned keys and the allowed jku
	// key sets.
	Signature capability.Signature `json:"signature"`
	// Contained is true while an operator holds the agent contained:
	// no new work is sent to it. Containment says by whom, when and why.
	Contained   bool         `json:"contained"`
	Containment *Containment `json:"containment,omitempty"`

	// creds are the agent's configured credentials (CredentialConfig).
	creds     *credentials.Config
	base      string
	nextCheck time.Time
	// cardKeys are the agent's pinned card key files (Spec.CardKeys).
	cardKeys []string
}

// DriftRecord is a card change seen on refresh.
type DriftRecord struct {
	// At is when the registry saw the change.
	At time.Time `json:"at"`
	capability.Drift
}

// DriftedSince reports whether the agent's card changed in a way that
// matters (a non-empty [capability.Drift]) at or after t.
func (a *Agent) DriftedSince(t time.Time) bool {
	for i := len(a.Drift) - 1; i >= 0; i-- {
		if !a.Drift[i].At.Before(t) {
			return true
		}
	}
	return false
}
