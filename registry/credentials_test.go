package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/orchd/orchd/credentials"
	"github.com/orchd/orchd/internal/testcmp"
)

// securedCard is a card requiring the oauth2 scheme "corp".
func securedCard(name string) string {
	return fmt.Sprintf(`{"name":%q,"version":"1.0.0","description":"test agent",
		"supportedInterfaces":[{"url":"http://127.0.0.1/a2a","protocolBinding":"JSONRPC","protocolVersion":"1.0"}],
		"capabilities":{},"skills":[{"id":"research","name":"Research","tags":["search"]}],
		"securitySchemes":{"corp":{"oauth2SecurityScheme":{"flows":{"clientCredentials":{"tokenUrl":"https://idp.example.com/token","scopes":{"a2a":""}}}}}},
		"securityRequirements":[{"schemes":{"corp":{"list":["a2a"]}}}]}`, name)
}

var oauthCreds = &credentials.Config{OAuth2: &credentials.OAuth2{ClientID: "orchd", ClientSecretFile: "/run/secrets/idp-secret", TokenURL: "https://idp.example.com/token"}}

func TestRegistry_CredentialsStatus(t *testing.T) {
	t.Parallel()
	srv := newCardServer(t, securedCard("Research"))
	r := newTestRegistry(t, Config{})
	ctx := t.Context()

	a, err := r.Add(ctx, Spec{ID: "research", URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	want := `needs oauth2 scheme "corp" (scopes a2a); no credentials configured for agent research`
	if a.Credentials.Satisfied || a.Credentials.Reason != want {
		t.Fatalf("status %+v, want unsatisfied: %s", a.Credentials, want)
	}
	if a.CredentialConfig() != nil {
		t.Fatal("an agent added without credentials has some")
	}
	if err := r.Remove("research"); err != nil {
		t.Fatal(err)
	}

	a, err = r.Add(ctx, Spec{ID: "research", URL: srv.URL, Credentials: oauthCreds})
	if err != nil {
		t.Fatal(err)
	}
	if a.CredentialConfig() != oauthCreds {
		t.Fatalf("the agent's credentials are %+v, not the ones configured", a.CredentialConfig())
	}
	using := credentials.Status{Satisfied: true, Using: `oauth2 scheme "corp": client-credentials token (scopes a2a)`}
	if diff := cmp.Diff(using, a.Credentials, testcmp.Only[credentials.Status]("Satisfied", "Using")); diff != "" {
		t.Fatalf("credentials status (-want +got):\n%s", diff)
	}
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	js := string(b)
	if !strings.Contains(js, `"credentials":{"required":["oauth2 scheme \"corp\" (scopes a2a)"],"configured":["oauth2"],"satisfied":true`) {
		t.Errorf("agent JSON lacks the credentials status: %s", js)
	}
	if strings.Contains(js, "idp-secret") || strings.Contains(js, "clientSecret") {
		t.Errorf("agent JSON shows where the secret is: %s", js)
	}
	if b, _ := json.Marshal(Spec{URL: srv.URL, Credentials: oauthCreds}); strings.Contains(string(b), "credentials") {
		t.Errorf("spec JSON carries credentials: %s", b)
	}

	// The card drops its requirement on refresh: the status follows.
	srv.set(func(s *cardServer) { s.card = card("Research", "") })
	a, err = r.Refresh(ctx, "research")
	if err != nil {
		t.Fatal(err)
	}
	if a.CredentialConfig() != oauthCreds {
		t.Fatalf("after refresh the agent's credentials are %+v, not the ones configured", a.CredentialConfig())
	}
	if diff := cmp.Diff(credentials.Status{Satisfied: true}, a.Credentials, testcmp.Only[credentials.Status]("Satisfied", "Required")); diff != "" {
		t.Fatalf("credentials status after refresh (-want +got):\n%s", diff)
	}
	if got, _ := r.Get("research"); got.Credentials.Using != "client-credentials token" {
		t.Fatalf("status in the registry %+v", got.Credentials)
	}

	// Inspect says the same of the configured URL.
	in, err := r.Inspect(ctx, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if !in.Credentials.Satisfied || in.CredentialConfig() != oauthCreds {
		t.Fatalf("Inspect status %+v", in.Credentials)
	}
}

func TestRegistry_InvalidCredentials(t *testing.T) {
	t.Parallel()
	srv := newCardServer(t, securedCard("Research"))
	r := newTestRegistry(t, Config{})
	bad := &credentials.Config{Bearer: &credentials.Bearer{}}
	for _, add := range []func(context.Context, Spec) (*Agent, error){r.Add, r.AddOrRetry} {
		_, err := add(t.Context(), Spec{URL: srv.URL, Credentials: bad})
		if !errors.Is(err, ErrInvalidCredentials) || !strings.Contains(err.Error(), "bearer token: set a file or an environment variable") {
			t.Fatalf("add = %v, want ErrInvalidCredentials", err)
		}
	}
	if r.Len() != 0 || len(r.Pending()) != 0 {
		t.Fatalf("%d agents, %d pending after bad credentials", r.Len(), len(r.Pending()))
	}
	if srv.requests.Load() != 0 {
		t.Fatal("the card was fetched for a spec with bad credentials")
	}
}

// memAgents is an AgentStore in memory: enough for one registry to save
// agents and a second one to load them.
type memAgents struct {
	mu     sync.Mutex
	rev    uint64
	agents map[string]SavedAgent
}

func (m *memAgents) Save(_ context.Context, a SavedAgent) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.agents[a.ID]; ok && cur.Revision != a.Revision || !ok && a.Revision != 0 {
		return 0, ErrStale
	}
	m.rev++
	a.Revision = m.rev
	m.agents[a.ID] = a
	return m.rev, nil
}

func (m *memAgents) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.agents, id)
	return nil
}

