package store

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/delegation"
)

// DelegationsConfig tunes the delegation records and event logs.
type DelegationsConfig struct {
	// Retention is how long an ended delegation's record, and every
	// event, is kept; whole seconds, at least 1s. 0 means the store's
	// Config.Retention.
	Retention time.Duration
	// MaxEvents bounds each delegation's event log, which keeps its
	// latest events. 0 means delegation.DefaultMaxEvents.
	MaxEvents int
	// ScanLimit bounds how many index entries one List call reads before
	// it returns what it found with a token to go on. 0 means
	// DefaultScanLimit.
	ScanLimit int
	// Hints bounds how many running delegations this process remembers
	// its writes of (hints.go): each one's index entry, running mark and
	// log tail. A running delegation remembered so takes one round trip
	// to the server for each event (PutStep); one forgotten takes three
	// to five, as its next write reads what it lacks first. Set it above
	// the delegations the process runs at once; past it, the least
	// recently written is forgotten first. Up to 4,096 delegations that
	// ended are remembered apart, so they never push running ones out.
	// 0 means DefaultHints.
	Hints int

	// quickBatch, quickQueue and quickQueueBytes replace the bounds of
	// the quick writes (quick.go) when not 0; tests lower them.
	quickBatch, quickQueue, quickQueueBytes int
}

// Bounds and defaults of [DelegationsConfig].
const (
	DefaultScanLimit = 10_000
	MaxScanLimit     = 1_000_000
	MaxEventsLimit   = 1_000_000

	// DefaultHints is DelegationsConfig.Hints and TasksConfig.Hints when
	// not set: twice orchd's default delegation.maxRunning, room for a
	// node's running work and the work it takes over.
	DefaultHints = 40_000
	// MaxHints bounds DelegationsConfig.Hints and TasksConfig.Hints.
	MaxHints = 1_000_000
)

// Delegations keeps delegation records and their event logs in
// JetStream; it implements delegation.Store.
//
// Records are JSON values in the KV bucket <namespace>-delegations, under
// d.<id>. A record in a terminal state is written with a per-message TTL
// of Retention, so it goes on its own that long after it ended (each
// later write restarts the count); a running record has none and stays.
// A running record also has the key r.<id>, removed when it ends, so
// Running reads only those. The stream <namespace>_DELEGATION_INDEX holds
// one message per record, written when the record is first put: List
// reads it backwards, newest first. Its entries whose record is gone are
// deleted in the background. Event logs are described at Append; the
// short log of a delegation that ended as it started is kept in its
// record instead (ended.go). A record is written expecting the revision
// this process wrote last, when it knows it (writeRecord).
//
// Every method bounds its work by the store's Timeout, and an error from
// a store that cannot be reached or is full wraps
// delegation.ErrUnavailable.
type Delegations struct {
	s   *Store
	cfg DelegationsConfig

	kv       jetstream.KeyValue
	index    jetstream.Stream
	events   jetstream.Stream
	recordPf string // subject prefix of the records: $KV.<bucket>.d.
	indexPf  string // <ns>.index.
	eventsPf string // <ns>.events.
	// recordStream is the records bucket's stream, for reads the KV
	// interface lacks (readmany.go): KV_<bucket>.
	recordStream string

	// hints remembers this process's writes (hints.go): the index
	// entries that exist, so a Put of a known record writes none; the
	// last event of logs, so an Append writes without reading first; the
	// revision of each record it wrote, for its next write to expect; and
	// the r. keys it last wrote or removed, so a Put of a record still
	// running rewrites only the record and one of a record that ended
	// and was cleared again (its upstream task named after the end)
	// removes nothing. Only the process that follows a running
	// delegation writes its record, and a key it wrote is removed only by
	// the Put that ends the record (or by Running, for records long
	// ended), so the hint holds while it is kept; one forgotten costs the
	// write it saves.
	hints *writeHints
	// staleAfter is how long after its record ended Running removes a
	// left-over r. key: longer than any Put takes between its writes.
	staleAfter time.Duration
	// quick queues the records of delegations answered at once
	// (quick.go); every read and write of a delegation waits for its
	// queued record first.
	quick *quickWrites
}

