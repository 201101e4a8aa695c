// Package helperproc runs parts of a test binary as child processes of its
// tests: a writer to kill with SIGKILL mid-write, an agent whose costs must
// not count as the benchmark's, a process with resource limits of its own.
//
// A test package lists its helpers in a [Commands] table, calls the
// table's Main first in TestMain, and starts a helper with
// [Commands.Command]. The child is the same test binary, told by an
// environment variable to run the helper instead of the tests, so a helper
// is never a test: it does not show as one in go test -v, and it cannot be
// run, or skipped, as one.
package helperproc

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// env names the helper a child process runs.
const env = "ORCHD_TEST_HELPER"

// Commands maps a helper's name to its main function, which gets the
// child's arguments and returns its exit status.
type Commands map[string]func(args []string) int

// Main runs the helper the environment names, if any, and exits with its
// status; in a test binary started to run tests it returns at once. Call
// it first in TestMain, before anything else the tests need.
func (c Commands) Main() {
	name, ok := os.LookupEnv(env)
	if !ok {
		return
	}
	run, ok := c[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "helperproc: no helper %q in this test binary\n", name)
		os.Exit(2)
	}
	os.Exit(run(os.Args[1:]))
}

// Command returns a command that runs the named helper, with args, in a
// child process of the test binary; the caller starts it, and waits for it
// or kills it. The test fails at once when the table has no such helper.
func (c Commands) Command(t testing.TB, name string, args ...string) *exec.Cmd {
	t.Helper()
	if _, ok := c[name]; !ok {
		t.Fatalf("helperproc: no helper %q", name)
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), env+"="+name)
	return cmd
}
