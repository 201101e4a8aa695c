package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/orchd/orchd/delegation"
)

// Whether the store can take writes.
//
// A write the embedded server cannot make on disk (no space left, an I/O
// error) leaves the stream's files refusing every later write until they
// are opened again, and the server answers none of those writes: each
// would wait for the whole timeout, and a graceful stop with delegations
// writing took several timeouts. The server reports such a failure in its
// log ("critical write error"): from then on the Store fails every write
// at once, cancelling those waiting, and Ready says why. When the disk has
// room again (a file of roomNeeded bytes can be written in the server's
// directory) the Store restarts JetStream in the server, which opens the
// streams' files again; writes go on without a restart of orchd.

// writeState is one period of the store's writes: it begins healthy, and
// failed is done, with the failure as its cause, once a write fails at the
// disk. Recovery starts a new one.
type writeState struct {
	failed context.Context
	fail   context.CancelCauseFunc
}

func newWriteState() *writeState {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &writeState{failed: ctx, fail: cancel}
}

// unavailableError is a reason the store cannot take work, in words an
// operator reads in /readyz; it wraps delegation.ErrUnavailable.
type unavailableError struct {
	msg   string
	cause error
}

func (e *unavailableError) Error() string { return e.msg }

func (e *unavailableError) Unwrap() []error {
	if e.cause == nil {
		return []error{delegation.ErrUnavailable}
	}
	return []error{delegation.ErrUnavailable, e.cause}
}

const (
	// roomNeeded is the room the disk must have before JetStream is
	// restarted after a failed write: the largest message the embedded
	// server takes, so the write that follows fits.
	roomNeeded = embeddedMaxPayload
	// roomCheckEvery is how often a store that cannot write looks for
	// room.
	roomCheckEvery = time.Second
	// roomFile is the file written, and removed, to check for room.
	roomFile = "ROOM.tmp"
)

// writeFailed records that the embedded server could not write msg (its
// log line), fails every write from now on until the store recovers, and
// wakes the recovery.
func (s *Store) writeFailed(msg string) {
	s.writeErrors.Add(1)
	s.writes.Load().fail(&unavailableError{msg: fmt.Sprintf("state store cannot write since %s: %s",
		time.Now().UTC().Format(time.RFC3339), msg)})
	select {
	case s.wakeRecovery <- struct{}{}:
	default:
	}
}

// writeFailure returns why the store cannot write, or nil.
func (s *Store) writeFailure() error {
	w := s.writes.Load()
	if w.failed.Err() == nil {
		return nil
	}
	return context.Cause(w.failed)
}

// writeContext is opContext for a write: it is also cancelled as soon as
// writes fail at the disk, at once when they already have, so the write
// does not wait for an answer the server will not give.
func (s *Store) writeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	octx, cancel := s.opContext(ctx)
	stop := context.AfterFunc(s.writes.Load().failed, cancel)
	return octx, func() {
		stop()
		cancel()
	}
}

// Ready reports whether the store can take work now, for readiness: nil,
// or an error wrapping delegation.ErrUnavailable that says why: writes
// fail at the disk (the embedded server; see writeFailed), the store does
// not answer within ctx and the timeout, or it is full. Full is the
// embedded server holding more than Config.MaxBytes, when it refuses every
// write, or an external cluster's account at its storage limit; a cluster
// whose servers run out of room without an account limit is seen only as
// writes fail.
//
// While it last said the store cannot take work, the records of
// delegations answered at once are written before their answer, not
// queued (quick.go), so a caller is refused rather than answered with a
// record the store would not keep.
func (s *Store) Ready(ctx context.Context) error {
	err := s.ready(ctx)
	s.quickRefused.Store(err != nil)
	return err
}

func (s *Store) ready(ctx context.Context) error {
	if err := s.writeFailure(); err != nil {
		return err
	}
	octx, cancel := s.opContext(ctx)
	defer cancel()
	info, err := s.js.AccountInfo(octx)
	if err != nil {
		return &unavailableError{msg: "state store unavailable: " + err.Error(), cause: err}
	}
	return s.full(info)
}

// full returns an error when the store has no room left: used is the
// store's use, and the limit is Config.MaxBytes for the embedded server
// (which refuses writes once its use is over it) or the account's.
func (s *Store) full(info *jetstream.AccountInfo) error {
	check := func(tier string, used uint64, limit int64, setting string) error {
		if limit <= 0 || used < uint64(limit) {
			return nil
		}
		return &unavailableError{msg: fmt.Sprintf("state store full: %d of %d bytes used%s (%s); "+
			"writes are refused until ended delegations and tasks expire (store.retention) or the limit is raised",
			used, limit, tier, setting)}
	}
	if s.srv != nil {
		return check("", info.Store, s.cfg.MaxBytes, "store.maxBytes")
	}
	if err := check("", info.Store, info.Limits.MaxStore, "the account's limit"); err != nil {
		return err
	}
	for name, t := range info.Tiers {
		if err := check(" in tier "+name, t.Store, t.Limits.MaxStore, "the account's limit"); err != nil {
			return err
		}
	}
	return nil
}

