package orchestrator

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/taskstore"
	"go.yaml.in/yaml/v3"

	"github.com/orchd/orchd/a2aserver"
	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/registry"
	"github.com/orchd/orchd/store"
)

// Where orchd keeps its state (docs/state.md).
const (
	// StoreEmbedded runs a NATS server with JetStream inside orchd, on
	// files under the state directory: the default.
	StoreEmbedded = "embedded"
	// StoreExternal keeps state on the NATS cluster at store.url, shared
	// by every replica of one orchd.
	StoreExternal = "external"
	// StoreMemory keeps state in process memory, lost when orchd stops.
	StoreMemory = "memory"
)

// StoreConfig is the config file's store section. It is written either
// as one word, "store: memory" or "store: embedded", or as a mapping with
// the fields below.
type StoreConfig struct {
	// Mode is embedded (the default when URL is empty), external (the
	// default when URL is set) or memory.
	Mode string `yaml:"mode"`
	// URL lists the client URLs of an existing NATS cluster
	// (nats://host:4222, comma-separated); empty runs the embedded server.
	URL string `yaml:"url"`
	// Credentials is a NATS .creds file to connect to URL with.
	Credentials string `yaml:"credentials"`
	// NKeySeedFile is an nkey seed file to connect to URL with.
	NKeySeedFile string `yaml:"nkeySeedFile"`
	// TLS configures TLS to URL.
	TLS StoreTLS `yaml:"tls"`
	// Namespace prefixes every bucket and stream, so several logical
	// orchds share one cluster; replicas of one orchd use the same.
	Namespace string `yaml:"namespace"`
	// Replicas is how many cluster nodes keep each bucket and stream.
	Replicas int `yaml:"replicas"`
	// Retention is how long ended delegations, their events and ended A2A
	// tasks are kept.
	Retention Duration `yaml:"retention"`
	// MaxBytes bounds the embedded server's disk use.
	MaxBytes int64 `yaml:"maxBytes"`
	// Sync is how often the embedded server flushes to disk: "always"
	// (every write) or a duration; see docs/state.md.
	Sync string `yaml:"sync"`
	// Listen, when set, opens a client port on the embedded server
	// (host:port), for the nats CLI or backups; none by default.
	Listen string `yaml:"listen"`
	// Timeout bounds each store operation and the connection to URL.
	Timeout Duration `yaml:"timeout"`
	// LeaseTTL is how long a replica's liveness lease, and so its hold
	// on the delegations it follows, lasts unless renewed (external
	// mode): about the longest a delegation goes unfollowed when its
	// replica dies, before the others carry it on.
	LeaseTTL Duration `yaml:"leaseTTL"`
	// QuickWriteLag is how long the record of a delegation its agent
	// ended in its first answer may wait, after the caller has the
	// answer, to be written with others: a duration from 1ms to 1s, or
	// "off" to write it before the answer; see docs/state.md.
	QuickWriteLag string `yaml:"quickWriteLag"`
	// TaskRideOut is how long an update of a running A2A task waits for
	// an unavailable store; see docs/state.md.
	TaskRideOut Duration `yaml:"taskRideOut"`
}

// StoreTLS is TLS to an external NATS cluster.
type StoreTLS struct {
	// CA is the PEM file of the CAs that sign the servers' certificates.
	CA string `yaml:"ca"`
	// Cert and Key are the client certificate and key, for mTLS.
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// UnmarshalYAML reads the store section as one word (the mode) or as a
// mapping, refusing unknown keys as the rest of the file does.
func (c *StoreConfig) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		c.Mode = n.Value
		return nil
	}
	if n.Kind == yaml.MappingNode {
		known := map[string]bool{}
		t := reflect.TypeFor[StoreConfig]()
		for i := range t.NumField() {
			known[strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]] = true
		}
		for i := 0; i < len(n.Content); i += 2 {
			if k := n.Content[i]; !known[k.Value] {
				return &positionError{line: k.Line, col: k.Column, msg: fmt.Sprintf("field %s not found in store", k.Value)}
			}
		}
	}
	type plain StoreConfig
	return n.Decode((*plain)(c))
}

