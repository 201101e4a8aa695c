package store

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"

	"github.com/orchd/orchd/delegation"
)

// directBatch is how many subjects one batched direct read names: the
// most results the server sends for one.
const directBatch = 1024

// ReadMany implements delegation.ManyReader with JetStream's batched
// direct reads: one request asks a stream for the last message on each
// of up to directBatch subjects, and the server sends them one after the
// other, then the end of the batch. The records are read so, then the
// last events of their logs: two round trips for a thousand delegations,
// where Get and Events take two each. When the event stream takes no
// direct reads (it is replicated), Read.Last is left nil and the engine
// reads each log itself. A record or an event that cannot be read is
// left out, for the engine's own read to report.
func (d *Delegations) ReadMany(ctx context.Context, ids []string) (map[string]delegation.Read, error) {
	idOf := make(map[string]string, len(ids)) // by key
	for _, id := range ids {
		if key, err := delegationKey(id); err == nil {
			idOf[key] = id
		}
	}
	octx, cancel := d.s.opContext(ctx)
	defer cancel()
	if err := d.quick.settleAll(octx); err != nil {
		return nil, fmt.Errorf("read %d delegations: %w", len(ids), d.s.unavailable(ctx, err))
	}
	out := make(map[string]delegation.Read, len(idOf))
	err := d.readLast(octx, d.recordStream, d.recordPf, slices.Collect(maps.Keys(idOf)), func(key string, data []byte) {
		var r delegation.Record
		if json.Unmarshal(data, &r) == nil {
			out[idOf[key]] = delegation.Read{Record: r}
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read %d delegations: %w", len(ids), d.s.unavailable(ctx, err))
	}
	info := d.events.CachedInfo()
	if info == nil || !info.Config.AllowDirect {
		return out, nil
	}
	var keys []string
	for key, id := range idOf {
		if _, ok := out[id]; ok {
			keys = append(keys, key)
		}
	}
	err = d.readLast(octx, info.Config.Name, d.eventsPf, keys, func(key string, data []byte) {
		var ev delegation.Event
		if json.Unmarshal(data, &ev) == nil {
			r := out[idOf[key]]
			r.Last = &ev
			out[idOf[key]] = r
		}
	})
	if err != nil {
		return nil, fmt.Errorf("read the logs of %d delegations: %w", len(keys), d.s.unavailable(ctx, err))
	}
	return out, nil
}

// readLast reads the last message on the subject prefix+key of stream,
// for each of keys, directBatch at a time, and passes each one that holds
// a value to found with its key: a subject with no message, or whose last
// is a deletion or the marker of one that expired (they have no body), is
// skipped.
func (d *Delegations) readLast(ctx context.Context, stream, prefix string, keys []string, found func(key string, data []byte)) error {
	for chunk := range slices.Chunk(keys, directBatch) {
		subjects := make([]string, len(chunk))
		for i, key := range chunk {
			subjects[i] = prefix + key
		}
		req, err := json.Marshal(struct {
			MultiLast []string `json:"multi_last"`
		}{subjects})
		if err != nil {
			return err
		}
		if err := d.directRead(ctx, stream, req, func(m *nats.Msg) {
			subject := m.Header.Get(nats.JSSubject)
			if len(m.Data) == 0 || !strings.HasPrefix(subject, prefix) {
				return // a deletion, or the marker of a message that expired
			}
			found(strings.TrimPrefix(subject, prefix), m.Data)
		}); err != nil {
			return err
		}
	}
	return nil
}

// directRead sends the batched direct read req to stream and passes
// each message of the answer to each, until the end of the batch.
func (d *Delegations) directRead(ctx context.Context, stream string, req []byte, each func(*nats.Msg)) error {
	inbox := d.s.nc.NewRespInbox()
	sub, err := d.s.nc.SubscribeSync(inbox)
	if err != nil {
		return err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := d.s.nc.PublishRequest("$JS.API.DIRECT.GET."+stream, inbox, req); err != nil {
		return err
	}
	for {
		m, err := sub.NextMsgWithContext(ctx)
		if err != nil {
			return err
		}
		switch status := m.Header.Get("Status"); status {
		case "":
			each(m)
		case "204", "404": // the end of the batch; no subject holds a message
			return nil
		case "503":
			return fmt.Errorf("stream %s takes no direct reads: %w", stream, nats.ErrNoResponders)
		default:
			return fmt.Errorf("stream %s answered a batched read with %s %s", stream, status, m.Header.Get("Description"))
		}
	}
}

var _ delegation.ManyReader = (*Delegations)(nil)
