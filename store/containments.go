package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/registry"
)

// containKeyPrefix starts the key of every agent's containment, kept in
// the agents' bucket beside the agents ("c.<id>", '.' in the id written
// as '=', as agentKey does); containKeys is the watch pattern for all of
// them. A containment is kept under its agent's id, whether or not an
// agent is registered there.
const (
	containKeyPrefix = "c."
	containKeys      = "c.>"
)

// maxContainmentBytes bounds one stored containment: its reason is at most
// registry.MaxContainmentReason bytes, and the rest is short.
const maxContainmentBytes = 4096

// releaseAttempts bounds how often Release tries again when the
// containment changes under it.
const releaseAttempts = 3

var _ delegation.Containments = (*Agents)(nil)

// Contain keeps c under its agent's id unless a containment is kept there
// already; it returns the one kept and whether this call kept it. It
// fails wrapping registry.ErrUnavailable when the store cannot be reached.
func (a *Agents) Contain(ctx context.Context, c registry.Containment) (registry.Containment, bool, error) {
	if !registry.ValidID(c.Agent) {
		return registry.Containment{}, false, fmt.Errorf("contain agent: %w %q", registry.ErrInvalidID, c.Agent)
	}
	val, err := json.Marshal(c)
	if err != nil {
		return registry.Containment{}, false, fmt.Errorf("contain agent %s: %w", c.Agent, err)
	}
	key := containKey(c.Agent)
	for range releaseAttempts {
		_, err = a.kv.Create(ctx, key, val)
		switch {
		case err == nil:
			return c, true, nil
		// ErrKeyRevisionMismatch also matches ErrKeyExists: either way a
		// containment is kept.
		case !errors.Is(err, jetstream.ErrKeyExists):
			return registry.Containment{}, false, agentStoreErr("contain agent "+c.Agent, err)
		}
		cur, ok, err := a.containment(ctx, c.Agent)
		if err != nil {
			return registry.Containment{}, false, err
		}
		if ok {
			return cur, false, nil
		}
		// Released between the two calls: try again.
	}
	return registry.Containment{}, false, fmt.Errorf("contain agent %s: %w: the containment kept changing", c.Agent, registry.ErrUnavailable)
}

// Release deletes the containment kept under agent id, if any, and
// returns it. It fails wrapping registry.ErrUnavailable when the store
// cannot be reached.
func (a *Agents) Release(ctx context.Context, id string) (registry.Containment, bool, error) {
	if !registry.ValidID(id) {
		return registry.Containment{}, false, fmt.Errorf("release agent: %w %q", registry.ErrInvalidID, id)
	}
	key := containKey(id)
	for range releaseAttempts {
		e, err := a.kv.Get(ctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			return registry.Containment{}, false, nil
		case err != nil:
			return registry.Containment{}, false, agentStoreErr("release agent "+id, err)
		}
		c := a.decodeContainment(e)
		err = a.kv.Delete(ctx, key, jetstream.LastRevision(e.Revision()))
		switch {
		case err == nil:
			return c, true, nil
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyExists):
			continue // changed meanwhile: read it again
		}
		return registry.Containment{}, false, agentStoreErr("release agent "+id, err)
	}
	return registry.Containment{}, false, fmt.Errorf("release agent %s: %w: the containment kept changing", id, registry.ErrUnavailable)
}

// containment reads the containment kept under agent id.
func (a *Agents) containment(ctx context.Context, id string) (registry.Containment, bool, error) {
	e, err := a.kv.Get(ctx, containKey(id))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return registry.Containment{}, false, nil
	case err != nil:
		return registry.Containment{}, false, agentStoreErr("read the containment of agent "+id, err)
	}
	return a.decodeContainment(e), true, nil
}

// WatchContainments calls fn with every containment kept, then ready, then
// fn with every change (nil for a release), until ctx is done (returning
// nil) or the watch fails (wrapping registry.ErrUnavailable). After a
// reconnection the watch goes on from the last change it delivered.
func (a *Agents) WatchContainments(ctx context.Context, fn func(id string, c *registry.Containment), ready func()) error {
	caughtUp := false
	err := watchKeys(ctx, a.js, a.kv, containKeys, 0, a.log, "agent store: containments", func(e jetstream.KeyValueEntry) {
		if e == nil {
			if !caughtUp {
				caughtUp = true
				ready()
			}
			return
		}
		id, ok := containIDFromKey(e.Key())
		if !ok {
			a.log.Warn("agent store: key is not a containment's; ignored", "key", e.Key(), "revision", e.Revision())
			return
		}
		if e.Operation() == jetstream.KeyValueDelete || e.Operation() == jetstream.KeyValuePurge {
			fn(id, nil)
			return
		}
		c := a.decodeContainment(e)
		fn(id, &c)
	})
	if err != nil {
		return agentStoreErr("watch containments", err)
	}
	return nil
}

// decodeContainment reads one stored containment, logging why when it
// cannot. One that cannot be read still holds its agent contained, with
// the reason that it cannot be read.
func (a *Agents) decodeContainment(e jetstream.KeyValueEntry) registry.Containment {
	id, _ := containIDFromKey(e.Key())
	var c registry.Containment
	err := json.Unmarshal(e.Value(), &c)
	switch {
	case len(e.Value()) > maxContainmentBytes:
		err = fmt.Errorf("%d bytes, over the limit of %d", len(e.Value()), maxContainmentBytes)
	case err == nil && c.Agent != id:
		err = fmt.Errorf("it names agent %q", c.Agent)
	}
	if err != nil {
		a.log.Warn("agent store: stored containment cannot be read; the agent stays contained", "agent", id, "revision", e.Revision(), "error", err)
		return registry.Containment{Agent: id, Reason: "its stored containment cannot be read", By: "unknown", At: e.Created()}
	}
	return c
}

// containKey maps an agent id to its containment's key.
func containKey(id string) string { return idKey(containKeyPrefix, id) }

// containIDFromKey maps a containment's key back to its agent's id,
// reporting false for a key no valid id maps to.
func containIDFromKey(key string) (string, bool) { return idFromKey(containKeyPrefix, key) }
