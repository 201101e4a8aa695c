package delegation

import (
	"net/http"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/orchd/orchd/credentials"
)

// Config tunes the engine. Zero fields take the documented defaults.
type Config struct {
	// Self is this orchestrator's identity in delegation chains: unique
	// among the orchestrators a chain may pass through, since cycles are
	// found by comparing identities. Default "orchd", which suits only a
	// lone orchestrator; the daemon generates one per state directory.
	Self string
	// Name is this orchestrator's display name in chains (its card name),
	// shown beside Self in messages. Default Self.
	Name string
	// MaxDepth bounds chains started here. Default 8.
	MaxDepth int
	// MaxAttempts bounds how many candidates are tried when agents fail
	// before accepting the work. Default 3.
	MaxAttempts int
	// CallTimeout bounds each A2A call to an agent: a unary call (send
	// without streaming, get task), and the opening of a stream until the
	// agent's first event. Default 30s.
	CallTimeout time.Duration
	// SilenceTimeout is how long a stream may bring no event before orchd
	// asks the agent for the task (GetTask, bounded by CallTimeout): an
	// agent that answers is alive, however long it works; five failed
	// asks in a row, PollInterval apart, fail the delegation. Default 1m.
	SilenceTimeout time.Duration
	// MaxDuration caps every delegation started here: its deadline is at
	// most its start plus MaxDuration, and that deadline travels down the
	// chain like a caller's. 0 means no cap.
	MaxDuration time.Duration
	// CancelWait is how long a cancel waits for the agent to confirm
	// before the delegation fails instead. Default 10s.
	CancelWait time.Duration
	// PollInterval is the longest wait between polls of a task of an agent
	// that does not stream: polls start within a millisecond and wait a
	// third of the task's age, up to PollInterval (poll.go). Default 500ms.
	PollInterval time.Duration
	// MaxEvents bounds each delegation's retained event log. Default
	// DefaultMaxEvents.
	MaxEvents int
	// LiveEvents is how many of a delegation's latest events it keeps in
	// memory, where the readers following it take them without a store
	// read; older ones are read from the store, which keeps the whole
	// log. Events the store has not taken yet stay in memory however many
	// (up to MaxEvents). Default DefaultLiveEvents.
	LiveEvents int
	// MaxArtifactBytes bounds what a delegation's artifacts hold together,
	// in bytes of JSON, and MaxArtifacts how many there are (at most
	// MaxEvents/4); MaxEventBytes bounds one event, an artifact update or
	// a message of the agent's, which the store must take in one message.
	// An agent that goes past one fails its delegation, and its task is
	// canceled (artifacts.go). Defaults DefaultMaxArtifactBytes,
	// DefaultMaxArtifacts and DefaultMaxEventBytes.
	MaxArtifactBytes int64
	MaxArtifacts     int
	MaxEventBytes    int64
	// MaxRunning bounds the delegations this engine runs at once (those
	// that have not ended, waiting for input included), and
	// MaxRunningPerCaller those of one caller: its tenant, else its
	// principal; work without an authenticated caller counts only
	// against MaxRunning. Delegate refuses work over either with a
	// *LimitError (ErrResourceExhausted) before it sends anything;
	// delegations carried on after a restart are never refused but count
	// (limits.go). 0 means no limit; the daemon's defaults are in its
	// config (docs/delegation.md).
	MaxRunning          int
	MaxRunningPerCaller int
	// KeepFinished is how many ended delegations keep their event logs in
	// memory; their records stay in the store. Default 1,000.
	KeepFinished int
	// HTTPClient talks A2A to agents. nil means a client with no overall
	// timeout (streams last as long as their tasks). Give one whose
	// transport applies the registry's SSRF rules (registry.NewTransport).
	HTTPClient *http.Client
	// Credentials builds the transports of agents that have credentials
	// configured (registry.Agent.CredentialConfig); each agent's client is
	// HTTPClient with that transport. Give one over the transport under
	// HTTPClient's telemetry: credentials.NewClients with Base the
	// registry.NewTransport transport and Wrap the telemetry. nil means
	// one over HTTPClient's transport as it is, which cannot present TLS
	// client certificates when that transport is wrapped.
	Credentials *credentials.Clients
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
	// TracerProvider records spans for delegations, policy evaluations and
	// steering signals; nil records nothing. Spans of A2A calls come from
	// HTTPClient's transport (telemetry.Telemetry.Transport).
	TracerProvider trace.TracerProvider
	// MeterProvider records the delegation metrics; nil records nothing.
	MeterProvider metric.MeterProvider
	// Leases, when several processes share the store, decide which one
	// follows each running delegation (resume.go). nil means this
	// process owns every delegation in its store.
	Leases Leases
	// Containments keeps the agents' containments (contain.go) where
	// every process sharing the store sees them. nil keeps them in this
	// process only, until it stops.
	Containments Containments
	// Relay passes operations on delegations followed by another process
	// to it (relay.go); used with Leases.
	Relay Relay
	// Instance names this process among those sharing the store, as the
	// holder of leases and the address of its relay. Default a random id.
	Instance string
	// Follow is how a task an agent accepted is followed (follow.go):
	// FollowAuto (default) streams when the agent streams, else pushes
	// when the agent declares push notifications and PushURL is one it can
	// reach, else polls. FollowPush pushes even to an agent that streams
	// (no connection held per delegation, a read of the task per
	// notification); FollowStream and FollowPoll ask for one way. Each
	// falls back as auto does when the agent cannot.
	Follow string
	// TrustLineage reports whether the lineage the agent with this
	// registry id reports is believed, for an agent whose card declares
	// the delegation extension (lineage.go). It is asked once, when the
	// work is sent, and the answer kept with the delegation. nil believes
	// no agent's: every hop is a leaf.
	TrustLineage func(agentID string) bool
	// PushURL is the URL prefix of orchd's push webhook: a delegation's
	// webhook is PushURL followed by its id. Empty means no push until
	// Engine.SetPushURL names one.
	PushURL string
}

