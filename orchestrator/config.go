package orchestrator

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpgate"
	"github.com/orchd/orchd/policies"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/telemetry"
)

//go:embed defaults.yaml
var defaultsYAML []byte

// DefaultsYAML returns the embedded default configuration.
func DefaultsYAML() []byte { return bytes.Clone(defaultsYAML) }

// Config is the daemon's configuration file. Durations are written as Go
// durations ("30s", "5m").
type Config struct {
	// Listen is the HTTP API's address. Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// StateDir is where this orchd keeps what outlives its process, its
	// identity first, locked while the daemon runs. Empty means one per
	// listen address under the user's state directory (DefaultStateDir);
	// a daemon on an ephemeral port (":0") then keeps no state.
	StateDir string `yaml:"stateDir"`
	// Registry tunes card discovery and caching.
	Registry RegistryConfig `yaml:"registry"`
	// Agents are registered at start-up. One that cannot be reached yet
	// is retried in the background.
	Agents []registry.Spec `yaml:"agents"`
	// Policies configures delegation policies.
	Policies PoliciesConfig `yaml:"policies"`
	// Delegation configures how work is handed to agents.
	Delegation DelegationConfig `yaml:"delegation"`
	// Agent describes orchd as an A2A agent: its card.
	Agent AgentConfig `yaml:"agent"`
	// Telemetry configures metrics and traces.
	Telemetry TelemetryConfig `yaml:"telemetry"`
	// Log configures the access log (httpgate.AccessLog).
	Log LogConfig `yaml:"log"`
	// HTTP bounds what clients send: body sizes, JSON depth, read and
	// idle timeouts.
	HTTP HTTPConfig `yaml:"http"`
	// Store is where delegations, agents and A2A tasks are kept: the
	// embedded NATS server by default, an external cluster, or memory.
	Store StoreConfig `yaml:"store"`
	// Auth is how callers authenticate, which routes they may reach
	// without credentials and which orchds are trusted peers
	// (docs/security.md). Empty means no authentication: only allowed on
	// a loopback listen address, or with InsecureNoAuth.
	Auth AuthConfig `yaml:"auth"`
	// MCP configures the MCP endpoint (/mcp).
	MCP MCPConfig `yaml:"mcp"`
	// InsecureNoAuth lets a daemon with no authentication listen beyond
	// loopback (serve --insecure-no-auth): for a private network or an
	// authenticating proxy in front. It is not read from the file.
	InsecureNoAuth bool `yaml:"-"`
}

// AuthConfig is the config file's auth section: how callers authenticate,
// which routes they may reach without credentials, and which orchds are
// trusted peers. It is what the gate in front of every route is built
// from (httpgate.AuthConfig).
type AuthConfig = httpgate.AuthConfig

// TelemetryConfig is the config file's telemetry section. Traces are
// exported over OTLP when the standard OTEL_EXPORTER_OTLP_* environment
// variables name an endpoint; see docs/observability.md.
type TelemetryConfig struct {
	// Prometheus serves the metrics at GET /metrics on the API's address.
	Prometheus bool `yaml:"prometheus"`
	// ServiceName is the service.name of orchd's spans and metrics
	// (OTEL_SERVICE_NAME overrides it).
	ServiceName string `yaml:"serviceName"`
	// Providers, when set, is used instead of what Prometheus and the
	// environment would build: for programs embedding orchd and tests that
	// bring their own providers. The daemon does not shut it down.
	Providers *telemetry.Telemetry `yaml:"-"`
}

