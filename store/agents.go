package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/registry"
)

// Defaults for [AgentsConfig] fields left at zero.
const (
	// DefaultAgentsBucket is the key-value bucket agents are kept in.
	DefaultAgentsBucket = "orchd-agents"
	// DefaultAgentValueBytes bounds one stored agent: room for a card of
	// capability.DefaultMaxBytes and 1 MiB for the rest, drift history
	// included.
	DefaultAgentValueBytes = 2 << 20
	// DefaultMaxAgents bounds how many agents Load reads.
	DefaultMaxAgents = 10000
)

// agentKeyPrefix starts every agent's key, leaving the bucket room for
// other kinds of keys; agentKeys is the watch pattern for all of them.
const (
	agentKeyPrefix = "a."
	agentKeys      = "a.>"
)

// AgentsConfig says where and how [Agents] keeps agents. The zero value is
// ready to use.
type AgentsConfig struct {
	// Bucket is the key-value bucket's name. Default "orchd-agents".
	Bucket string
	// Replicas is how many servers of a cluster hold the bucket. Default 1.
	Replicas int
	// MaxValueBytes bounds one stored agent, card included; a larger one is
	// refused with an error wrapping registry.ErrCardTooLarge. Default
	// DefaultAgentValueBytes. The server's max_payload (1 MiB unless
	// configured) bounds it too: a server storing cards near
	// capability.DefaultMaxBytes needs a larger one.
	MaxValueBytes int
	// MaxAgents bounds how many agents Load reads; a store holding more
	// fails Load. Default DefaultMaxAgents.
	MaxAgents int
	// Log receives warnings about stored values that cannot be read; nil
	// discards them.
	Log *slog.Logger
}

func (c AgentsConfig) withDefaults() AgentsConfig {
	if c.Bucket == "" {
		c.Bucket = DefaultAgentsBucket
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.MaxValueBytes <= 0 {
		c.MaxValueBytes = DefaultAgentValueBytes
	}
	if c.MaxAgents <= 0 {
		c.MaxAgents = DefaultMaxAgents
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// Agents keeps the registry's agents in a JetStream key-value bucket, one
// JSON value per agent under the key "a.<id>" (with '.' in the id written
// as '='), so a restarted orchd, or another orchd on the same store, finds
// them. Revisions are the bucket's: a save expecting a revision is a
// compare-and-set, so concurrent writers never overwrite each other's
// newer versions unknowingly. It is safe for concurrent use.
type Agents struct {
	js        jetstream.JetStream
	kv        jetstream.KeyValue
	maxValue  int
	maxAgents int
	log       *slog.Logger
}

var _ registry.AgentStore = (*Agents)(nil)

// NewAgents opens the bucket named in cfg, creating it (or updating its
// settings) as needed. It fails with an error wrapping
// registry.ErrUnavailable when JetStream cannot be reached.
func NewAgents(ctx context.Context, js jetstream.JetStream, cfg AgentsConfig) (*Agents, error) {
	cfg = cfg.withDefaults()
	if cfg.MaxValueBytes > math.MaxInt32 {
		return nil, fmt.Errorf("agent store: MaxValueBytes %d is over %d", cfg.MaxValueBytes, math.MaxInt32)
	}
	kv, err := openKV(ctx, js, cfg.bucket())
	if err != nil {
		return nil, agentStoreErr("open agent bucket "+cfg.Bucket, err)
	}
	return &Agents{js: js, kv: kv, maxValue: cfg.MaxValueBytes, maxAgents: cfg.MaxAgents, log: cfg.Log}, nil
}

// Agents opens the agent store in the Store's namespace (bucket
// <namespace>-agents unless cfg names one, with the Store's replicas),
// retrying while a cluster settles, as every bucket the Store sets up.
func (s *Store) Agents(ctx context.Context, cfg AgentsConfig) (*Agents, error) {
	if cfg.Bucket == "" {
		cfg.Bucket = s.cfg.Namespace + "-agents"
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = s.cfg.Replicas
	}
	cfg = cfg.withDefaults()
	if cfg.MaxValueBytes > math.MaxInt32 {
		return nil, fmt.Errorf("agent store: MaxValueBytes %d is over %d", cfg.MaxValueBytes, math.MaxInt32)
	}
	kv, err := s.ensureKV(ctx, cfg.bucket())
	if err != nil {
		return nil, agentStoreErr("open agent bucket "+cfg.Bucket, err)
	}
	return &Agents{js: s.js, kv: kv, maxValue: cfg.MaxValueBytes, maxAgents: cfg.MaxAgents, log: cfg.Log}, nil
}

// bucket is the configuration of the bucket c keeps agents in; c has its
// defaults.
func (c AgentsConfig) bucket() jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:       c.Bucket,
		Description:  "orchd registry: agents with their last good cards",
		MaxValueSize: int32(c.MaxValueBytes),
		History:      1,
		Storage:      jetstream.FileStorage,
		Replicas:     c.Replicas,
	}
}

// Save stores ag under its id if the stored agent is at ag.Revision (0:
// none is stored) and returns the new revision. It fails wrapping
// registry.ErrStale when the revision moved on, registry.ErrInvalidID for
// an id that is not one, registry.ErrCardTooLarge when the stored form is
// over the limit, and registry.ErrUnavailable when the store cannot be
// reached, does not answer in time or is full.
func (a *Agents) Save(ctx context.Context, ag registry.SavedAgent) (uint64, error) {
	if !registry.ValidID(ag.ID) {
		return 0, fmt.Errorf("save agent: %w %q", registry.ErrInvalidID, ag.ID)
	}
	val, err := encodeAgent(ag)
	if err != nil {
		return 0, fmt.Errorf("save agent %s: %w", ag.ID, err)
	}
	if limit := a.limit(); len(val) > limit {
		return 0, fmt.Errorf("save agent %s: %w: its stored form is %d bytes, over the agent store's limit of %d", ag.ID, registry.ErrCardTooLarge, len(val), limit)
	}
	key := agentKey(ag.ID)
	var rev uint64
	if ag.Revision == 0 {
		rev, err = a.kv.Create(ctx, key, val)
	} else {
		rev, err = a.kv.Update(ctx, key, val, ag.Revision)
	}
	switch {
	case err == nil:
		return rev, nil
	// ErrKeyRevisionMismatch also matches ErrKeyExists; either means stale.
	case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyExists):
		return 0, fmt.Errorf("save agent %s over revision %d: %w: %w", ag.ID, ag.Revision, registry.ErrStale, err)
	}
	return 0, agentStoreErr("save agent "+ag.ID, err)
}