// watchWrites runs while the embedded store is open: each time writes
// fail, it waits for room and restarts JetStream.
func (s *Store) watchWrites() {
	for {
		select {
		case <-s.done:
			return
		case <-s.wakeRecovery:
		}
		s.recoverWrites()
	}
}

// recoverWrites restarts JetStream once the disk has room, checking every
// roomCheckEvery, until writes work again or the store closes. A restart
// that finds damage leaves the store failing, with the damage recorded
// for the next start.
func (s *Store) recoverWrites() {
	cause := s.writeFailure()
	if cause == nil {
		return
	}
	since := time.Now()
	s.log.Error("state store cannot write; orchd is not ready, and restarts JetStream once the disk has room", "err", cause)
	t := time.NewTicker(roomCheckEvery)
	defer t.Stop()
	var lastErr string
	for {
		err := hasRoom(s.natsDir, roomNeeded)
		if err == nil {
			var damaged bool
			damaged, err = s.restartJetStream()
			if damaged {
				return
			}
		}
		if err == nil {
			s.log.Info("state store writes again", "after", time.Since(since).Round(time.Millisecond))
			return
		}
		if err.Error() != lastErr {
			s.log.Warn("state store still cannot write", "err", err)
			lastErr = err.Error()
		}
		select {
		case <-s.done:
			return
		case <-t.C:
		}
	}
}

// restartJetStream stops JetStream in the embedded server and starts it
// again on the same directory, and checks every stream loaded again, as
// Open does. Writes work again unless a write failed meanwhile. damaged
// says the restart found damage: it is recorded, and the store goes on
// failing its writes.
func (s *Store) restartJetStream() (damaged bool, err error) {
	ctx, cancel := context.WithTimeout(s.bg, s.cfg.Timeout)
	defer cancel()
	failures := s.writeErrors.Load()
	onDisk, err := streamDirs(s.natsDir)
	if err != nil {
		return false, err
	}
	listed, err := readManifest(s.natsDir)
	if err != nil {
		return false, err
	}
	s.srvLog.startRecovery()
	defer s.srvLog.recovering.Store(false)
	if err := s.srv.ShutdownJetStream(); err != nil {
		return false, fmt.Errorf("stop JetStream: %w", err)
	}
	o := s.srvOpts
	if err := s.srv.EnableJetStream(&server.JetStreamConfig{StoreDir: o.StoreDir, SyncInterval: o.SyncInterval,
		SyncAlways: o.SyncAlways, Strict: !o.NoJetStreamStrict, MaxMemory: o.JetStreamMaxMemory,
		MaxStore: o.JetStreamMaxStore, CompressOK: true}); err != nil {
		return false, fmt.Errorf("start JetStream again: %w", err)
	}
	loaded, err := s.streamNames(ctx)
	if err != nil {
		return false, fmt.Errorf("list streams after restarting JetStream: %w", err)
	}
	if problems := s.checkRecovered(onDisk, listed, loaded, s.srvLog.damage()); len(problems) > 0 {
		s.recordDamage(problems)
		msg := "state store damaged, found as JetStream started again after failed writes: " + strings.Join(problems, "; ") +
			"; orchd takes no more writes, and will not start on it again as it is"
		damaged := newWriteState()
		damaged.fail(&unavailableError{msg: msg})
		s.writes.Store(damaged)
		s.log.Error(msg)
		return true, nil
	}
	next := newWriteState()
	s.writes.Store(next)
	if s.writeErrors.Load() != failures {
		// A write failed while JetStream restarted: the disk is full again.
		next.fail(&unavailableError{msg: "state store cannot write: a write failed again as JetStream restarted"})
		return false, errors.New("a write failed again as JetStream restarted")
	}
	return false, nil
}

// hasRoom checks that n bytes can be written to a file in dir, and synced,
// removing the file again.
func hasRoom(dir string, n int) error {
	path := filepath.Join(dir, roomFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("check for room: %w", err)
	}
	defer os.Remove(path)
	chunk := make([]byte, 1<<20)
	for written := 0; written < n && err == nil; written += len(chunk) {
		_, err = f.Write(chunk[:min(len(chunk), n-written)])
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("check for room: no room for %d bytes in %s: %w", n, dir, err)
	}
	return nil
}