// AgentConfig describes the Agent Card orchd serves.
type AgentConfig struct {
	// Name is the card's name.
	Name string `yaml:"name"`
	// Description is the card's description.
	Description string `yaml:"description"`
	// URL is the base URL other agents reach this orchd at; the card's
	// interface URLs start with it. Empty means http:// and the listen
	// address, which must then name a host: with listen on every interface
	// (0.0.0.0, ::) the daemon refuses to start until URL is set.
	URL string `yaml:"url"`
	// Skills are the skills the card lists: the work this orchd routes.
	Skills []SkillConfig `yaml:"skills"`
	// SigningKey, when set, is a private key (PEM, or a JWK in JSON) orchd
	// signs its card with (A2A 1.0 card signatures), so agents and other
	// orchds that pin the public key can verify the card is this orchd's.
	SigningKey string `yaml:"signingKey"`
	// SigningKeyID is the key id ("kid") the signature names. Empty means
	// the key's own kid, else its RFC 7638 thumbprint.
	SigningKeyID string `yaml:"signingKeyID"`
	// GRPC serves orchd's A2A interface over gRPC too, listed on the card
	// (a2aserver.GRPCConfig); off by default.
	GRPC GRPCConfig `yaml:"grpc"`
	// Push is how orchd sends A2A push notifications to its callers'
	// webhooks (a2aserver.PushOut, docs/push.md).
	Push PushConfig `yaml:"push"`
}

// skills are the card's configured skills, as the A2A server takes them.
func (c AgentConfig) skills() []a2aserver.Skill {
	var skills []a2aserver.Skill
	for _, sk := range c.Skills {
		skills = append(skills, a2aserver.Skill{ID: sk.ID, Name: sk.Name, Description: sk.Description, Tags: sk.Tags})
	}
	return skills
}

// SkillConfig is one skill of orchd's card.
type SkillConfig struct {
	// ID is the skill id other orchestrators select by.
	ID string `yaml:"id"`
	// Name is a human-readable name; default the id.
	Name string `yaml:"name"`
	// Description says what the skill does.
	Description string `yaml:"description"`
	// Tags are keywords for the skill.
	Tags []string `yaml:"tags"`
}

// DelegationConfig is the config file's delegation section; each field
// sets the delegation.Config field of the same name.
type DelegationConfig struct {
	// Self is this orchd's identity in delegation chains, unique among
	// orchds. Empty (the default) means the identity generated once and
	// kept in the state directory.
	Self string `yaml:"self"`
	// MaxDepth bounds chains started here.
	MaxDepth int `yaml:"maxDepth"`
	// MaxAttempts bounds the candidates tried when agents fail before
	// accepting work.
	MaxAttempts int `yaml:"maxAttempts"`
	// CallTimeout bounds each A2A call, a stream's opening included.
	CallTimeout Duration `yaml:"callTimeout"`
	// CancelWait is how long a cancel waits for the agent's confirmation.
	CancelWait Duration `yaml:"cancelWait"`
	// PollInterval is the longest wait between polls of a task orchd
	// follows by polling; quicker polls come first while the task is
	// young (docs/delegation.md, "Following by polling").
	PollInterval Duration `yaml:"pollInterval"`
	// SilenceTimeout is how long a stream may stay silent before orchd
	// asks the agent for its task.
	SilenceTimeout Duration `yaml:"silenceTimeout"`
	// MaxDuration caps every delegation started here; 0 means no cap.
	MaxDuration Duration `yaml:"maxDuration"`
	// Follow is how accepted tasks are followed: auto (default), push,
	// stream or poll (docs/delegation.md, "Following by push").
	Follow string `yaml:"follow"`
	// PushURL is the base URL agents reach orchd's push webhook at.
	// Empty means agent.url, else the listen address.
	PushURL string `yaml:"pushURL"`
	// MaxArtifactBytes bounds what one delegation's artifacts hold
	// together; MaxArtifacts how many it may have (at most a quarter of
	// the event log, 2,500); MaxEventBytes one artifact update or message
	// of an agent. Past one, the delegation fails and its task is
	// canceled. Defaults 4 MiB, 1,000 and 8 MiB less 64 KiB, each lowered
	// to what the state store keeps (docs/delegation.md).
	MaxArtifactBytes int64 `yaml:"maxArtifactBytes"`
	MaxArtifacts     int   `yaml:"maxArtifacts"`
	MaxEventBytes    int64 `yaml:"maxEventBytes"`
	// MaxRunning bounds the delegations this orchd runs at once, and
	// MaxRunningPerCaller those of one caller (its tenant, else its
	// principal); work past either is refused before anything is sent
	// (429 resource_exhausted). 0 means no limit. Defaults 20,000 and 0
	// (docs/delegation.md, "Limits on running work").
	MaxRunning          int `yaml:"maxRunning"`
	MaxRunningPerCaller int `yaml:"maxRunningPerCaller"`
}

