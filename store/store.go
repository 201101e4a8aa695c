package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/atomicfile"
)

// Store is orchd's connection to its state: an embedded NATS server and
// the in-process client to it, or a client of an external cluster. Its
// methods are safe for concurrent use.
type Store struct {
	cfg Config
	log *slog.Logger
	// natsDir is where the embedded server stores ("" for an external
	// cluster).
	natsDir string
	srv     *server.Server
	nc      *nats.Conn
	js      jetstream.JetStream

	// done is closed by Close, to stop background work, and bg ends with
	// it, to stop that work's calls; wg waits for it.
	done      chan struct{}
	bg        context.Context
	stopBG    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	// manifestMu serializes writes of the stream manifest; opened says
	// Open succeeded, so Close may record the streams (never those of a
	// store Open refused).
	manifestMu sync.Mutex
	opened     bool
	// fresh says the embedded server's directory held no stream when
	// Open started it.
	fresh bool

	// writes is the current period of the store's writes (health.go):
	// failed once a write fails at the disk. writeErrors counts those
	// failures; wakeRecovery wakes the recovery. srvLog and srvOpts are
	// the embedded server's logger and options, for restarting JetStream.
	writes       atomic.Pointer[writeState]
	writeErrors  atomic.Int64
	wakeRecovery chan struct{}
	srvLog       *serverLogger
	srvOpts      *server.Options
	// quickRefused says records of delegations answered at once are
	// written before their answer, not queued (quick.go): set while Ready
	// last failed, and from a queued write that failed until a write
	// before an answer succeeds.
	quickRefused atomic.Bool
	// fence refuses writes while the connection is down, and after a
	// reconnect until the lease is renewed (presence.go).
	fence fence
}

// Layout of the embedded server's directory, dir/nats.
const (
	// formatFile marks a directory orchd made: it holds formatLine.
	formatFile = "FORMAT"
	formatLine = "orchd-store 1\n"
	// manifestFile lists the streams orchd created there, one a line, so
	// a stream that vanished from the disk is noticed.
	manifestFile = "STREAMS"
	// damagedFile records damage Open found. The server drops what it
	// cannot read as it recovers, so the next start would find nothing
	// amiss: while this file exists Open refuses the store.
	damagedFile = "DAMAGED"
	// streamsDir is where the server keeps the streams of its (only,
	// global) account, under the directory it is given.
	streamsDir = "jetstream/$G/streams"
)

// readyWithin bounds how long the embedded server may take to start
// (recovering a large store included) when ctx has no deadline.
const readyWithin = 2 * time.Minute

// Open opens orchd's state store. With cfg.URL empty it starts a NATS
// server with JetStream in this process, storing under dir/nats (dir must
// not be empty), with no network port unless cfg.Listen gives one.
// Otherwise it connects to the cluster at cfg.URL, reconnecting forever
// when the connection drops; dir is not used.
//
// The embedded server takes no lock on its directory, and two servers on
// one directory corrupt it: the caller must hold the state directory's
// lock for as long as the Store is open (the daemon does).
//
// Open refuses a directory it cannot trust rather than start empty: one
// holding files orchd did not write, one of an unknown format, and one
// the server reports as damaged or where a stream orchd created did not
// load. The error names the path and the problem; nothing is removed.
// An unreachable cluster is an error wrapping delegation.ErrUnavailable.
// log receives the server's and the connection's messages; nil discards
// them.
func Open(ctx context.Context, dir string, cfg Config, log *slog.Logger) (*Store, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{cfg: cfg, log: log, done: make(chan struct{}), wakeRecovery: make(chan struct{}, 1)}
	s.writes.Store(newWriteState())
	s.bg, s.stopBG = context.WithCancel(context.Background())
	var err error
	if cfg.URL == "" {
		err = s.startEmbedded(ctx, dir)
	} else {
		err = s.connect(ctx)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	s.opened = true
	return s, nil
}

// JetStream returns the JetStream client, for the parts of orchd that keep
// their own buckets and streams. Names there start with the namespace.
func (s *Store) JetStream() jetstream.JetStream { return s.js }

// Config returns the configuration in use, defaults filled in.
func (s *Store) Config() Config { return s.cfg }

// Ping checks the store answers: nil, or an error wrapping
// delegation.ErrUnavailable. Ready says whether it can take work.
func (s *Store) Ping(ctx context.Context) error {
	octx, cancel := s.opContext(ctx)
	defer cancel()
	if _, err := s.js.AccountInfo(octx); err != nil {
		return fmt.Errorf("ping state store: %w", s.unavailable(ctx, err))
	}
	return nil
}

// Close stops background work, closes the connection and shuts the
// embedded server down, waiting until it has, then records what the
// server left on disk (inventory.go). It is safe to call more than once;
// calls on the Store's parts afterwards fail with
// delegation.ErrUnavailable.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		close(s.done)
		s.stopBG()
		s.wg.Wait()
		record := s.srv != nil && s.opened
		var seqs map[string]uint64
		if record {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.Timeout)
			if err := s.writeManifest(ctx); err != nil {
				s.log.Warn("state store: record streams", "err", err)
			}
			var err error
			if seqs, err = s.streamSequences(ctx); err != nil {
				s.log.Warn("state store: read the streams' sequences", "err", err)
			}
			cancel()
		}
		if s.nc != nil {
			s.nc.Close()
		}
		if s.srv != nil {
			s.srv.Shutdown()
			s.srv.WaitForShutdown()
			s.log.Info("state store stopped", "dir", s.natsDir)
		}
		if record {
			s.recordStop(seqs)
		}
	})
	return s.closeErr
}

