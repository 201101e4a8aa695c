package store

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/orchd/orchd/internal/limitedfile"
)

// What the embedded store held, recorded so that a start notices what
// went missing.
//
// nats-server takes a message block that was cut short or removed for
// what a crash leaves, and starts with what it can read, warning only:
// records, an event log or the index of delegations would be gone with no
// refusal. Two records let Open tell:
//
//   - STOPPED, written at a graceful stop once the server has shut down,
//     lists every stream's message blocks and their sizes. Nothing
//     changes them until the next start, so Open, before it starts the
//     server, refuses a store whose blocks are missing or of another
//     size, and then removes the file (the server rewrites blocks as it
//     runs). It is written only while orchd's own last write of STREAMS
//     is the latest, so a start of another program on the directory in
//     between (an older orchd, which keeps no such record) voids it.
//   - SEQUENCES holds each stream's last sequence: at a graceful stop,
//     and while orchd runs, every seqEvery, the one seen a period before
//     (by then the server has synced it to disk, so a power loss does
//     not take a recorded message). A stream's last sequence never goes
//     back, while messages expire, so Open refuses a stream that ends
//     before its recorded sequence: after a crash (no STOPPED) this
//     notices the end of a stream cut off.
//
// Damage found is recorded in DAMAGED, and both records removed: they
// describe what is lost, and an operator who accepts the loss (removes
// DAMAGED) starts on what the server recovered.
const (
	stoppedFile   = "STOPPED"
	stoppedHeader = "orchd-stopped 1"
	sequencesFile = "SEQUENCES"
	// blockSuffix ends the name of a stream's message block in its msgs
	// directory.
	blockSuffix = ".blk"
)

// block is one message block and its size.
type block struct {
	path string // relative to the streams directory
	size int64
}

