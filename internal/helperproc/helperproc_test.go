package helperproc_test

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/orchd/orchd/internal/helperproc"
)

var helpers = helperproc.Commands{
	"echo": func(args []string) int {
		fmt.Println(strings.Join(args, " "))
		return 0
	},
	"fail": func([]string) int { return 3 },
}

func TestMain(m *testing.M) {
	helpers.Main()
	goleak.VerifyTestMain(m)
}

func TestCommand_RunsTheHelperNotTheTests(t *testing.T) {
	t.Parallel()
	out, err := helpers.Command(t, "echo", "-test.run=TestNothing", "two").Output()
	if err != nil {
		t.Fatal(err)
	}
	// The helper got the arguments as they were given; had the binary run
	// its tests instead, it would have printed their verdict.
	if got := string(out); got != "-test.run=TestNothing two\n" {
		t.Errorf("the child printed %q, want the helper's echo of its arguments", got)
	}
}

func TestCommand_ExitsWithTheHelpersStatus(t *testing.T) {
	t.Parallel()
	err := helpers.Command(t, "fail").Run()
	if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ee.ExitCode() != 3 {
		t.Errorf("the child ended with %v, want exit status 3", err)
	}
}