// recordStop writes the records of a graceful stop: the streams'
// sequences, read before the server shut down, and the message blocks it
// left. A store that cannot write them starts next as after a crash.
func (s *Store) recordStop(seqs map[string]uint64) {
	if seqs != nil {
		if err := writeSequences(s.natsDir, seqs); err != nil {
			s.log.Warn("state store: record the streams' sequences", "err", err)
		}
	}
	if err := recordStopped(s.natsDir); err != nil {
		s.log.Warn("state store: record the message blocks", "err", err)
	}
}

// inherit fills the settings of a bucket a consumer opens that its config
// left zero with the Store's: the bucket's name (the namespace and
// suffix), replicas, retention and operation timeout.
func (s *Store) inherit(bucket *string, suffix string, replicas *int, retention, timeout *time.Duration) {
	if *bucket == "" {
		*bucket = s.cfg.Namespace + suffix
	}
	if *replicas == 0 {
		*replicas = s.cfg.Replicas
	}
	if *retention == 0 {
		*retention = s.cfg.Retention
	}
	if *timeout == 0 {
		*timeout = s.cfg.Timeout
	}
}

// opContext bounds one store operation by the configured timeout.
func (s *Store) opContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.Timeout)
}

// unavailable wraps err in delegation.ErrUnavailable when it says the
// store is unreachable, not answering or full (see the package function),
// and when the Store is closed; an operation that ended as writes failed
// at the disk returns why (writeFailure).
func (s *Store) unavailable(ctx context.Context, err error) error {
	if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		if f := s.writeFailure(); f != nil {
			return f // a write cancelled as the store failed (writeContext)
		}
	}
	err = unavailable(ctx, err)
	if err != nil && !errors.Is(err, delegation.ErrUnavailable) && s.closed() {
		err = fmt.Errorf("%w: store closed: %w", delegation.ErrUnavailable, err)
	}
	return err
}

func (s *Store) closed() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// connOptions are the client options common to both modes: reconnect
// forever with a capped, jittered backoff, and report the connection's
// life through the logger (nats.go writes nothing itself).
func (s *Store) connOptions() []nats.Option {
	return []nats.Option{
		nats.Name("orchd " + s.cfg.Namespace),
		nats.Timeout(s.cfg.Timeout),
		nats.MaxReconnects(-1),
		nats.CustomReconnectDelay(reconnectDelay),
		nats.PingInterval(5 * time.Second),
		nats.MaxPingsOutstanding(3),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if !s.closed() {
				s.log.Warn("state store disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			s.log.Info("state store reconnected", "server", nc.ConnectedUrlRedacted())
			s.noteReconnect()
		}),
		nats.ClosedHandler(func(*nats.Conn) { s.log.Debug("state store connection closed") }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			s.log.Warn("state store client error", "subject", subject, "err", err)
		}),
	}
}