func (c Config) withDefaults() Config {
	if c.Self == "" {
		c.Self = "orchd"
	}
	if c.Name == "" {
		c.Name = c.Self
	}
	if c.MaxDepth <= 0 {
		c.MaxDepth = DefaultMaxDepth
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 3
	}
	if c.CallTimeout <= 0 {
		c.CallTimeout = 30 * time.Second
	}
	if c.SilenceTimeout <= 0 {
		c.SilenceTimeout = time.Minute
	}
	if c.CancelWait <= 0 {
		c.CancelWait = 10 * time.Second
	}
	if c.PollInterval <= 0 {
		c.PollInterval = 500 * time.Millisecond
	}
	if c.MaxEvents <= 0 {
		c.MaxEvents = DefaultMaxEvents
	}
	if c.LiveEvents <= 0 {
		c.LiveEvents = DefaultLiveEvents
	}
	c = c.artifactBounds()
	if c.KeepFinished <= 0 {
		c.KeepFinished = 1_000
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{}
	}
	if c.Credentials == nil {
		c.Credentials = credentials.NewClients(credentials.ClientsConfig{Base: c.HTTPClient.Transport})
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Instance == "" {
		c.Instance = a2a.NewContextID()
	}
	if c.Follow == "" {
		c.Follow = FollowAuto
	}
	return c
}

// DefaultMaxEvents is how many events of each delegation are kept unless
// Config.MaxEvents says otherwise.
const DefaultMaxEvents = 10_000

// DefaultLiveEvents is how many of a delegation's latest events stay in
// memory unless Config.LiveEvents says otherwise: a reader woken at each
// event is at most a few behind, and a burst (an artifact streamed in
// chunks) fits, while a delegation that runs for hours holds 16 events
// rather than up to MaxEvents.
const DefaultLiveEvents = 16
