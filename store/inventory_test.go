package store

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
)

// TestOpen_RefusesLostMessages damages a store stopped gracefully in the
// ways nats-server v2.15.2 takes for the remains of a crash, starting
// with what it can read and a warning: 80 of 90 records left, every
// event log gone, the listing empty. Open refuses each before starting
// the server, naming the block, and keeps refusing; once the operator
// accepts the loss (removes DAMAGED), the store opens with what is left,
// and again after that.
func TestOpen_RefusesLostMessages(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		stream string
		damage func(t *testing.T, msgs string)
	}{
		{"records block cut short", "KV_orchd-delegations", func(t *testing.T, msgs string) {
			p := filepath.Join(msgs, "1.blk")
			info, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, info.Size()*80/90); err != nil {
				t.Fatal(err)
			}
		}},
		{"event blocks deleted", "orchd_EVENTS", func(t *testing.T, msgs string) {
			blocks, err := filepath.Glob(filepath.Join(msgs, "*.blk"))
			if err != nil || len(blocks) == 0 {
				t.Fatalf("event blocks %v, %v", blocks, err)
			}
			for _, b := range blocks {
				if err := os.Remove(b); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"index block cut short", "orchd_DELEGATION_INDEX", func(t *testing.T, msgs string) {
			if err := os.Truncate(filepath.Join(msgs, "1.blk"), 0); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			filledStore(t, dir, 90)
			msgs := filepath.Join(dir, "nats", streamsDir, tc.stream, "msgs")
			tc.damage(t, msgs)
			_, err := Open(t.Context(), dir, Config{}, testLogger(t))
			if err == nil {
				t.Fatal("Open accepted a store that lost messages")
			}
			if !strings.Contains(err.Error(), "message block "+filepath.Join(msgs, "1.blk")) {
				t.Fatalf("Open = %v, want the damaged block named", err)
			}
			t.Logf("refused: %v", err)
			_, err = Open(t.Context(), dir, Config{}, testLogger(t))
			if err == nil || !strings.Contains(err.Error(), "found damaged before") {
				t.Fatalf("second Open = %v, want the recorded refusal", err)
			}
			if err := os.Remove(filepath.Join(dir, "nats", damagedFile)); err != nil {
				t.Fatal(err)
			}
			for range 2 {
				s := openTest(t, dir, Config{})
				d := delegationsOf(t, s, DelegationsConfig{})
				p, err := d.List(t.Context(), delegation.Query{PageSize: delegation.MaxPageSize})
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("after accepting the loss: %d of 90 delegations listed", len(p.Records))
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestOpen_RefusesLostSequencesAfterACrash kills a process writing
// records with SIGKILL, so no record of its blocks is left, once it has
// recorded its streams' sequences while running; then cuts the records'
// block short. Open refuses the store: a stream ends before the sequence
// recorded for it.
func TestOpen_RefusesLostSequencesAfterACrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := helpers.Command(t, "seq-writer", dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	timer := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	natsDir := filepath.Join(dir, "nats")
	sc := bufio.NewScanner(out)
	acked := 0
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "acked ") {
			acked++
		}
		// The sequences recorded cover some 200 records.
		if recorded, _ := readSequences(natsDir); recorded["KV_orchd-delegations"] >= 400 {
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	recorded, err := readSequences(natsDir)
	if err != nil || recorded["KV_orchd-delegations"] < 400 {
		t.Fatalf("the child stopped after %d records, having recorded %v, %v; its last line: %q", acked, recorded, err, sc.Text())
	}
	t.Logf("killed after %d records; recorded %v", acked, recorded)
	if _, err := os.Stat(filepath.Join(natsDir, stoppedFile)); err == nil {
		t.Fatal("a killed process left a record of its blocks")
	}
	// The crash alone is no damage: a copy opens, every record there.
	undamaged := t.TempDir()
	if err := os.CopyFS(undamaged, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	s := openTest(t, undamaged, Config{})
	if got, _ := readSequences(filepath.Join(undamaged, "nats")); len(got) == 0 {
		t.Error("the copy's recorded sequences went at start")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	block := filepath.Join(natsDir, streamsDir, "KV_orchd-delegations", "msgs", "1.blk")
	info, err := os.Stat(block)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(block, info.Size()/4); err != nil {
		t.Fatal(err)
	}
	_, err = Open(t.Context(), dir, Config{}, testLogger(t))
	if err == nil || !strings.Contains(err.Error(), "stream KV_orchd-delegations ends at sequence") {
		t.Fatalf("Open = %v, want the lost sequences named", err)
	}
	t.Logf("refused: %v", err)
}

// seqChild puts records, recording its sequences every 50ms, until it is
// killed.
func seqChild(args []string) int {
	ctx := context.Background()
	d, ok := childDelegations(ctx, args[0], Config{seqEvery: 50 * time.Millisecond, Sync: "10ms"})
	if !ok {
		return 1
	}
	pid := strconv.Itoa(os.Getpid())
	for i := 0; ; i++ {
		id := pid + "-" + strconv.Itoa(i)
		if err := d.Put(ctx, delegation.Record{ID: id, State: a2a.TaskStateWorking, CreatedAt: time.Now()}); err != nil {
			fmt.Println("put:", err)
			return 1
		}
		fmt.Println("acked", id)
		time.Sleep(time.Millisecond)
	}
}

// FuzzParseSequences reads any SEQUENCES text without panicking; what it
// accepts, written again as writeSequences writes it, reads back the same.
func FuzzParseSequences(f *testing.F) {
	for _, seed := range []string{"", "orchd_EVENTS 42\n", "KV_orchd-delegations 7\norchd_EVENTS 18446744073709551615\n", "a b\n", " x 1", "x -1\n"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		seqs, err := parseSequences(b)
		if err != nil {
			return
		}
		var out strings.Builder
		for name, seq := range seqs {
			fmt.Fprintf(&out, "%s %d\n", name, seq)
		}
		again, err := parseSequences([]byte(out.String()))
		if err != nil || !maps.Equal(seqs, again) {
			t.Errorf("%q read as %v, written as %q, read again as %v, %v", b, seqs, out.String(), again, err)
		}
	})
}