// reconnectDelay backs off from 100ms to 5s, with up to 25% jitter so a
// fleet does not reconnect in step.
func reconnectDelay(attempts int) time.Duration {
	d := 100 * time.Millisecond << min(max(attempts-1, 0), 6)
	d = min(d, 5*time.Second)
	return d + rand.N(d/4+1)
}

// connect connects to the external cluster at cfg.URL and checks it runs
// JetStream.
func (s *Store) connect(ctx context.Context) error {
	opts := s.connOptions()
	if s.cfg.Credentials != "" {
		opts = append(opts, nats.UserCredentials(s.cfg.Credentials))
	}
	if s.cfg.NKeySeedFile != "" {
		o, err := nats.NkeyOptionFromSeed(s.cfg.NKeySeedFile)
		if err != nil {
			return fmt.Errorf("store.nkeySeedFile %s: %w", s.cfg.NKeySeedFile, err)
		}
		opts = append(opts, o)
	}
	if s.cfg.TLS.CA != "" {
		opts = append(opts, nats.RootCAs(s.cfg.TLS.CA))
	}
	if s.cfg.TLS.Cert != "" {
		opts = append(opts, nats.ClientCert(s.cfg.TLS.Cert, s.cfg.TLS.Key))
	}
	nc, err := nats.Connect(s.cfg.URL, opts...)
	if err != nil {
		return fmt.Errorf("connect to state store %s: %w", redactURL(s.cfg.URL), unavailable(ctx, err))
	}
	s.nc = nc
	if err := s.newJetStream(); err != nil {
		return err
	}
	if err := s.firstPing(ctx); err != nil {
		return fmt.Errorf("state store %s: %w", redactURL(s.cfg.URL), err)
	}
	s.log.Info("state store connected", "server", nc.ConnectedUrlRedacted(), "namespace", s.cfg.Namespace, "replicas", s.cfg.Replicas)
	return nil
}

// connectPatience is how long Open waits for an external cluster that
// does not answer in time: one electing a leader (after a restart, or
// starved of CPU) answers nothing for seconds, and a daemon starting then
// should wait for it rather than fail; so should one whose JetStream says
// it is temporarily unavailable (503), as a cluster getting its quorum
// back does. A server that refuses, or answers with another error, fails
// at once.
const connectPatience = 30 * time.Second

// firstPing pings the store until it answers, for up to connectPatience
// while each ping times out or JetStream is temporarily unavailable.
func (s *Store) firstPing(ctx context.Context) error {
	deadline := time.Now().Add(connectPatience)
	for {
		err := s.Ping(ctx)
		var apiErr *jetstream.APIError
		recovering := errors.As(err, &apiErr) && apiErr.Code == 503
		if err == nil || ctx.Err() != nil || !(recovering || errors.Is(err, context.DeadlineExceeded)) || time.Now().After(deadline) {
			return err
		}
		s.log.Warn("state store not ready; trying again", "timeout", s.cfg.Timeout, "error", err)
		if recovering {
			// It answered at once: wait a little before asking again.
			t := time.NewTimer(250 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return err
			case <-t.C:
			}
		}
	}
}

func (s *Store) newJetStream() error {
	// An acknowledgement of a write sent without waiting (PutEnded) that
	// never comes is given up after the timeout, as a waited one is.
	js, err := jetstream.New(s.nc, jetstream.WithDefaultTimeout(s.cfg.Timeout), jetstream.WithPublishAsyncTimeout(s.cfg.Timeout))
	if err != nil {
		return fmt.Errorf("state store jetstream: %w", err)
	}
	s.js = js
	return nil
}

// redactURL drops user information from the URLs for messages.
func redactURL(urls string) string {
	var out []string
	for u := range strings.SplitSeq(urls, ",") {
		u = strings.TrimSpace(u)
		if at := strings.LastIndex(u, "@"); at >= 0 {
			if i := strings.Index(u, "://"); i >= 0 && i < at {
				u = u[:i+3] + "***" + u[at:]
			}
		}
		out = append(out, u)
	}
	return strings.Join(out, ",")
}