// Key prefixes in the records bucket.
const (
	delegationRecordPrefix  = "d."
	delegationRunningPrefix = "r."
)

const (
	// delegationMarkerTTL is how long the bucket keeps the marker of an
	// expired record.
	delegationMarkerTTL = time.Minute
	// runningPurgeTTL is how long the bucket keeps the purge of an r.
	// key: the least it allows, since Running reads every purge still
	// kept (a burst of ended delegations would slow it down).
	runningPurgeTTL = time.Second
	// maxDelegationIDLen bounds a delegation id.
	maxDelegationIDLen = 200
	// eventDedupeWindow is the streams' duplicate window (at most their
	// retention): long enough for a write retried within one operation's
	// timeout, short because the server keeps every message id of the
	// window in memory and replays them at start (some 190 bytes an
	// event). Appends are guarded by the expected last sequence anyway.
	eventDedupeWindow = 10 * time.Second
)

// Delegations sets up the records bucket, the index and the event stream
// (creating them, or updating their limits to cfg), and returns the
// delegation store on them. Call it once per Store: it starts the index's
// clean-up, which stops when the Store closes.
func (s *Store) Delegations(ctx context.Context, cfg DelegationsConfig) (*Delegations, error) {
	if cfg.Retention == 0 {
		cfg.Retention = s.cfg.Retention
	}
	if cfg.MaxEvents == 0 {
		cfg.MaxEvents = delegation.DefaultMaxEvents
	}
	if cfg.ScanLimit == 0 {
		cfg.ScanLimit = DefaultScanLimit
	}
	if cfg.Hints == 0 {
		cfg.Hints = DefaultHints
	}
	switch {
	case cfg.Retention < time.Second || cfg.Retention%time.Second != 0:
		return nil, fmt.Errorf("delegations: retention %s is not a whole number of seconds of at least 1s", cfg.Retention)
	case cfg.MaxEvents < 1 || cfg.MaxEvents > MaxEventsLimit:
		return nil, fmt.Errorf("delegations: maxEvents %d is not between 1 and %d", cfg.MaxEvents, MaxEventsLimit)
	case cfg.ScanLimit < 1 || cfg.ScanLimit > MaxScanLimit:
		return nil, fmt.Errorf("delegations: scanLimit %d is not between 1 and %d", cfg.ScanLimit, MaxScanLimit)
	case cfg.Hints < 1 || cfg.Hints > MaxHints:
		return nil, fmt.Errorf("delegations: hints %d is not between 1 and %d", cfg.Hints, MaxHints)
	}
	ns := s.cfg.Namespace
	d := &Delegations{s: s, cfg: cfg, indexPf: ns + ".index.", eventsPf: ns + ".events.",
		staleAfter: max(time.Minute, 4*s.cfg.Timeout)}
	d.hints = newWriteHints(cfg.Hints)
	bucket := ns + "-delegations"
	d.recordPf = "$KV." + bucket + "." + delegationRecordPrefix
	d.recordStream = "KV_" + bucket
	var err error
	d.kv, err = s.ensureKV(ctx, jetstream.KeyValueConfig{
		Bucket: bucket, Description: "orchd delegation records", History: 1,
		Storage: jetstream.FileStorage, Replicas: s.cfg.Replicas, LimitMarkerTTL: delegationMarkerTTL,
	})
	if err != nil {
		return nil, err
	}
	d.index, err = s.ensureStream(ctx, jetstream.StreamConfig{
		Name: ns + "_DELEGATION_INDEX", Description: "orchd delegations, in the order they were created",
		Subjects: []string{d.indexPf + ">"}, MaxMsgsPerSubject: 1, Discard: jetstream.DiscardOld,
		Storage: jetstream.FileStorage, Replicas: s.cfg.Replicas, AllowDirect: directReads(s.cfg.Replicas), Duplicates: eventDedupeWindow,
	})
	if err != nil {
		return nil, err
	}
	d.events, err = s.ensureStream(ctx, jetstream.StreamConfig{
		Name: ns + "_EVENTS", Description: "orchd delegation event logs",
		Subjects: []string{d.eventsPf + ">"}, MaxAge: cfg.Retention, MaxMsgsPerSubject: int64(cfg.MaxEvents),
		Discard: jetstream.DiscardOld, Storage: jetstream.FileStorage, Replicas: s.cfg.Replicas,
		AllowDirect: directReads(s.cfg.Replicas), Duplicates: min(eventDedupeWindow, cfg.Retention),
	})
	if err != nil {
		return nil, err
	}
	lag, err := parseQuickWriteLag(s.cfg.QuickWriteLag)
	if err != nil {
		return nil, fmt.Errorf("delegations: quickWriteLag %q: %w", s.cfg.QuickWriteLag, err)
	}
	d.quick = newQuickWrites(d, lag)
	if cfg.quickBatch > 0 {
		d.quick.batch = cfg.quickBatch
	}
	if cfg.quickQueue > 0 {
		d.quick.max = cfg.quickQueue
	}
	if cfg.quickQueueBytes > 0 {
		d.quick.maxBytes = cfg.quickQueueBytes
	}
	s.wg.Go(d.sweepLoop)
	if lag > 0 {
		s.wg.Go(func() { d.quick.run(s.done) })
	}
	return d, nil
}