// DelegationConfig returns the delegation section as delegation.Config.
func (c *Config) DelegationConfig() delegation.Config {
	d := c.Delegation
	return delegation.Config{Self: d.Self, MaxDepth: d.MaxDepth, MaxAttempts: d.MaxAttempts,
		CallTimeout: time.Duration(d.CallTimeout), CancelWait: time.Duration(d.CancelWait), PollInterval: time.Duration(d.PollInterval),
		SilenceTimeout: time.Duration(d.SilenceTimeout), MaxDuration: time.Duration(d.MaxDuration), Follow: d.Follow,
		MaxArtifactBytes: d.MaxArtifactBytes, MaxArtifacts: d.MaxArtifacts, MaxEventBytes: d.MaxEventBytes,
		MaxRunning: d.MaxRunning, MaxRunningPerCaller: d.MaxRunningPerCaller}
}

// PoliciesConfig is the config file's policies section.
type PoliciesConfig struct {
	// Paths lists policy files and directories of *.yaml files. Relative
	// paths are read from the daemon's working directory. Empty means no
	// policies: every candidate is allowed.
	Paths []string `yaml:"paths"`
	// ReloadInterval is how often the files are checked for changes.
	ReloadInterval Duration `yaml:"reloadInterval"`
	// CostLimit bounds the CEL cost of one expression's evaluation.
	CostLimit uint64 `yaml:"costLimit"`
	// Timeout bounds one evaluation over all candidates.
	Timeout Duration `yaml:"timeout"`
}

// PolicyOptions returns the policies section as policies.Options.
func (c *Config) PolicyOptions() policies.Options {
	return policies.Options{CostLimit: c.Policies.CostLimit, Timeout: time.Duration(c.Policies.Timeout)}
}

// RegistryConfig is the config file's registry section. Each field sets
// the registry.Config field of the same name, where its meaning and default
// are documented; docs/registry.md lists them with their YAML keys.
type RegistryConfig struct {
	// AllowNetworks lists CIDRs card fetches may reach although they are
	// special-purpose (loopback, private, link-local, multicast...).
	AllowNetworks []string `yaml:"allowNetworks"`
	// AllowHosts lists host names card fetches may reach wherever they
	// resolve.
	AllowHosts []string `yaml:"allowHosts"`
	// Timeout bounds one card fetch.
	Timeout Duration `yaml:"timeout"`
	// MaxCardBytes bounds a card's size.
	MaxCardBytes int64 `yaml:"maxCardBytes"`
	// MaxRedirects bounds redirects per fetch; -1 follows none.
	MaxRedirects int `yaml:"maxRedirects"`
	// MaxEntries bounds the card cache.
	MaxEntries int `yaml:"maxEntries"`
	// DefaultTTL is the freshness of a card sent without any.
	DefaultTTL Duration `yaml:"defaultTTL"`
	// MinRefreshInterval is the floor between revalidations of one card.
	MinRefreshInterval Duration `yaml:"minRefreshInterval"`
	// StaleWhileRevalidate is the default stale-while-revalidate window.
	StaleWhileRevalidate Duration `yaml:"staleWhileRevalidate"`
	// StaleIfError is the default stale-if-error window.
	StaleIfError Duration `yaml:"staleIfError"`
	// MinBackoff is the first wait before retrying a failed card.
	MinBackoff Duration `yaml:"minBackoff"`
	// MaxBackoff caps that wait as it doubles.
	MaxBackoff Duration `yaml:"maxBackoff"`
	// UnhealthyAfter is how many failed refreshes in a row mark an agent
	// unhealthy.
	UnhealthyAfter int `yaml:"unhealthyAfter"`
	// BreakerAfter is how many failed calls in a row to an agent's A2A
	// endpoint open its circuit breaker; -1 turns breakers off.
	BreakerAfter int `yaml:"breakerAfter"`
	// BreakerMinBackoff is how long an open breaker first refuses work.
	BreakerMinBackoff Duration `yaml:"breakerMinBackoff"`
	// BreakerMaxBackoff caps that as it doubles.
	BreakerMaxBackoff Duration `yaml:"breakerMaxBackoff"`
	// DriftHistory is how many drift records each agent keeps.
	DriftHistory int `yaml:"driftHistory"`
	// RefreshInterval is how often expired cards are looked for.
	RefreshInterval Duration `yaml:"refreshInterval"`
	// RefreshConcurrency bounds background refreshes.
	RefreshConcurrency int `yaml:"refreshConcurrency"`
	// Deprecated lists capabilities or extension URIs to treat as Tier 3.
	Deprecated []string `yaml:"deprecated"`
	// RequireSignatures refuses agents whose card is unsigned or whose
	// signature does not verify with the agent's cardKeys.
	RequireSignatures bool `yaml:"requireSignatures"`
	// CardKeyURLs lists the JWKS URLs a card signature's jku may name.
	CardKeyURLs []string `yaml:"cardKeyURLs"`
}