func (m *memAgents) Load(context.Context) ([]SavedAgent, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []SavedAgent
	for _, a := range m.agents {
		out = append(out, a)
	}
	return out, nil
}

func (m *memAgents) Watch(ctx context.Context, _ uint64, _ func(SavedAgent, bool)) error {
	<-ctx.Done()
	return nil
}

// TestRegistry_CredentialsFromConfigAfterLoad checks an agent loaded from
// the store, which keeps no credentials, gets them from its configured
// spec, and that the store never holds them.
func TestRegistry_CredentialsFromConfigAfterLoad(t *testing.T) {
	t.Parallel()
	srv := newCardServer(t, securedCard("Research"))
	st := &memAgents{agents: map[string]SavedAgent{}}
	spec := Spec{ID: "research", URL: srv.URL, Credentials: oauthCreds}

	first := newTestRegistry(t, Config{Store: st})
	if _, err := first.AddOrRetry(t.Context(), spec); err != nil {
		t.Fatal(err)
	}
	saved, _ := json.Marshal(st.agents)
	if strings.Contains(string(saved), "idp-secret") || strings.Contains(string(saved), "oauth2\"") {
		t.Fatalf("the store holds credentials: %s", saved)
	}

	second := newTestRegistry(t, Config{Store: st})
	if err := second.Load(t.Context()); err != nil {
		t.Fatal(err)
	}
	loaded, ok := second.Get("research")
	if !ok {
		t.Fatal("the stored agent was not loaded")
	}
	if loaded.Credentials.Satisfied || loaded.CredentialConfig() != nil {
		t.Fatalf("loaded agent: status %+v, credentials %+v; want unsatisfied and none until configured", loaded.Credentials, loaded.CredentialConfig())
	}
	fetches := srv.requests.Load()
	a, err := second.AddOrRetry(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if !a.Credentials.Satisfied || a.CredentialConfig() != oauthCreds {
		t.Fatalf("configured agent status %+v", a.Credentials)
	}
	if got, _ := second.Get("research"); got != a {
		t.Fatal("the registry does not hold the credentialed agent")
	}
	if srv.requests.Load() != fetches {
		t.Fatal("attaching credentials fetched the card")
	}
}
