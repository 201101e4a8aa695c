package registry

import (
	"errors"
	"sync"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/credentials"
)

// ErrInvalidCredentials means a Spec's credentials are malformed (see
// credentials.Config.Validate); the agent is not registered or retried.
var ErrInvalidCredentials = errors.New("invalid agent credentials")

// CredentialConfig returns the credentials configured for the agent, nil
// when none are. The Config is shared: do not modify it. It never appears
// in the agent's JSON; Credentials shows what may be shown of it.
func (a *Agent) CredentialConfig() *credentials.Config { return a.creds }

// credentialSet remembers the credentials configured for each base URL,
// so an agent registered by another path than its configuration (loaded
// from the store, or seen on the store's watch) gets the credentials its
// configuration gave, and an agent registered again at a configured URL
// too: credentials belong to the URL the operator configured them for.
// Only configured agents have credentials; the API cannot set them. The
// zero value is ready to use.
type credentialSet struct {
	mu     sync.Mutex
	byBase map[string]*credentials.Config
}

// set records cfg as base's credentials; nil forgets them.
func (s *credentialSet) set(base string, cfg *credentials.Config) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cfg == nil {
		delete(s.byBase, base)
		return
	}
	if s.byBase == nil {
		s.byBase = map[string]*credentials.Config{}
	}
	s.byBase[base] = cfg
}

// attach gives a, an agent not yet published, its credentials (its own,
// recorded for its URL, or those recorded for its URL) and computes its
// credentials status from its card.
func (s *credentialSet) attach(a *Agent) {
	if a.creds != nil {
		s.set(a.base, a.creds)
	} else {
		s.mu.Lock()
		a.creds = s.byBase[a.base]
		s.mu.Unlock()
	}
	var sec *capability.Security
	if a.Profile != nil {
		sec = a.Security
	}
	a.Credentials = credentials.Satisfy(a.ID, sec, a.creds)
}

// credentialed returns agent a carrying spec's credentials: a itself when
// it has them already, else a copy that replaces it in the registry. It
// serves configured agents that Load registered from the store, which
// keeps no credentials.
func (r *Registry) credentialed(a *Agent, spec Spec) *Agent {
	if a.creds == spec.Credentials {
		return a
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	cur, ok := r.byID[a.ID]
	if !ok || cur.base != a.base {
		return a // removed or replaced meanwhile
	}
	r.creds.set(cur.base, spec.Credentials)
	next := *cur
	next.creds = spec.Credentials
	r.creds.attach(&next)
	r.replace(cur, &next)
	return &next
}