// messageBlocks lists the message blocks of every stream under natsDir,
// sorted.
func messageBlocks(natsDir string) ([]block, error) {
	root := filepath.Join(natsDir, streamsDir)
	var out []block
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && path == root {
				return filepath.SkipAll
			}
			return err
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), blockSuffix) || filepath.Base(filepath.Dir(path)) != "msgs" {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		out = append(out, block{path: rel, size: info.Size()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("state store %s: list message blocks: %w", natsDir, err)
	}
	slices.SortFunc(out, func(a, b block) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

// manifestStamp is the modification time of the manifest, which every
// orchd rewrites as it starts.
func manifestStamp(natsDir string) (int64, error) {
	info, err := os.Stat(filepath.Join(natsDir, manifestFile))
	if err != nil {
		return 0, err
	}
	return info.ModTime().UnixNano(), nil
}

// recordStopped writes STOPPED: the message blocks as the stopped server
// left them.
func recordStopped(natsDir string) error {
	blocks, err := messageBlocks(natsDir)
	if err != nil {
		return err
	}
	stamp, err := manifestStamp(natsDir)
	if err != nil {
		return fmt.Errorf("state store %s: %w", natsDir, err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\nmanifest %d\n", stoppedHeader, stamp)
	for _, bl := range blocks {
		fmt.Fprintf(&b, "%d\t%s\n", bl.size, filepath.ToSlash(bl.path))
	}
	return writeFileAtomic(filepath.Join(natsDir, stoppedFile), b.Bytes())
}

// checkStopped compares the message blocks with STOPPED, if there is
// one, and returns what is missing or changed. found says there was a
// record to compare with: one voided by another program's start is not.
func checkStopped(natsDir string) (problems []string, found bool, err error) {
	path := filepath.Join(natsDir, stoppedFile)
	b, err := limitedfile.Read(path, maxRecordBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("state store %s: %w", natsDir, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	var stamp int64
	if !sc.Scan() || sc.Text() != stoppedHeader || !sc.Scan() {
		return nil, false, fmt.Errorf("state store %s: %s is not a record orchd wrote; remove it to go on", natsDir, path)
	}
	if _, err := fmt.Sscanf(sc.Text(), "manifest %d", &stamp); err != nil {
		return nil, false, fmt.Errorf("state store %s: %s: %w", natsDir, path, err)
	}
	if now, err := manifestStamp(natsDir); err != nil || now != stamp {
		return nil, false, nil //nolint:nilerr // unreadable or changed: something else started on the store since
	}
	blocks, err := messageBlocks(natsDir)
	if err != nil {
		return nil, true, err
	}
	sizes := make(map[string]int64, len(blocks))
	for _, bl := range blocks {
		sizes[filepath.ToSlash(bl.path)] = bl.size
	}
	root := filepath.Join(natsDir, streamsDir)
	for sc.Scan() {
		sizeText, rel, ok := strings.Cut(sc.Text(), "\t")
		size, err := strconv.ParseInt(sizeText, 10, 64)
		if !ok || err != nil {
			return nil, true, fmt.Errorf("state store %s: %s: bad line %q; remove it to go on", natsDir, path, sc.Text())
		}
		full := filepath.Join(root, filepath.FromSlash(rel))
		switch now, there := sizes[rel]; {
		case !there:
			problems = append(problems, fmt.Sprintf("message block %s is missing (%d bytes when orchd stopped)", full, size))
		case now != size:
			problems = append(problems, fmt.Sprintf("message block %s holds %d bytes, %d when orchd stopped", full, now, size))
		}
	}
	if err := sc.Err(); err != nil {
		return nil, true, fmt.Errorf("state store %s: %s: %w", natsDir, path, err)
	}
	return problems, true, nil
}

// streamSequences returns the last sequence of every stream the server
// holds.
func (s *Store) streamSequences(ctx context.Context) (map[string]uint64, error) {
	names, err := s.streamNames(ctx)
	if err != nil {
		return nil, err
	}
	seqs := make(map[string]uint64, len(names))
	for _, name := range names {
		octx, cancel := s.opContext(ctx)
		st, err := s.js.Stream(octx, name)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("stream %s: %w", name, s.unavailable(ctx, err))
		}
		seqs[name] = st.CachedInfo().State.LastSeq
	}
	return seqs, nil
}

// writeSequences records seqs in SEQUENCES.
func writeSequences(natsDir string, seqs map[string]uint64) error {
	var b bytes.Buffer
	for _, name := range slices.Sorted(maps.Keys(seqs)) {
		fmt.Fprintf(&b, "%s %d\n", name, seqs[name])
	}
	return writeFileAtomic(filepath.Join(natsDir, sequencesFile), b.Bytes())
}

// readSequences reads SEQUENCES; none is an empty record.
func readSequences(natsDir string) (map[string]uint64, error) {
	path := filepath.Join(natsDir, sequencesFile)
	b, err := limitedfile.Read(path, maxRecordBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("state store %s: %w", natsDir, err)
	}
	seqs, err := parseSequences(b)
	if err != nil {
		return nil, fmt.Errorf("state store %s: %s: %w; remove it to go on", natsDir, path, err)
	}
	return seqs, nil
}

// maxRecordBytes bounds STOPPED and SEQUENCES as they are read: far more
// than the lines of every block of a full store.
const maxRecordBytes = 16 << 20

// parseSequences reads the lines of SEQUENCES: a stream's name, a space
// and its last sequence.
func parseSequences(b []byte) (map[string]uint64, error) {
	seqs := map[string]uint64{}
	for line := range strings.Lines(string(b)) {
		name, seqText, ok := strings.Cut(strings.TrimSpace(line), " ")
		seq, err := strconv.ParseUint(seqText, 10, 64)
		if !ok || err != nil || name == "" {
			return nil, fmt.Errorf("bad line %q", strings.TrimSpace(line))
		}
		seqs[name] = seq
	}
	return seqs, nil
}

// checkSequences returns the streams that end before the sequence
// recorded for them. A stream that did not load is reported by
// checkRecovered.
func (s *Store) checkSequences(ctx context.Context, recorded map[string]uint64) ([]string, error) {
	if len(recorded) == 0 {
		return nil, nil
	}
	now, err := s.streamSequences(ctx)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, name := range slices.Sorted(maps.Keys(recorded)) {
		if last, ok := now[name]; ok && last < recorded[name] {
			problems = append(problems, fmt.Sprintf("stream %s ends at sequence %d, but held sequence %d when orchd recorded it in %s: its latest messages are gone",
				name, last, recorded[name], filepath.Join(s.natsDir, sequencesFile)))
		}
	}
	return problems, nil
}

// seqEvery is how often a running store records its streams' sequences:
// ten sync intervals (at least a second, ten with sync "always"), so the
// sequences it records, seen a period before, are on disk.
func seqEvery(sync string) time.Duration {
	always, interval, _ := parseSync(sync)
	if always {
		return 10 * time.Second
	}
	return max(10*interval, time.Second)
}

// recordSequences records the streams' sequences every period, each time
// those seen a period before, until the store closes.
func (s *Store) recordSequences(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var seen map[string]uint64
	failing := false
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
		}
		var err error
		if seen != nil {
			err = writeSequences(s.natsDir, seen)
		}
		if err == nil {
			seen, err = s.streamSequences(s.bg)
		}
		switch {
		case err != nil && !failing && !s.closed():
			s.log.Warn("state store: record the streams' sequences", "err", err)
			failing = true
		case err == nil && failing:
			s.log.Info("state store: streams' sequences recorded again")
			failing = false
		}
	}
}