// limit is the largest value a save may write: MaxValueBytes, or less
// when the server takes smaller messages (with room for headers).
func (a *Agents) limit() int {
	limit := a.maxValue
	if nc := a.js.Conn(); nc != nil {
		if mp := int(nc.MaxPayload()) - 4096; mp > 0 && mp < limit {
			limit = mp
		}
	}
	return limit
}

// Delete removes the agent stored under id; an id not stored is no error.
// It fails wrapping registry.ErrUnavailable when the store cannot take it.
func (a *Agents) Delete(ctx context.Context, id string) error {
	if !registry.ValidID(id) {
		return fmt.Errorf("delete agent: %w %q", registry.ErrInvalidID, id)
	}
	if err := a.kv.Delete(ctx, agentKey(id)); err != nil {
		return agentStoreErr("delete agent "+id, err)
	}
	return nil
}

// Load returns the agents stored at one moment: the bucket's latest value
// of every agent key, read through one watcher so that every later change
// has a higher revision. A value that cannot be read is logged and left
// out. It fails wrapping registry.ErrUnavailable when the store cannot be
// read, and when more than MaxAgents are stored.
func (a *Agents) Load(ctx context.Context) ([]registry.SavedAgent, error) {
	w, err := a.kv.Watch(ctx, agentKeys, jetstream.IgnoreDeletes())
	if err != nil {
		return nil, agentStoreErr("load agents", err)
	}
	defer stopWatch(w, watchStopWait)
	var out []registry.SavedAgent
	err = readInitial(ctx, w, func(e jetstream.KeyValueEntry) error {
		if len(out) >= a.maxAgents {
			return fmt.Errorf("more than %d stored (AgentsConfig.MaxAgents)", a.maxAgents)
		}
		if ag, ok := a.decode(e); ok {
			out = append(out, ag)
		}
		return nil
	})
	switch {
	case errors.Is(err, errWatchClosed):
		return nil, fmt.Errorf("load agents: %w", errAgentWatcherClosed)
	case err != nil:
		return nil, agentStoreErr("load agents", err)
	}
	return out, nil
}