// startEmbedded checks dir/nats, starts the server on it, connects in
// process and checks what the server recovered.
func (s *Store) startEmbedded(ctx context.Context, dir string) error {
	if dir == "" {
		return errors.New("state store: the embedded NATS server needs a state directory (stateDir), or give store.url")
	}
	s.natsDir = filepath.Join(dir, "nats")
	if err := checkFormat(s.natsDir); err != nil {
		return err
	}
	onDisk, err := streamDirs(s.natsDir)
	if err != nil {
		return err
	}
	listed, err := readManifest(s.natsDir)
	if err != nil {
		return err
	}
	damaged := filepath.Join(s.natsDir, damagedFile)
	if b, err := os.ReadFile(damaged); err == nil {
		return fmt.Errorf("state store %s was found damaged before, and orchd will not start on it: %s; "+
			"restore the directory from a backup, or remove %s to go on with what the NATS server could recover",
			s.natsDir, strings.TrimSpace(string(b)), damaged)
	}
	s.fresh = len(onDisk) == 0 && len(listed) == 0
	os.Remove(filepath.Join(s.natsDir, roomFile)) // left by a check for room cut short
	recorded, err := readSequences(s.natsDir)
	if err != nil {
		return err
	}
	// The blocks a graceful stop left are compared before the server
	// starts, and would drop what it cannot read.
	problems, stopped, err := checkStopped(s.natsDir)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return s.refuseDamaged(problems)
	}
	if stopped {
		if err := removeSynced(filepath.Join(s.natsDir, stoppedFile)); err != nil {
			return fmt.Errorf("state store %s: %w", s.natsDir, err)
		}
	}
	always, interval, _ := parseSync(s.cfg.Sync)
	opts := &server.Options{
		ServerName: s.cfg.Namespace, JetStream: true, StoreDir: s.natsDir,
		JetStreamMaxStore: s.cfg.MaxBytes, JetStreamMaxMemory: embeddedMaxMemory,
		SyncAlways: always, SyncInterval: interval,
		NoSigs: true, DontListen: true, MaxPayload: embeddedMaxPayload,
	}
	if s.cfg.Listen != "" {
		opts.DontListen = false
		opts.Host, opts.Port, _ = parseListen(s.cfg.Listen)
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("state store %s: %w", s.natsDir, err)
	}
	logger := &serverLogger{log: s.log.With("component", "nats"), writeFailed: s.writeFailed}
	logger.recovering.Store(true)
	defer logger.recovering.Store(false)
	srv.SetLogger(logger, s.log.Enabled(ctx, slog.LevelDebug), false)
	s.srv, s.srvLog, s.srvOpts = srv, logger, opts
	started := time.Now()
	srv.Start()
	wait := readyWithin
	if d, ok := ctx.Deadline(); ok {
		wait = time.Until(d)
	}
	if !srv.ReadyForConnections(wait) {
		if f := logger.fatal(); f != "" {
			return fmt.Errorf("state store %s: %s", s.natsDir, f)
		}
		return fmt.Errorf("state store %s: the NATS server was not ready within %s", s.natsDir, wait.Round(time.Millisecond))
	}
	if f := logger.fatal(); f != "" {
		return fmt.Errorf("state store %s: %s", s.natsDir, f)
	}
	if !srv.JetStreamEnabled() {
		return fmt.Errorf("state store %s: JetStream did not start", s.natsDir)
	}
	nc, err := nats.Connect("", append(s.connOptions(), nats.InProcessServer(srv))...)
	if err != nil {
		return fmt.Errorf("state store %s: connect in process: %w", s.natsDir, err)
	}
	s.nc = nc
	if err := s.newJetStream(); err != nil {
		return err
	}
	loaded, err := s.streamNames(ctx)
	if err != nil {
		return fmt.Errorf("state store %s: list streams: %w", s.natsDir, err)
	}
	lost, err := s.checkSequences(ctx, recorded)
	if err != nil {
		return fmt.Errorf("state store %s: %w", s.natsDir, err)
	}
	if problems := s.checkRecovered(onDisk, listed, loaded, append(logger.damage(), lost...)); len(problems) > 0 {
		return s.refuseDamaged(problems)
	}
	if err := s.writeManifest(ctx); err != nil {
		return err
	}
	s.wg.Go(s.watchWrites)
	every := s.cfg.seqEvery
	if every == 0 {
		every = seqEvery(s.cfg.Sync)
	}
	s.wg.Go(func() { s.recordSequences(every) })
	s.log.Info("state store started", "dir", s.natsDir, "streams", len(loaded),
		"took", time.Since(started).Round(time.Millisecond), "sync", s.cfg.Sync, "listen", s.cfg.Listen)
	return nil
}