// mode returns the store's mode for a daemon with the state directory
// dir: memory when asked, or when there is neither a directory nor a URL.
func (c StoreConfig) mode(dir string) (string, error) {
	switch c.Mode {
	case StoreMemory:
		if c.URL != "" {
			return "", fmt.Errorf("config: store.url is set, but store.mode is %s; remove one", StoreMemory)
		}
		return StoreMemory, nil
	case StoreEmbedded:
		if c.URL != "" {
			return "", fmt.Errorf("config: store.url is set, but store.mode is %s; remove one", StoreEmbedded)
		}
	case StoreExternal:
		if c.URL == "" {
			return "", fmt.Errorf("config: store.mode is %s, but store.url is empty", StoreExternal)
		}
	case "":
	default:
		return "", fmt.Errorf("config: store %q is none of %s, %s and %s", c.Mode, StoreEmbedded, StoreExternal, StoreMemory)
	}
	switch {
	case c.URL != "":
		return StoreExternal, nil
	case dir == "":
		return StoreMemory, nil
	}
	return StoreEmbedded, nil
}

// storeConfig is the section as store.Config.
func (c StoreConfig) storeConfig() store.Config {
	return store.Config{URL: c.URL, Credentials: c.Credentials, NKeySeedFile: c.NKeySeedFile,
		TLS:       store.TLSConfig{CA: c.TLS.CA, Cert: c.TLS.Cert, Key: c.TLS.Key},
		Namespace: c.Namespace, Replicas: c.Replicas, Retention: time.Duration(c.Retention),
		MaxBytes: c.MaxBytes, Sync: c.Sync, Listen: c.Listen, Timeout: time.Duration(c.Timeout),
		QuickWriteLag: c.QuickWriteLag, TaskRideOut: time.Duration(c.TaskRideOut)}
}

// state is where a daemon keeps what outlives it: one store, and the
// seam each part of orchd uses it through.
type state struct {
	mode  string
	st    *store.Store // nil in memory mode
	lock  *os.File     // the state directory's lock, if there is one
	deleg delegation.Store
	// leases and relay are nil unless replicas share an external store.
	leases delegation.Leases
	relay  delegation.Relay
	agents registry.AgentStore // nil in memory mode
	// containments keeps the agents' containments, beside the agents;
	// nil in memory mode, where the engine keeps them itself.
	containments delegation.Containments
	tasks        *closingTasks
	// pushConfigs keeps the A2A push notification configs of the tasks.
	pushConfigs *store.PushConfigs
	// self is the daemon's identity in chains (identity).
	self string
	// maxTaskBytes is the largest A2A task the durable store keeps, 0 in
	// memory mode; what a delegation may produce stays within it
	// (delegationBounds).
	maxTaskBytes int64
}

// delegationBounds lowers what a delegation may produce to what the store
// can keep: an event, an agent's artifact update or message, in one
// message of the store's; the artifacts, with the history beside them, in
// orchd's A2A task mirroring the delegation, which holds them whole.
func (s *state) delegationBounds(c delegation.Config) delegation.Config {
	if s.maxTaskBytes <= 0 {
		return c
	}
	c.MaxEventBytes = min(cmp.Or(c.MaxEventBytes, delegation.DefaultMaxEventBytes), s.maxTaskBytes)
	c.MaxArtifactBytes = min(cmp.Or(c.MaxArtifactBytes, delegation.DefaultMaxArtifactBytes), s.maxTaskBytes/2)
	return c
}