// Watch calls fn for every change to an agent key after revision after,
// in order, deletions included, until ctx is done (it then returns nil) or
// the watch fails (wrapping registry.ErrUnavailable). When the connection
// reconnects, as after a server restart, the watch starts again after the
// last revision it delivered: the server may have lost its consumer, and
// the client would notice only after missing its heartbeats.
func (a *Agents) Watch(ctx context.Context, after uint64, fn func(ag registry.SavedAgent, removed bool)) error {
	err := watchKeys(ctx, a.js, a.kv, agentKeys, after, a.log, "agent store", func(e jetstream.KeyValueEntry) {
		switch {
		case e == nil: // caught up
		case e.Operation() == jetstream.KeyValueDelete || e.Operation() == jetstream.KeyValuePurge:
			id, ok := agentIDFromKey(e.Key())
			if !ok {
				a.log.Warn("agent store: key is not an agent's; ignored", "key", e.Key(), "revision", e.Revision())
				return
			}
			fn(registry.SavedAgent{ID: id, Revision: e.Revision()}, true)
		default:
			if ag, ok := a.decode(e); ok {
				fn(ag, false)
			}
		}
	})
	if err != nil {
		return agentStoreErr("watch agents", err)
	}
	return nil
}

// decode reads one stored agent, logging why when it cannot.
func (a *Agents) decode(e jetstream.KeyValueEntry) (registry.SavedAgent, bool) {
	id, ok := agentIDFromKey(e.Key())
	if !ok {
		a.log.Warn("agent store: key is not an agent's; ignored", "key", e.Key(), "revision", e.Revision())
		return registry.SavedAgent{}, false
	}
	if n := len(e.Value()); n > a.maxValue {
		a.log.Warn("agent store: stored agent is over the size limit; ignored", "id", id, "bytes", n, "limit", a.maxValue)
		return registry.SavedAgent{}, false
	}
	var ag registry.SavedAgent
	if err := json.Unmarshal(e.Value(), &ag); err != nil {
		a.log.Warn("agent store: stored agent cannot be read; ignored", "id", id, "revision", e.Revision(), "error", err)
		return registry.SavedAgent{}, false
	}
	if ag.ID != id {
		a.log.Warn("agent store: stored agent's id is not its key's; ignored", "key", e.Key(), "id", ag.ID)
		return registry.SavedAgent{}, false
	}
	ag.Revision = e.Revision()
	return ag, true
}

// encodeAgent writes ag as JSON without escaping HTML characters, so the
// card, compacted, is no larger than fetched.
func encodeAgent(ag registry.SavedAgent) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ag); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// agentKey maps a registry id to its key.
func agentKey(id string) string { return idKey(agentKeyPrefix, id) }

// agentIDFromKey maps a key back to its id, reporting false for a key no
// valid id maps to.
func agentIDFromKey(key string) (string, bool) { return idFromKey(agentKeyPrefix, key) }

// idKey maps a registry id to its key under prefix. Ids hold letters,
// digits, '.', '_' and '-'; '.' separates subject tokens, so it is written
// as '=', which no id holds, and the id stays one token.
func idKey(prefix, id string) string {
	return prefix + strings.ReplaceAll(id, ".", "=")
}

// idFromKey maps a key under prefix back to its registry id, reporting
// false for a key no valid id maps to.
func idFromKey(prefix, key string) (string, bool) {
	tok, ok := strings.CutPrefix(key, prefix)
	if !ok || strings.Contains(tok, ".") {
		return "", false
	}
	id := strings.ReplaceAll(tok, "=", ".")
	return id, registry.ValidID(id)
}

// agentStoreErr says what was tried, wrapping registry.ErrUnavailable
// when err means the store could not be reached, did not answer in time or
// has no room (see isUnavailable).
func agentStoreErr(what string, err error) error {
	if isUnavailable(err) {
		return fmt.Errorf("%s: %w: %w", what, registry.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// errAgentWatcherClosed is the cause when a watcher's updates end before
// its caller stops it: its connection closed.
var errAgentWatcherClosed = fmt.Errorf("%w: %w", registry.ErrUnavailable, errWatchClosed)