// plainToken reports whether s is letters, digits, - and _ only, and not
// empty: valid as it is in KV keys and subjects. A loop, not a regular
// expression: every store write of a delegation asks, and the expression
// took 1% of orchd's CPU under load.
func plainToken(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return s != ""
}

// delegationKey turns a delegation id into a key token, valid in KV keys and
// subjects: the id itself when it is letters, digits, - and _ (UUIDs
// are), else = and its base64url encoding, which cannot collide with a
// plain id.
func delegationKey(id string) (string, error) {
	switch {
	case id == "":
		return "", errors.New("empty delegation id")
	case len(id) > maxDelegationIDLen:
		return "", fmt.Errorf("delegation id of %d bytes is over %d", len(id), maxDelegationIDLen)
	case plainToken(id):
		return id, nil
	}
	return "=" + base64.RawURLEncoding.EncodeToString([]byte(id)), nil
}

// Put implements delegation.Store. It returns once JetStream acknowledged
// the record. A running record's r. key is written before the record and
// an ended record's removed after it, so a crash in between leaves at
// worst a key Running skips. An ended record that did not run in this
// process is read first, so a log kept in it (ended.go) is kept.
func (d *Delegations) Put(ctx context.Context, r delegation.Record) error {
	key, err := delegationKey(r.ID)
	if err != nil {
		return fmt.Errorf("put delegation: %w: %w", delegation.ErrBadRequest, err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("put delegation %s: %w", r.ID, err)
	}
	if err := d.quick.settle(ctx, key); err != nil {
		return fmt.Errorf("put delegation %s: %w", r.ID, d.s.unavailable(ctx, err))
	}
	octx, cancel := d.s.writeContext(ctx)
	defer cancel()
	if r.State.Terminal() && d.hints.markOf(key) != markWritten {
		// An ended record that did not run here may hold its log (ended.go).
		plain := b
		err := attempt(octx, func() (err error) {
			b, err = d.keepFolded(octx, key, plain)
			return err
		})
		if err != nil {
			return fmt.Errorf("put delegation %s: %w", r.ID, d.s.unavailable(ctx, err))
		}
	}
	if err := attempt(octx, func() error { return d.put(octx, key, r.State.Terminal(), b) }); err != nil {
		return fmt.Errorf("put delegation %s: %w", r.ID, d.s.unavailable(ctx, err))
	}
	return nil
}

// put writes the record's index entry if it has none, then the record
// and its r. key, unless the fence refuses the write (presence.go).
func (d *Delegations) put(ctx context.Context, key string, ended bool, b []byte) error {
	if err := d.s.fenced(); err != nil {
		return err
	}
	created, err := d.ensureIndexed(ctx, key, ended)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	if ended {
		if err := d.writeRecord(ctx, key, placeEnded, b, jetstream.WithMsgTTL(d.cfg.Retention)); err != nil {
			return err
		}
		if created {
			d.hints.setMark(key, markRemoved) // a record that never ran has no r. key
			return nil
		}
		if d.hints.markOf(key) == markRemoved {
			return nil // this one's is gone
		}
		if err := d.kv.Purge(ctx, delegationRunningPrefix+key, jetstream.PurgeTTL(runningPurgeTTL)); err != nil {
			return fmt.Errorf("clear running: %w", err)
		}
		d.hints.setMark(key, markRemoved)
		return nil
	}
	if d.hints.markOf(key) != markWritten {
		if _, err := d.kv.Put(ctx, delegationRunningPrefix+key, nil); err != nil {
			return fmt.Errorf("mark running: %w", err)
		}
		d.hints.setMark(key, markWritten)
	}
	return d.writeRecord(ctx, key, placeRunning, b)
}

// writeRecord writes the record b under key, expecting the revision this
// process last wrote when it knows it (hints.go), and notes the new one;
// p says whether the record ends the delegation.
//
// Why: a write handed to the NATS client while its connection is cut off
// unnoticed (the network gone, the socket still open) is sent once the
// connection comes back, maybe after another replica took the delegation
// over and wrote its record. Expecting the revision, the server refuses
// that stale write, as it refuses a stale event (Append). A write refused
// so, because another process wrote the record since or because an
// earlier write of ours whose answer was lost was kept, is made again
// expecting nothing, once the fence lets it (presence.go): a replica
// whose delegation another took over is fenced by then.
func (d *Delegations) writeRecord(ctx context.Context, key string, p place, b []byte, opts ...jetstream.PublishOpt) error {
	var err error
	for range 2 { // the second expects nothing, unless another write just noted a revision
		m := nats.NewMsg(d.recordPf + key)
		m.Data = b
		known := d.expectRecord(m, key)
		var ack *jetstream.PubAck
		if ack, err = d.s.js.PublishMsg(ctx, m, opts...); err == nil {
			d.hints.setRecord(key, p, ack.Sequence)
			return nil
		}
		if !known || !isWrongLastSequence(err) {
			return err
		}
		d.hints.forgetRecord(key)
		if err := d.s.fenced(); err != nil {
			return err
		}
	}
	return err
}

// expectRecord has m, a write of key's record, expect the revision this
// process wrote last, when it knows it, and says whether it does.
func (d *Delegations) expectRecord(m *nats.Msg, key string) bool {
	rev, ok := d.hints.recordOf(key)
	if ok {
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(rev, 10))
	}
	return ok
}

