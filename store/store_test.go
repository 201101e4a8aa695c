package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats-server/v2/server"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/natstest"
	"github.com/orchd/orchd/internal/testwait"
)

func TestOpen_EmbeddedNeedsDir(t *testing.T) {
	t.Parallel()
	_, err := Open(t.Context(), "", Config{}, nil)
	if err == nil || !strings.Contains(err.Error(), "state directory") {
		t.Fatalf("Open with no dir = %v, want an error naming the state directory", err)
	}
}

func TestOpen_InvalidConfig(t *testing.T) {
	t.Parallel()
	_, err := Open(t.Context(), t.TempDir(), Config{Sync: "soon"}, nil)
	if err == nil || !strings.Contains(err.Error(), `store.sync "soon"`) {
		t.Fatalf("Open = %v, want the store.sync error", err)
	}
}

// TestOpen_WritesFormat checks a new directory gets the marker and the
// manifest, and opens again.
func TestOpen_WritesFormat(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openTest(t, dir, Config{})
	delegationsOf(t, s, DelegationsConfig{})
	if _, err := s.Leases(t.Context(), LeasesConfig{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "nats", formatFile))
	if err != nil || string(b) != formatLine {
		t.Fatalf("FORMAT = %q, %v; want %q", b, err, formatLine)
	}
	m, err := readManifest(filepath.Join(dir, "nats"))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"KV_orchd-delegations", "KV_orchd-leases", "KV_orchd-owners", "orchd_DELEGATION_INDEX", "orchd_EVENTS"}
	for _, w := range want {
		if !contains(m, w) {
			t.Errorf("manifest %v lacks %s", m, w)
		}
	}
	openTest(t, dir, Config{})
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestOpen_RefusesForeignDirectory checks Open refuses a directory it did
// not make, naming it and the problem, and leaves it as it was.
func TestOpen_RefusesForeignDirectory(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"files but no marker", map[string]string{"jetstream/something": "x"}, "no FORMAT marker"},
		{"another format", map[string]string{"FORMAT": "orchd-store 2\n"}, `says "orchd-store 2"`},
		{"another program's marker", map[string]string{"FORMAT": "hello\n", "data": "y"}, `says "hello"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			natsDir := filepath.Join(dir, "nats")
			for name, content := range tc.files {
				p := filepath.Join(natsDir, name)
				if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Open(t.Context(), dir, Config{}, testLogger(t))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), natsDir) {
				t.Fatalf("Open = %v, want an error naming %s and saying %q", err, natsDir, tc.want)
			}
			for name, content := range tc.files {
				if b, err := os.ReadFile(filepath.Join(natsDir, name)); err != nil || string(b) != content {
					t.Errorf("%s changed: %q, %v", name, b, err)
				}
			}
		})
	}
}

// filledStore makes a store under dir with records and events, and closes
// it; it returns the stream directory of the records bucket.
func filledStore(t *testing.T, dir string, records int) string {
	t.Helper()
	s := openTest(t, dir, Config{})
	d := delegationsOf(t, s, DelegationsConfig{})
	for i := range records {
		r := delegation.Record{ID: fmt.Sprintf("d%04d", i), State: a2a.TaskStateWorking, CreatedAt: time.Now(),
			Error: strings.Repeat("x", 200)}
		if err := d.Put(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		if err := d.Append(t.Context(), r.ID, delegation.Event{Seq: 1, Kind: "state"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "nats", streamsDir, "KV_orchd-delegations")
}

// TestOpen_RefusesDamage damages a closed store in the ways the NATS
// server v2.15.2 does not refuse by itself, and checks Open refuses it,
// naming the path, and keeps the damaged files. Without the checks the
// server skips a stream whose meta file is unreadable (and orchd would
// make a new, empty one), and drops the messages of a corrupt block from
// the corruption on.
func TestOpen_RefusesDamage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, streamDir string)
		want   string
	}{
		{"garbage meta file", func(t *testing.T, sd string) {
			write(t, filepath.Join(sd, "meta.inf"), []byte("garbage{"))
		}, "did not load"},
		{"meta checksum missing", func(t *testing.T, sd string) {
			if err := os.Remove(filepath.Join(sd, "meta.sum")); err != nil {
				t.Fatal(err)
			}
		}, "did not load"},
		{"stream directory gone", func(t *testing.T, sd string) {
			if err := os.RemoveAll(sd); err != nil {
				t.Fatal(err)
			}
		}, "is missing"},
		{"corrupt message block", func(t *testing.T, sd string) {
			p := filepath.Join(sd, "msgs", "1.blk")
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			for i := len(b) / 2; i < len(b)/2+64; i++ {
				b[i] ^= 0xff
			}
			write(t, p, b)
		}, "corrupt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			sd := filledStore(t, dir, 200)
			tc.damage(t, sd)
			_, err := Open(t.Context(), dir, Config{}, testLogger(t))
			if err == nil {
				t.Fatal("Open accepted a damaged store")
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), filepath.Join(dir, "nats")) {
				t.Fatalf("Open = %v, want an error naming the directory and saying %q", err, tc.want)
			}
			if tc.name != "stream directory gone" {
				if _, err := os.Stat(filepath.Join(sd, "msgs", "1.blk")); err != nil {
					t.Errorf("the damaged stream's data went: %v", err)
				}
			}
			t.Logf("refused: %v", err)
			// Refused again, though the server dropped what it could not
			// read on the first start: the refusal is recorded.
			_, err = Open(t.Context(), dir, Config{}, testLogger(t))
			if err == nil || !strings.Contains(err.Error(), "found damaged before") {
				t.Fatalf("second Open = %v, want the recorded refusal", err)
			}
			if tc.name != "corrupt message block" {
				return
			}
			// Removing the record accepts what the server recovered.
			if err := os.Remove(filepath.Join(dir, "nats", damagedFile)); err != nil {
				t.Fatal(err)
			}
			s := openTest(t, dir, Config{})
			d := delegationsOf(t, s, DelegationsConfig{})
			p, err := d.List(t.Context(), delegation.Query{PageSize: delegation.MaxPageSize})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("after accepting the damage: %d of 200 records left", len(p.Records))
		})
	}
}

func write(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestStore_Restart checks records, events and running ids survive a
// restart on the same directory.
func TestStore_Restart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := openTest(t, dir, Config{})
	d := delegationsOf(t, s, DelegationsConfig{})
	for i, st := range []a2a.TaskState{a2a.TaskStateWorking, a2a.TaskStateCompleted, a2a.TaskStateInputRequired} {
		id := fmt.Sprintf("r%d", i)
		if err := d.Put(t.Context(), delegation.Record{ID: id, State: st, CreatedAt: time.Unix(int64(i), 0).UTC()}); err != nil {
			t.Fatal(err)
		}
		for seq := int64(1); seq <= 5; seq++ {
			if err := d.Append(t.Context(), id, delegation.Event{Seq: seq, Kind: "state"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, Config{})
	d = delegationsOf(t, s, DelegationsConfig{})
	p, err := d.List(t.Context(), delegation.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if got := idsOf(p.Records); strings.Join(got, " ") != "r2 r1 r0" {
		t.Errorf("after restart listed %v", got)
	}
	running, err := d.Running(t.Context())
	if err != nil || strings.Join(running, " ") != "r0 r2" {
		t.Errorf("after restart Running = %v, %v", running, err)
	}
	evs, err := d.Events(t.Context(), "r1", 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"3:state", "4:state", "5:state"}, eventsOf(evs)); diff != "" {
		t.Errorf("after restart Events(r1, 2) (-want +got):\n%s", diff)
	}
	// Appends go on from the log's tail, the cache of this process empty.
	if err := d.Append(t.Context(), "r1", delegation.Event{Seq: 5, Kind: "again"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Append(t.Context(), "r1", delegation.Event{Seq: 6, Kind: "state"}); err != nil {
		t.Fatal(err)
	}
	evs, err = d.Events(t.Context(), "r1", 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Event 5 is the one stored before the restart, not the append that
	// came again with its number.
	if diff := cmp.Diff([]string{"5:state", "6:state"}, eventsOf(evs)); diff != "" {
		t.Errorf("after appends Events(r1, 4) (-want +got):\n%s", diff)
	}
}

// eventsOf lists events as seq:kind, for a diff that shows which differ.
func eventsOf(evs []delegation.Event) []string {
	out := make([]string, 0, len(evs))
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%d:%s", ev.Seq, ev.Kind))
	}
	return out
}

func idsOf(rs []delegation.Record) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

// TestStore_CrashLosesNothing starts a child process that puts records as
// fast as it can, printing each acknowledged id, kills it with SIGKILL,
// and checks the store opens again (the recovery of a crash is no damage)
// holding every record the child saw acknowledged.
func TestStore_CrashLosesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("runs child processes")
	}
	t.Parallel()
	dir := t.TempDir()
	for round := range 3 {
		acked := crashRound(t, dir, 300+round*300)
		s, err := Open(t.Context(), dir, Config{}, testLogger(t))
		if err != nil {
			t.Fatalf("round %d: Open after kill -9: %v", round, err)
		}
		d, err := s.Delegations(t.Context(), DelegationsConfig{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range acked {
			if _, err := d.Get(t.Context(), id); err != nil {
				t.Errorf("round %d: acknowledged record %s: %v", round, id, err)
			}
		}
		t.Logf("round %d: %d acknowledged records, all there", round, len(acked))
		s.Close()
	}
}

// crashRound runs the child until it acknowledged n records, kills it and
// returns the ids it printed.
func crashRound(t *testing.T, dir string, n int) []string {
	cmd := helpers.Command(t, "crash-writer", dir)
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
	var acked []string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if id, ok := strings.CutPrefix(sc.Text(), "acked "); ok {
			acked = append(acked, id)
			if len(acked) == n {
				break
			}
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if len(acked) < n {
		t.Fatalf("child acknowledged %d records, not %d", len(acked), n)
	}
	return acked
}

// childDelegations opens the store in dir for a helper process that
// writes until it is killed, saying on stdout what failed.
func childDelegations(ctx context.Context, dir string, cfg Config) (*Delegations, bool) {
	s, err := Open(ctx, dir, cfg, nil)
	if err != nil {
		fmt.Println("open:", err)
		return nil, false
	}
	d, err := s.Delegations(ctx, DelegationsConfig{})
	if err != nil {
		fmt.Println("delegations:", err)
		return nil, false
	}
	return d, true
}

// crashChild puts records until it is killed, printing each id once its
// Put returned.
func crashChild(args []string) int {
	ctx := context.Background()
	d, ok := childDelegations(ctx, args[0], Config{})
	if !ok {
		return 1
	}
	pid := strconv.Itoa(os.Getpid())
	for i := 0; ; i++ {
		id := pid + "-" + strconv.Itoa(i)
		st := a2a.TaskStateWorking
		if i%2 == 0 {
			st = a2a.TaskStateCompleted
		}
		if err := d.Put(ctx, delegation.Record{ID: id, State: st, CreatedAt: time.Now()}); err != nil {
			fmt.Println("put:", err)
			return 1
		}
		if err := d.Append(ctx, id, delegation.Event{Seq: 1, Kind: "state"}); err != nil {
			fmt.Println("append:", err)
			return 1
		}
		fmt.Println("acked", id)
	}
}

// TestStore_Unavailable shuts the server down under the store and checks
// every kind of call fails within a bounded time with an error wrapping
// delegation.ErrUnavailable.
func TestStore_Unavailable(t *testing.T) {
	t.Parallel()
	testUnavailable(t, []unavailableCase{
		{"embedded", func(t *testing.T) (*Store, func()) {
			if testing.Short() {
				t.Skip("waits out a timeout per operation (about 12 s)")
			}
			s := openTest(t, "", Config{Timeout: time.Second})
			return s, func() { s.srv.Shutdown(); s.srv.WaitForShutdown() }
		}},
		{"closed", func(t *testing.T) (*Store, func()) {
			s := openTest(t, "", Config{Timeout: time.Second})
			return s, func() { s.Close() }
		}},
	})
}

// TestStore_UnavailableCluster is TestStore_Unavailable with every node of
// an external cluster stopped.
func TestStore_UnavailableCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	testUnavailable(t, []unavailableCase{{"external cluster", func(t *testing.T) (*Store, func()) {
		c := natstest.NewCluster(t, 3)
		s, err := Open(t.Context(), "", Config{URL: c.URLs(), Replicas: 3, Timeout: time.Second}, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s, func() {
			for i := range c.Servers {
				c.Stop(i)
			}
		}
	}}})
}

// unavailableCase opens a store and returns it with a func that takes its
// server away.
type unavailableCase struct {
	name string
	open func(t *testing.T) (*Store, func())
}

func testUnavailable(t *testing.T, cases []unavailableCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, stop := tc.open(t)
			d := delegationsOf(t, s, DelegationsConfig{})
			l, err := s.Leases(t.Context(), LeasesConfig{TTL: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			me, err := l.Join(t.Context(), "me")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := me.Take(t.Context(), "held"); err != nil {
				t.Fatal(err)
			}
			if err := d.Put(t.Context(), delegation.Record{ID: "before", State: a2a.TaskStateWorking}); err != nil {
				t.Fatal(err)
			}
			waitErr := make(chan error, 1)
			go func() { waitErr <- d.Wait(t.Context(), "before", 0) }()
			stop()
			for _, call := range []struct {
				name string
				do   func(ctx context.Context) error
			}{
				{"Put", func(ctx context.Context) error {
					return d.Put(ctx, delegation.Record{ID: "after", State: a2a.TaskStateWorking})
				}},
				{"Put ended", func(ctx context.Context) error {
					return d.Put(ctx, delegation.Record{ID: "after2", State: a2a.TaskStateCompleted})
				}},
				{"Get", func(ctx context.Context) error { _, err := d.Get(ctx, "before"); return err }},
				{"List", func(ctx context.Context) error { _, err := d.List(ctx, delegation.Query{}); return err }},
				{"Append", func(ctx context.Context) error {
					return d.Append(ctx, "before", delegation.Event{Seq: 1, Kind: "state"})
				}},
				{"Events", func(ctx context.Context) error { _, err := d.Events(ctx, "before", 0, 0); return err }},
				{"Running", func(ctx context.Context) error { _, err := d.Running(ctx); return err }},
				{"Take", func(ctx context.Context) error { _, err := me.Take(ctx, "other"); return err }},
				{"Renew", func(ctx context.Context) error { return me.Renew(ctx) }},
				{"Orphans", func(ctx context.Context) error { _, err := me.Orphans(ctx, nil); return err }},
				{"Join", func(ctx context.Context) error { _, err := l.Join(ctx, "you"); return err }},
				{"Holder", func(ctx context.Context) error { _, err := l.Holder(ctx, "held"); return err }},
				{"Ping", s.Ping},
			} {
				start := time.Now()
				err := call.do(t.Context())
				took := time.Since(start)
				if !errors.Is(err, delegation.ErrUnavailable) {
					t.Errorf("%s with the server down = %v, want ErrUnavailable", call.name, err)
				}
				if took > 3*time.Second {
					t.Errorf("%s took %s to fail, over the 1s timeout", call.name, took)
				}
			}
			select {
			case err := <-waitErr:
				if !errors.Is(err, delegation.ErrUnavailable) {
					t.Errorf("Wait with the server down = %v, want ErrUnavailable", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("Wait did not return within 10s of the server going down")
			}
		})
	}
}

// TestStore_StorageFull fills a store bounded to 1 MiB and checks the
// write that finds no room fails with delegation.ErrUnavailable.
func TestStore_StorageFull(t *testing.T) {
	t.Parallel()
	s := openTest(t, "", Config{MaxBytes: MinMaxBytes})
	d := delegationsOf(t, s, DelegationsConfig{})
	big := strings.Repeat("x", 64<<10)
	for i := range 100 {
		err := d.Put(t.Context(), delegation.Record{ID: fmt.Sprintf("d%d", i), State: a2a.TaskStateWorking, Error: big})
		if err == nil {
			continue
		}
		if !errors.Is(err, delegation.ErrUnavailable) {
			t.Fatalf("Put %d into a full store = %v, want ErrUnavailable", i, err)
		}
		t.Logf("full after %d records: %v", i, err)
		return
	}
	t.Fatal("100 records of 64 KiB went into 1 MiB")
}

// TestOpen_Unreachable checks a cluster nobody answers at fails Open
// within the timeout, with delegation.ErrUnavailable.
func TestOpen_Unreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	start := time.Now()
	_, err = Open(t.Context(), "", Config{URL: "nats://" + addr, Timeout: time.Second}, testLogger(t))
	if !errors.Is(err, delegation.ErrUnavailable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("Open(unreachable) = %v, want ErrUnavailable naming %s", err, addr)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Open took %s to give up", took)
	}
}

// TestOpen_WaitsForAClusterToAnswer opens the store on a cluster that has
// lost its quorum, so it answers nothing in time, and brings the quorum
// back meanwhile: Open waits for it instead of failing at the first
// timeout.
func TestOpen_WaitsForAClusterToAnswer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a 3-node cluster")
	}
	t.Parallel()
	c := natstest.NewCluster(t, 3)
	// The meta leader and one more node go: a leader left alone goes on
	// answering for a while, a follower left alone has no leader to ask.
	leader := slices.IndexFunc(c.Servers, func(s *server.Server) bool { return s.JetStreamIsLeader() })
	if leader < 0 {
		t.Fatal("the cluster has no meta leader")
	}
	gone := []int{leader, (leader + 1) % 3}
	for _, i := range gone {
		c.Stop(i)
	}
	lone := natstest.JetStream(t, c.Servers[(leader+2)%3])
	testwait.Until(t, 30*time.Second, "the node left stops answering", func() bool {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := lone.AccountInfo(ctx)
		return errors.Is(err, context.DeadlineExceeded)
	})
	type opened struct {
		s   *Store
		err error
	}
	done := make(chan opened, 1)
	start := time.Now()
	go func() {
		s, err := Open(t.Context(), "", Config{URL: c.URLs(), Timeout: time.Second}, testLogger(t))
		done <- opened{s, err}
	}()
	select {
	case o := <-done:
		t.Fatalf("Open returned with no quorum: %v", o.err)
	case <-time.After(3 * time.Second):
	}
	for _, i := range gone {
		c.Restart(i)
	}
	o := <-done
	if o.err != nil {
		t.Fatalf("Open after the quorum came back (%s): %v", time.Since(start).Round(time.Millisecond), o.err)
	}
	o.s.Close()
}
