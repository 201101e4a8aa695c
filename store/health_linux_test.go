package store

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/internal/testwait"
)

// writesChildEnv marks the child process of TestStore_WritesFailUntilRoom.
const writesChildEnv = "ORCHD_STORE_WRITES_CHILD"

// TestStore_WritesFailUntilRoom makes the embedded server's writes fail
// at the operating system and then succeed again. A full disk is
// simulated with the process's file size limit (RLIMIT_FSIZE), which the
// test can lift without privileges: past it a write fails with EFBIG, as
// it fails with ENOSPC on a full disk, and nats-server v2.15.2 treats
// both alike (the stream refuses, and leaves unanswered, every write
// after one). Each write then fails at once instead of after the
// timeout, Ready says the store cannot write, and once the limit is
// lifted the store writes again by itself, every record acknowledged
// before still there. The limit is the process's, so the test runs in a
// child process.
func TestStore_WritesFailUntilRoom(t *testing.T) {
	if os.Getenv(writesChildEnv) != "" {
		writesFailUntilRoom(t)
		return
	}
	if testing.Short() {
		t.Skip("runs a child process that fills its file-size limit")
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStore_WritesFailUntilRoom$", "-test.v")
	cmd.Env = append(os.Environ(), writesChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("child:\n%s", out)
	if err != nil {
		t.Fatalf("child: %v", err)
	}
}

func writesFailUntilRoom(t *testing.T) {
	s := openTest(t, "", Config{Timeout: 3 * time.Second})
	d := delegationsOf(t, s, DelegationsConfig{})
	put := func(id string) error {
		return d.Put(t.Context(), delegation.Record{ID: id, State: a2a.TaskStateWorking, CreatedAt: time.Now()})
	}
	for i := range 20 {
		if err := put(fmt.Sprintf("before%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Ready(t.Context()); err != nil {
		t.Fatalf("Ready before = %v", err)
	}
	var limit syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Fatal(err)
	}
	lifted := limit
	limit.Cur = 1
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		start := time.Now()
		err := put(fmt.Sprintf("failing%d", i))
		took := time.Since(start)
		if !errors.Is(err, delegation.ErrUnavailable) {
			t.Fatalf("Put %d with the disk refusing writes = %v, want ErrUnavailable", i, err)
		}
		t.Logf("Put %d failed after %s: %v", i, took.Round(time.Millisecond), err)
		if took > 2*time.Second {
			t.Errorf("Put %d took %s to fail, waiting for the timeout", i, took)
		}
	}
	if err := s.Ready(t.Context()); err == nil || !strings.Contains(err.Error(), "state store cannot write") ||
		!errors.Is(err, delegation.ErrUnavailable) {
		t.Fatalf("Ready with writes failing = %v", err)
	}
	time.Sleep(1500 * time.Millisecond) // room is looked for, and not found
	if err := s.Ready(t.Context()); err == nil {
		t.Fatal("Ready while the disk still refuses writes")
	}

	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lifted); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	testwait.Until(t, 20*time.Second, "ready once writes can succeed", func() bool { return s.Ready(t.Context()) == nil })
	t.Logf("ready again %s after the limit was lifted", time.Since(freed).Round(time.Millisecond))
	if err := put("after"); err != nil {
		t.Fatalf("Put after recovery: %v", err)
	}
	for i := range 20 {
		if _, err := d.Get(t.Context(), fmt.Sprintf("before%d", i)); err != nil {
			t.Errorf("record before%d after recovery: %v", i, err)
		}
	}
	running, err := d.Running(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"before0", "before19", "after"} {
		if !slices.Contains(running, id) {
			t.Errorf("running after recovery %v lacks %s", running, id)
		}
	}
}