// Duration is a time.Duration written as "30s" in YAML.
type Duration time.Duration

// UnmarshalYAML reads a Go duration string, reporting the position of a
// malformed one.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return &positionError{line: n.Line, col: n.Column, msg: fmt.Sprintf("%q is not a duration like 30s or 5m", n.Value)}
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

type positionError struct {
	line, col int
	msg       string
}

func (e *positionError) Error() string { return fmt.Sprintf("%d:%d: %s", e.line, e.col, e.msg) }

// LoadConfig reads the embedded defaults and then, when path is not empty,
// the file at path on top of them. Unknown keys are errors; every error
// names the file and, where known, the line and column.
func LoadConfig(path string) (Config, error) {
	var cfg Config
	if err := decodeConfig("(defaults)", defaultsYAML, &cfg); err != nil {
		return Config{}, err
	}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return Config{}, fmt.Errorf("read config: %w", err)
		}
		if err := decodeConfig(path, b, &cfg); err != nil {
			return Config{}, err
		}
	}
	return cfg, cfg.validate()
}

// decodeConfig decodes one YAML document strictly into cfg.
func decodeConfig(name string, b []byte, cfg *Config) error {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	err := dec.Decode(cfg)
	if errors.Is(err, io.EOF) {
		return nil // an empty file changes nothing
	}
	if err != nil {
		var pe *positionError
		if errors.As(err, &pe) {
			return fmt.Errorf("%s:%s", name, pe.Error())
		}
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msgs := make([]string, len(te.Errors))
			for i, m := range te.Errors {
				// yaml.v3 says "line N: msg"; make it "FILE:N: msg", msg
				// in the file's terms.
				line, msg, ok := strings.Cut(strings.TrimPrefix(m, "line "), ": ")
				if !ok {
					msgs[i] = name + ": " + m
					continue
				}
				msgs[i] = name + ":" + line + ": " + decodeProblem(msg)
			}
			return errors.New(strings.Join(msgs, "\n"))
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

// validate checks what decoding cannot. It reports every problem it
// finds, joined, each naming its setting ("config: agents[0]: …").
func (c *Config) validate() error {
	var problems []error
	add := func(err error) {
		if err != nil {
			problems = append(problems, err)
		}
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		add(fmt.Errorf("config: listen %q: %w", c.Listen, err))
	}
	if c.Delegation.Self != "" {
		if err := checkIdentity(c.Delegation.Self); err != nil {
			add(fmt.Errorf("config: delegation.self: %w", err))
		}
	}
	if d := c.Delegation; d.MaxArtifactBytes < 0 || d.MaxArtifacts < 0 || d.MaxEventBytes < 0 {
		add(errors.New("config: delegation.maxArtifactBytes, maxArtifacts and maxEventBytes must not be negative"))
	}
	if d := c.Delegation; d.MaxRunning < 0 || d.MaxRunningPerCaller < 0 {
		add(errors.New("config: delegation.maxRunning and maxRunningPerCaller must not be negative (0: no limit)"))
	}
	if n := c.Delegation.MaxArtifacts; n > delegation.DefaultMaxEvents/4 {
		add(fmt.Errorf("config: delegation.maxArtifacts %d is over %d, a quarter of a delegation's event log, which must hold them all", n, delegation.DefaultMaxEvents/4))
	}
	if !delegation.ValidFollow(c.Delegation.Follow) {
		add(fmt.Errorf("config: delegation.follow %q: want auto, push, stream or poll", c.Delegation.Follow))
	}
	if err := checkPushURL(c.Delegation.PushURL); err != nil {
		add(fmt.Errorf("config: delegation.pushURL: %w", err))
	}
	add(c.HTTP.validate())
	add(c.Log.validate())
	add(c.Auth.Validate())
	add(c.MCP.validate())
	add(c.Agent.GRPC.validate())
	if c.Auth.MTLS != nil && c.HTTP.TLS == nil {
		add(errors.New("config: auth.mtls needs http.tls: client certificates are only presented over HTTPS"))
	}
	if _, err := c.Store.mode("-"); err != nil {
		add(err)
	} else if c.Store.Mode != StoreMemory {
		if err := c.Store.storeConfig().Validate(); err != nil {
			add(fmt.Errorf("config: %w", err))
		}
	}
	for i, a := range c.Agents {
		if _, err := registry.NormalizeURL(a.URL); err != nil {
			add(fmt.Errorf("config: agents[%d]: %w", i, err))
		}
		if a.Peer && a.ID == "" {
			add(fmt.Errorf("config: agents[%d]: peer needs an id: the agent's lineage is trusted by its id", i))
		}
		if a.Credentials != nil {
			if err := a.Credentials.Validate(); err != nil {
				add(fmt.Errorf("config: agents[%d].credentials: %w", i, err))
			}
		}
	}
	return errors.Join(problems...)
}

// RegistryConfig returns the file's registry section as registry.Config.
func (c *Config) RegistryConfig() registry.Config {
	r := c.Registry
	return registry.Config{
		Timeout: time.Duration(r.Timeout), MaxCardBytes: r.MaxCardBytes, MaxRedirects: r.MaxRedirects,
		AllowNetworks: r.AllowNetworks, AllowHosts: r.AllowHosts,
		MaxEntries: r.MaxEntries, DefaultTTL: time.Duration(r.DefaultTTL), MinRefreshInterval: time.Duration(r.MinRefreshInterval),
		StaleWhileRevalidate: time.Duration(r.StaleWhileRevalidate), StaleIfError: time.Duration(r.StaleIfError),
		MinBackoff: time.Duration(r.MinBackoff), MaxBackoff: time.Duration(r.MaxBackoff),
		UnhealthyAfter: r.UnhealthyAfter, DriftHistory: r.DriftHistory,
		BreakerAfter: r.BreakerAfter, BreakerMinBackoff: time.Duration(r.BreakerMinBackoff), BreakerMaxBackoff: time.Duration(r.BreakerMaxBackoff),
		RefreshInterval: time.Duration(r.RefreshInterval), RefreshConcurrency: r.RefreshConcurrency,
		Deprecated:        r.Deprecated,
		RequireSignatures: r.RequireSignatures, CardKeyURLs: r.CardKeyURLs,
	}
}