// openState takes the state directory's lock, opens the configured store
// and settles the daemon's identity, before orchd's buckets and streams
// are made. On error nothing stays open.
func openState(ctx context.Context, cfg Config, dir string, log *slog.Logger) (_ *state, err error) {
	mode, err := cfg.Store.mode(dir)
	if err != nil {
		return nil, err
	}
	s := &state{mode: mode}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if dir != "" {
		if s.lock, err = lockStateDir(dir); err != nil {
			return nil, err
		}
	}
	if mode == StoreMemory {
		if cfg.Store.Mode != StoreMemory {
			log.Warn("no state directory and no store.url: delegations, agents added through the API and A2A tasks are kept in memory and lost when orchd stops")
		} else {
			log.Warn("store: memory: delegations, agents added through the API and A2A tasks are kept in memory and lost when orchd stops")
		}
		if s.self, err = identity(ctx, cfg, dir, s); err != nil {
			return nil, err
		}
		s.deleg = delegation.NewMemoryStore(0)
		s.tasks = newClosingTasks(store.NewMemoryTasks(store.MemoryTasksConfig{}), false)
		if s.pushConfigs, err = store.NewMemoryPushConfigs(cfg.Agent.Push.push().StoreConfig()); err != nil {
			return nil, err
		}
		return s, nil
	}
	scfg := cfg.Store.storeConfig()
	if s.st, err = store.Open(ctx, dir, scfg, log.With("component", "store")); err != nil {
		return nil, err
	}
	if s.self, err = identity(ctx, cfg, dir, s); err != nil {
		return nil, err
	}
	hints := storeHints(cfg.Delegation.MaxRunning)
	if s.deleg, err = s.st.Delegations(ctx, store.DelegationsConfig{Hints: hints}); err != nil {
		return nil, err
	}
	storeLog := log.With("component", "store")
	agents, err := s.st.Agents(ctx, store.AgentsConfig{Log: storeLog})
	if err != nil {
		return nil, err
	}
	s.agents, s.containments = agents, agents
	tasks, err := s.st.Tasks(ctx, store.TasksConfig{Logger: storeLog, LegacyUser: a2aserver.LegacyTaskUser, Hints: hints})
	if err != nil {
		return nil, err
	}
	s.tasks = newClosingTasks(tasks, true)
	s.maxTaskBytes = int64(tasks.MaxTaskBytes())
	if s.pushConfigs, err = s.st.PushConfigs(ctx, cfg.Agent.Push.push().StoreConfig()); err != nil {
		return nil, err
	}
	if mode == StoreExternal {
		if s.leases, err = s.st.Leases(ctx, store.LeasesConfig{TTL: time.Duration(cfg.Store.LeaseTTL)}); err != nil {
			return nil, err
		}
		s.relay = s.st.Relay()
	}
	log.Info("state store open", "mode", mode, "stateDir", dir)
	return s, nil
}

// storeHints is how many running delegations, and A2A tasks, the store
// remembers its writes of (store.DelegationsConfig.Hints,
// store.TasksConfig.Hints) on a node that runs at most maxRunning at once
// (0: no limit, the store's default): twice that, room for the work it
// takes over from other replicas or carries on after a restart, which
// may go past the limit, and never fewer than minStoreHints.
func storeHints(maxRunning int) int {
	if maxRunning <= 0 {
		return 0
	}
	return min(max(2*maxRunning, minStoreHints), store.MaxHints)
}

// minStoreHints is the least storeHints gives, which costs a node with
// a small maxRunning nothing: only work that runs is remembered.
const minStoreHints = 4096

// close closes the store and releases the state directory's lock, last.
func (s *state) close() {
	if s.st != nil {
		if err := s.st.Close(); err != nil {
			slog.Default().Debug("close store", "error", err)
		}
	}
	if s.lock != nil {
		s.lock.Close()
	}
}

// ready reports whether the store can take work, for readiness; its
// error says why not, starting "state store".
func (s *state) ready(ctx context.Context) error {
	if s.st == nil {
		return nil
	}
	return s.st.Ready(ctx)
}

// closingTasks is the A2A task store as the handler uses it: once orchd
// begins to stop, a durable store takes no more writes. The executions
// mirroring delegations then end without marking their tasks failed, so
// the tasks stay as they were for the next process, which carries their
// delegations on (a2aserver.Server.Resumed). A memory store keeps taking writes: no
// process will carry its tasks on, and failing them tells their callers.
type closingTasks struct {
	taskstore.Store
	durable bool
	closed  atomic.Bool
}

func newClosingTasks(s taskstore.Store, durable bool) *closingTasks {
	return &closingTasks{Store: s, durable: durable}
}

// errStopping is the write refused while orchd stops.
var errStopping = a2a.NewError(a2a.ErrInternalError, "orchd is stopping; the task is carried on when it starts again")

// freeze refuses writes from now on, if the store is durable.
func (t *closingTasks) freeze() {
	if t.durable {
		t.closed.Store(true)
	}
}

// Create implements taskstore.Store.
func (t *closingTasks) Create(ctx context.Context, task *a2a.Task) (taskstore.TaskVersion, error) {
	if t.closed.Load() {
		return taskstore.TaskVersionMissing, errStopping
	}
	return t.Store.Create(ctx, task)
}

// Update implements taskstore.Store.
func (t *closingTasks) Update(ctx context.Context, req *taskstore.UpdateRequest) (taskstore.TaskVersion, error) {
	if t.closed.Load() {
		return taskstore.TaskVersionMissing, errStopping
	}
	return t.Store.Update(ctx, req)
}