// refuseDamaged records the damage Open found and returns the refusal.
func (s *Store) refuseDamaged(problems []string) error {
	s.recordDamage(problems)
	return fmt.Errorf("state store %s is damaged, and orchd will not start on it rather than lose state: %s; "+
		"restore the directory from a backup, or move it aside to start empty; to go on with what the NATS "+
		"server could recover, remove %s (and, for a stream deleted on purpose, its line in %s)",
		s.natsDir, strings.Join(problems, "; "), filepath.Join(s.natsDir, damagedFile), filepath.Join(s.natsDir, manifestFile))
}

// recordDamage writes DAMAGED with problems, and removes the records of
// what the store held, which describe what is lost.
func (s *Store) recordDamage(problems []string) {
	report := time.Now().UTC().Format(time.RFC3339) + ": " + strings.Join(problems, "; ") + "\n"
	if err := writeFileAtomic(filepath.Join(s.natsDir, damagedFile), []byte(report)); err != nil {
		s.log.Error("state store: record the damage", "err", err)
		return
	}
	for _, name := range []string{stoppedFile, sequencesFile} {
		if err := os.Remove(filepath.Join(s.natsDir, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.log.Error("state store: remove "+name, "err", err)
		}
	}
}

// checkRecovered lists what the server could not recover: stream
// directories on disk, or streams orchd recorded creating, that did not
// load, and damage the server reported while recovering. At most a few
// are listed, with a count of the rest.
func (s *Store) checkRecovered(onDisk, listed, loaded, damage []string) []string {
	var problems []string
	for _, name := range onDisk {
		if !slices.Contains(loaded, name) {
			problems = append(problems, fmt.Sprintf("stream %s did not load from %s", name, filepath.Join(s.natsDir, streamsDir, name)))
		}
	}
	for _, name := range listed {
		if !slices.Contains(loaded, name) && !slices.Contains(onDisk, name) {
			problems = append(problems, fmt.Sprintf("stream %s, listed in %s, is missing from %s",
				name, filepath.Join(s.natsDir, manifestFile), filepath.Join(s.natsDir, streamsDir)))
		}
	}
	problems = append(problems, damage...)
	const maxShown = 10
	if len(problems) > maxShown {
		problems = append(problems[:maxShown], fmt.Sprintf("and %d more", len(problems)-maxShown))
	}
	return problems
}

// streamNames lists the streams the server holds, sorted.
func (s *Store) streamNames(ctx context.Context) ([]string, error) {
	octx, cancel := s.opContext(ctx)
	defer cancel()
	l := s.js.StreamNames(octx)
	var names []string
	for n := range l.Name() {
		names = append(names, n)
	}
	if err := l.Err(); err != nil {
		return nil, s.unavailable(ctx, err)
	}
	slices.Sort(names)
	return names, nil
}

// writeManifest records the streams the embedded server holds now, in a
// file replaced atomically. An external cluster keeps no manifest.
func (s *Store) writeManifest(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	s.manifestMu.Lock()
	defer s.manifestMu.Unlock()
	names, err := s.streamNames(ctx)
	if err != nil {
		return fmt.Errorf("state store %s: list streams: %w", s.natsDir, err)
	}
	var b bytes.Buffer
	for _, n := range names {
		b.WriteString(n + "\n")
	}
	return writeFileAtomic(filepath.Join(s.natsDir, manifestFile), b.Bytes())
}

// ensureKV creates the bucket, or updates its configuration to cfg, and
// records it in the manifest. It retries while the store is unavailable
// (a cluster's meta layer settling), within ctx and a bound of a few
// timeouts.
func (s *Store) ensureKV(ctx context.Context, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := s.retry(ctx, func(ctx context.Context) (err error) {
		kv, err = openKV(ctx, s.js, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("state store: bucket %s: %w", cfg.Bucket, err)
	}
	return kv, s.recordStreams(ctx)
}

// openKV creates the bucket cfg describes, or updates its configuration
// to cfg, and returns it; a replicated bucket is read from its stream
// leader (see directReads).
func openKV(ctx context.Context, js jetstream.JetStream, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, cfg)
	if err != nil || directReads(cfg.Replicas) {
		return kv, err
	}
	// nats.go makes every bucket's stream allow direct reads, and a
	// bucket reads directly when its stream does as it is bound.
	st, err := js.Stream(ctx, kvStreamPrefix+cfg.Bucket)
	if err != nil {
		return nil, err
	}
	if c := st.CachedInfo().Config; c.AllowDirect {
		c.AllowDirect = false
		if _, err := js.UpdateStream(ctx, c); err != nil {
			return nil, err
		}
	}
	return js.KeyValue(ctx, cfg.Bucket)
}

// kvStreamPrefix is what the name of a bucket's stream starts with.
const kvStreamPrefix = "KV_"

// directReads says whether a stream (or bucket) of this many replicas
// lets any replica answer reads: only when it has one. A direct read is
// answered by whichever replica gets it first, the one nearest the
// client, and a follower may not have applied a write its leader
// acknowledged yet: a record just put, or a lease just taken, would read
// as missing a moment later, from the same process. With direct reads
// off, the stream leader answers every read, and it has applied each
// write it acknowledged. JetStream has no read that waits for a sequence
// yet (nats-server v2.15 defines the error, JSStreamMinLastSeqErr, and
// no request that sets it).
func directReads(replicas int) bool { return replicas <= 1 }

// ensureStream is ensureKV for a stream.
func (s *Store) ensureStream(ctx context.Context, cfg jetstream.StreamConfig) (jetstream.Stream, error) {
	var st jetstream.Stream
	err := s.retry(ctx, func(ctx context.Context) (err error) {
		st, err = s.js.CreateOrUpdateStream(ctx, cfg)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("state store: stream %s: %w", cfg.Name, err)
	}
	return st, s.recordStreams(ctx)
}

// recordStreams updates the manifest after a stream was made.
func (s *Store) recordStreams(ctx context.Context) error {
	if err := s.writeManifest(ctx); err != nil {
		return fmt.Errorf("state store: record streams: %w", err)
	}
	return nil
}

// setupAttempts bounds how long ensureKV and ensureStream retry: this many
// timeouts.
const setupAttempts = 4

// retry runs op, each attempt bounded by the timeout, again while it fails
// with the store unavailable, up to setupAttempts timeouts in all.
func (s *Store) retry(ctx context.Context, op func(context.Context) error) error {
	bctx, cancel := context.WithTimeout(ctx, setupAttempts*s.cfg.Timeout)
	defer cancel()
	delay := 50 * time.Millisecond
	for {
		octx, ocancel := s.opContext(bctx)
		err := s.unavailable(ctx, op(octx))
		ocancel()
		if !errors.Is(err, delegation.ErrUnavailable) || s.closed() {
			return err
		}
		select {
		case <-bctx.Done():
			return err
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

// checkFormat makes dir the embedded server's directory on first use,
// writing the format marker, and refuses a directory that holds files
// but no marker, or a marker of another format.
func checkFormat(dir string) error {
	marker := filepath.Join(dir, formatFile)
	b, err := os.ReadFile(marker)
	switch {
	case err == nil && string(b) == formatLine:
		return nil
	case err == nil:
		return fmt.Errorf("state store %s: %s says %q, not %q: written by another program or a newer orchd; refusing to use it",
			dir, marker, strings.TrimSpace(string(b)), strings.TrimSpace(formatLine))
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("state store %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("state store: %w", err)
		}
	case err != nil:
		return fmt.Errorf("state store %s: %w", dir, err)
	case len(entries) > 0:
		return fmt.Errorf("state store %s holds files but no %s marker, so orchd did not make it; refusing to use it: "+
			"give orchd an empty directory, or move these files aside", dir, formatFile)
	}
	return writeFileAtomic(marker, []byte(formatLine))
}

// streamDirs lists the stream directories in the server's directory:
// those the server should load.
func streamDirs(natsDir string) ([]string, error) {
	entries, err := os.ReadDir(filepath.Join(natsDir, streamsDir))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state store %s: %w", natsDir, err)
	}
	var names []string
	for _, e := range entries {
		// The server removes directories marked with a leading dot: the
		// remains of a deletion.
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// readManifest reads the streams recorded by writeManifest.
func readManifest(natsDir string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(natsDir, manifestFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state store %s: %w", natsDir, err)
	}
	var names []string
	for line := range strings.Lines(string(b)) {
		if n := strings.TrimSpace(line); n != "" {
			names = append(names, n)
		}
	}
	return names, nil
}

// removeSynced removes path, if it exists, and syncs its directory.
func removeSynced(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// writeFileAtomic replaces path with b (atomicfile.Write), naming the
// state store in its error.
func writeFileAtomic(path string, b []byte) error {
	if err := atomicfile.Write(path, b); err != nil {
		return fmt.Errorf("state store: %w", err)
	}
	return nil
}

// serverLogger passes the embedded server's messages to slog: notices and
// debug messages at debug level (the server is chatty when it starts),
// warnings and errors at their own. While the server recovers its store it
// also keeps the warnings that report damage, for Open to refuse the
// store, and the first fatal error, which the server logs instead of
// returning.
type serverLogger struct {
	log        *slog.Logger
	recovering atomic.Bool
	// writeFailed is told of each write the server could not make on
	// disk (health.go).
	writeFailed func(msg string)

	mu       sync.Mutex
	damaged  []string
	fatalMsg string
}

// damageSigns are what the server's recovery warnings say when a stream
// is damaged: its meta file unreadable (the stream is then skipped) or a
// message block corrupt (its messages from there on are dropped). The
// warnings of a recovery after a crash ("stream state outdated, will
// rebuild") are not among them.
var damageSigns = []string{
	"indexcachebuf corrupt",
	"checksums do not match",
	"missing stream metafile",
	"missing stream checksum",
	"error reading metafile",
	"error reading stream metafile",
	"error unmarshalling stream metafile",
	"error recreating stream",
	"error decrypting",
}

// maxDamage bounds the damage warnings kept.
const maxDamage = 20

func (l *serverLogger) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Debugf(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLogger) Tracef(format string, v ...any)  { l.log.Debug(fmt.Sprintf(format, v...)) }

// Errorf logs at error level, and passes on the failed writes the
// server reports: a stream's files refuse every write after one.
func (l *serverLogger) Errorf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error(msg)
	if l.writeFailed != nil && strings.Contains(strings.ToLower(msg), "critical write error") {
		l.writeFailed(msg)
	}
}

// Warnf logs at warning level, or at error level when the warning reports
// damage the server found after it started (reading a block it had not
// read yet): orchd goes on, with what the server could read.
func (l *serverLogger) Warnf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	lower := strings.ToLower(msg)
	if !slices.ContainsFunc(damageSigns, func(sign string) bool { return strings.Contains(lower, sign) }) {
		l.log.Warn(msg)
		return
	}
	if !l.recovering.Load() {
		l.log.Error("state store damaged: " + msg)
		return
	}
	l.log.Warn(msg)
	l.mu.Lock()
	if len(l.damaged) < maxDamage {
		l.damaged = append(l.damaged, "the NATS server reported: "+strings.TrimSpace(msg))
	}
	l.mu.Unlock()
}

// Fatalf logs at error level: the server calls it where it cannot go on,
// and stops starting; it does not exit the process.
func (l *serverLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.log.Error(msg)
	l.mu.Lock()
	if l.fatalMsg == "" {
		l.fatalMsg = msg
	}
	l.mu.Unlock()
}

// startRecovery clears the damage kept and keeps what the server reports
// from now on, until recovering is set false.
func (l *serverLogger) startRecovery() {
	l.mu.Lock()
	l.damaged = nil
	l.mu.Unlock()
	l.recovering.Store(true)
}

func (l *serverLogger) damage() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.damaged)
}

func (l *serverLogger) fatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatalMsg
}