// ensureIndexed writes the record's index entry unless it exists, and
// says whether it wrote it: the write expects the entry's subject to be
// empty, so only the first of any number of writers, in any process, adds
// one, and the record is new to the store. ended says whether the record
// put is of the delegation's end.
func (d *Delegations) ensureIndexed(ctx context.Context, key string, ended bool) (bool, error) {
	if d.hints.indexed(key) {
		return false, nil
	}
	_, err := d.s.js.Publish(ctx, d.indexPf+key, nil, jetstream.WithExpectLastSequencePerSubject(0))
	if err != nil && !isWrongLastSequence(err) {
		return false, err
	}
	d.hints.setIndexed(key, ended)
	return err == nil, nil
}

// Get implements delegation.Store.
func (d *Delegations) Get(ctx context.Context, id string) (delegation.Record, error) {
	key, err := delegationKey(id)
	if err != nil {
		return delegation.Record{}, fmt.Errorf("delegation %q: %w", id, delegation.ErrNotFound)
	}
	octx, cancel := d.s.opContext(ctx)
	defer cancel()
	if err := d.quick.settle(octx, key); err != nil {
		return delegation.Record{}, fmt.Errorf("get delegation %s: %w", id, d.s.unavailable(ctx, err))
	}
	var r delegation.Record
	err = attempt(octx, func() (err error) {
		r, _, err = d.get(octx, key)
		return err
	})
	if err != nil {
		return delegation.Record{}, fmt.Errorf("get delegation %s: %w", id, d.s.unavailable(ctx, err))
	}
	return r, nil
}

// get reads the record under key, with the time it was written; a
// missing one is delegation.ErrNotFound.
func (d *Delegations) get(ctx context.Context, key string) (delegation.Record, time.Time, error) {
	e, err := d.kv.Get(ctx, delegationRecordPrefix+key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return delegation.Record{}, time.Time{}, delegation.ErrNotFound
	}
	if err != nil {
		return delegation.Record{}, time.Time{}, err
	}
	var r delegation.Record
	if err := json.Unmarshal(e.Value(), &r); err != nil {
		return delegation.Record{}, time.Time{}, fmt.Errorf("record %s is not readable: %w", key, err)
	}
	return r, e.Created(), nil
}

// Running implements delegation.Store: the ids under r., each checked
// against its record. An r. key whose record ended a while ago (a crash
// between the two writes of Put) is removed on the way, conditionally,
// so a Put running the record again at the same moment keeps its key.
func (d *Delegations) Running(ctx context.Context) ([]string, error) {
	octx, cancel := d.s.opContext(ctx)
	defer cancel()
	var ids []string
	err := attempt(octx, func() (err error) {
		ids, err = d.running(octx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("running delegations: %w", d.s.unavailable(ctx, err))
	}
	return ids, nil
}

func (d *Delegations) running(ctx context.Context) ([]string, error) {
	keys, err := listKeys(ctx, d.s.js, d.kv, delegationRunningPrefix+">")
	if err != nil {
		return nil, err
	}
	for i, k := range keys {
		keys[i] = strings.TrimPrefix(k, delegationRunningPrefix)
	}
	ids := make([]string, 0, len(keys))
	var mu sync.Mutex
	var first error
	todo := make(chan string)
	var wg sync.WaitGroup
	for range min(runningCheckers, len(keys)) {
		wg.Go(func() {
			for key := range todo {
				id, running, err := d.checkRunning(ctx, key)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if running {
					ids = append(ids, id)
				}
				mu.Unlock()
			}
		})
	}
	for _, key := range keys {
		todo <- key
	}
	close(todo)
	wg.Wait()
	if first != nil {
		return nil, first
	}
	slices.Sort(ids)
	return ids, nil
}

// MayRun implements delegation.RunningLister: the ids under r., from the
// stream's per-subject state, without reading their records.
func (d *Delegations) MayRun(ctx context.Context) ([]string, error) {
	octx, cancel := d.s.opContext(ctx)
	defer cancel()
	var keys []string
	err := attempt(octx, func() (err error) {
		keys, err = listKeys(octx, d.s.js, d.kv, delegationRunningPrefix+">")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("delegations that may run: %w", d.s.unavailable(ctx, err))
	}
	ids := make([]string, 0, len(keys))
	for _, k := range keys {
		if id, err := delegationID(strings.TrimPrefix(k, delegationRunningPrefix)); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// Ended implements delegation.RunningLister: the delegation's r. key is
// removed as Running removes it, once its record ended a while ago.
func (d *Delegations) Ended(ctx context.Context, id string) error {
	key, err := delegationKey(id)
	if err != nil {
		return nil // never listed
	}
	octx, cancel := d.s.opContext(ctx)
	defer cancel()
	err = attempt(octx, func() error {
		_, _, err := d.checkRunning(octx, key)
		return err
	})
	if err != nil {
		return fmt.Errorf("delegation %s ended: %w", id, d.s.unavailable(ctx, err))
	}
	return nil
}

// runningCheckers bounds how many running keys Running checks against
// their records at once: each check is a round trip to the server, and
// one after the other they made most of a start with thousands running.
const runningCheckers = 32

// checkRunning reads the record of the running key key: its id, and
// whether it still runs. A key whose record ended a while ago is removed,
// conditionally, so a Put running the record again at the same moment
// keeps its key.
func (d *Delegations) checkRunning(ctx context.Context, key string) (id string, running bool, err error) {
	r, written, err := d.get(ctx, key)
	switch {
	case errors.Is(err, delegation.ErrNotFound):
		// A Put between its two writes, or one that failed there.
		return "", false, nil
	case err != nil:
		return "", false, err
	case !r.State.Terminal():
		return r.ID, true, nil
	case time.Since(written) <= d.staleAfter:
		return "", false, nil
	}
	marker, err := d.kv.Get(ctx, delegationRunningPrefix+key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	if err := d.kv.Purge(ctx, delegationRunningPrefix+key, jetstream.LastRevision(marker.Revision()), jetstream.PurgeTTL(runningPurgeTTL)); err != nil && !isWrongLastSequence(err) {
		d.s.log.Debug("state store: clear a stale running key", "delegation", r.ID, "err", err)
	}
	return "", false, nil
}

// delegationIndexEntry is one message of the index: where it is, and the key of
// its record.
type delegationIndexEntry struct {
	seq uint64
	key string
}

// listMaxWindow bounds the index span List reads in one step, and so the
// entries it holds at once.
const listMaxWindow = 1024

// List implements delegation.Store. It reads the index backwards from the
// newest entry (or from where the token left off) in windows of stream
// sequences, reading each window's entries and then their records, newest
// first, skipping records that expired and those of another state. It
// reads at most the config's ScanLimit entries (plus one window), for at
// most half the store's Timeout: when it stops there, the page holds what
// was found, possibly nothing, and NextPageToken goes on from there. Records come newest first by when
// they were first put, which is when the delegation was created.
func (d *Delegations) List(ctx context.Context, q delegation.Query) (delegation.Page, error) {
	size, err := delegationPageSize(q)
	if err != nil {
		return delegation.Page{}, err
	}
	var hi uint64 // exclusive upper bound of what is left to read
	if q.PageToken != "" {
		if hi, err = parseDelegationToken(q.PageToken); err != nil {
			return delegation.Page{}, err
		}
	}
	octx, cancel := d.s.opContext(ctx)
	defer cancel()
	if err := d.quick.settleAll(octx); err != nil {
		return delegation.Page{}, fmt.Errorf("list delegations: %w", d.s.unavailable(ctx, err))
	}
	var p delegation.Page
	err = attempt(octx, func() (err error) {
		p, err = d.list(octx, q, size, hi)
		return err
	})
	if err != nil {
		return delegation.Page{}, fmt.Errorf("list delegations: %w", d.s.unavailable(ctx, err))
	}
	return p, nil
}

// list reads a page of the records q keeps from the index entries below
// hi (all when 0).
func (d *Delegations) list(ctx context.Context, q delegation.Query, size int, hi uint64) (delegation.Page, error) {
	info, err := d.index.Info(ctx)
	if err != nil {
		return delegation.Page{}, err
	}
	if info.State.Msgs == 0 {
		return delegation.Page{}, nil
	}
	first := info.State.FirstSeq
	if hi == 0 || hi > info.State.LastSeq+1 {
		hi = info.State.LastSeq + 1
	}
	base := uint64(max(size, 16))
	window := base
	budget := d.cfg.ScanLimit
	stopAt := time.Now().Add(d.s.cfg.Timeout / 2)
	var p delegation.Page
	for hi > first && budget > 0 && time.Now().Before(stopAt) {
		lo := hi - min(window, hi-first)
		entries, err := d.indexRange(ctx, lo, hi)
		if err != nil {
			return delegation.Page{}, err
		}
		budget -= len(entries) + 1
		if len(entries) == 0 {
			window = min(window*2, listMaxWindow)
			hi = lo
			continue
		}
		window = base
		for i := len(entries) - 1; i >= 0; i-- {
			r, _, err := d.get(ctx, entries[i].key)
			if errors.Is(err, delegation.ErrNotFound) {
				continue
			}
			if err != nil {
				return delegation.Page{}, err
			}
			if !q.Keeps(r) {
				continue
			}
			p.Records = append(p.Records, r)
			if len(p.Records) == size {
				if i > 0 || lo > first {
					p.NextPageToken = formatDelegationToken(entries[i].seq)
				}
				return p, nil
			}
		}
		hi = lo
	}
	if hi > first {
		p.NextPageToken = formatDelegationToken(hi)
	}
	return p, nil
}

// indexRange reads the index entries with sequences in [lo, hi), oldest
// first: each read returns the next entry at or after a sequence, so gaps
// left by deleted entries cost nothing.
func (d *Delegations) indexRange(ctx context.Context, lo, hi uint64) ([]delegationIndexEntry, error) {
	var out []delegationIndexEntry
	for seq := lo; seq < hi; {
		m, err := d.index.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(d.indexPf+">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			break
		}
		if err != nil {
			return nil, err
		}
		if m.Sequence >= hi {
			break
		}
		out = append(out, delegationIndexEntry{seq: m.Sequence, key: strings.TrimPrefix(m.Subject, d.indexPf)})
		seq = m.Sequence + 1
	}
	return out, nil
}

// delegationPageSize checks the query's page size, as delegation.Query documents.
func delegationPageSize(q delegation.Query) (int, error) {
	switch {
	case q.PageSize == 0:
		return delegation.DefaultPageSize, nil
	case q.PageSize < 0 || q.PageSize > delegation.MaxPageSize:
		return 0, fmt.Errorf("%w: pageSize %d is not between 1 and %d", delegation.ErrBadRequest, q.PageSize, delegation.MaxPageSize)
	}
	return q.PageSize, nil
}

// delegationTokenPrefix versions the page token: an index sequence to go on below.
const delegationTokenPrefix = "i1."

func formatDelegationToken(seq uint64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(delegationTokenPrefix + strconv.FormatUint(seq, 10)))
}

func parseDelegationToken(token string) (uint64, error) {
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err == nil {
		if s, ok := strings.CutPrefix(string(b), delegationTokenPrefix); ok {
			if seq, err := strconv.ParseUint(s, 10, 64); err == nil && seq > 0 {
				return seq, nil
			}
		}
	}
	return 0, fmt.Errorf("%w: %w %q", delegation.ErrBadRequest, delegation.ErrBadPageToken, token)
}

// indexSweepBatch bounds the index entries one sweep reads.
const indexSweepBatch = 1000

// sweepLoop deletes index entries whose record is gone, from the oldest
// on, a batch at a time, until the Store closes. Entries younger than the
// retention are never looked at: their records cannot have expired yet.
// Several processes may sweep at once; deletes are idempotent.
func (d *Delegations) sweepLoop() {
	every := min(max(d.cfg.Retention/10, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	var cursor uint64
	for {
		select {
		case <-d.s.done:
			return
		case <-t.C:
		}
		next, err := d.sweep(cursor)
		if err != nil && !d.s.closed() {
			d.s.log.Debug("state store: sweep the delegation index", "err", err)
		}
		cursor = next
	}
}

// sweep reads up to indexSweepBatch index entries from cursor and deletes those
// whose record is gone; it returns where the next sweep starts: after the
// last entry read, or back at the start once it reaches entries younger
// than the retention or the end.
func (d *Delegations) sweep(cursor uint64) (uint64, error) {
	ctx, cancel := context.WithTimeout(d.s.bg, 4*d.s.cfg.Timeout)
	defer cancel()
	for range indexSweepBatch {
		m, err := d.index.GetMsg(ctx, cursor, jetstream.WithGetMsgSubject(d.indexPf+">"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, nil
		}
		if err != nil {
			return cursor, err
		}
		if time.Since(m.Time) < d.cfg.Retention {
			return 0, nil
		}
		_, _, err = d.get(ctx, strings.TrimPrefix(m.Subject, d.indexPf))
		switch {
		case errors.Is(err, delegation.ErrNotFound):
			if err := d.index.DeleteMsg(ctx, m.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
				return m.Sequence, err
			}
		case err != nil:
			return m.Sequence, err
		}
		cursor = m.Sequence + 1
	}
	return cursor, nil
}

var (
	_ delegation.Store         = (*Delegations)(nil)
	_ delegation.RunningLister = (*Delegations)(nil)
)
