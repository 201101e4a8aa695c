package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/orchd/orchd/orchestrator"
	"github.com/orchd/orchd/steering"
	"github.com/orchd/orchd/telemetry"
)

// globals are the flags every command takes.
type globals struct {
	logLevel  string
	logFormat string
	stderr    io.Writer
}

// logger builds the slog logger the flags ask for. Records logged within a
// traced operation carry its trace_id and span_id.
func (g *globals) logger() (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(g.logLevel)); err != nil {
		return nil, usageError("--log-level %q: want debug, info, warn or error", g.logLevel)
	}
	log, err := telemetry.NewLogger(g.stderr, g.logFormat, level)
	if err != nil {
		return nil, usageError("--log-format %q: want text or json", g.logFormat)
	}
	return log, nil
}

// setup builds the logger and loads the configuration (the embedded
// defaults, then the file at configPath if any).
func (g *globals) setup(configPath string) (*slog.Logger, orchestrator.Config, error) {
	log, err := g.logger()
	if err != nil {
		return nil, orchestrator.Config{}, err
	}
	cfg, err := orchestrator.LoadConfig(configPath)
	return log, cfg, err
}

// run executes the command line and returns the process exit code.
func run(args []string, stdout, stderr io.Writer) int {
	return runContext(context.Background(), args, stdout, stderr)
}

func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	var helpErr error // set by the help of an unknown command (unknownHelp)
	err := root.ExecuteContext(context.WithValue(ctx, helpErrKey{}, &helpErr))
	if err == nil {
		err = helpErr
	}
	if err != nil {
		fmt.Fprintln(stderr, "orchd:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return exitFailure
	}
	return exitOK
}

// exitError carries a specific exit code.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stderr: stderr}
	root := &cobra.Command{
		Use:   "orchd",
		Short: "orchd orchestrates A2A agents",
		Long: `orchd discovers A2A agents, validates what their Agent Cards declare and
delegates work only where it can go. 'orchd serve' runs the daemon; the
other commands check files or talk to a running daemon (--server).

Exit codes:
  0  the command did what was asked
  1  the command, or the work it followed, failed
  2  the command line is wrong (unknown command or flag, wrong arguments);
     nothing was done
  3  orchd refused the work before anything reached an agent (no allowed,
     able agent; a refused steer or interrupt)`,
		Example: `  orchd serve --config orchd.yaml
  orchd agents add http://127.0.0.1:9001
  orchd delegate --skill research "find papers on A2A"
  orchd version`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&g.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	root.PersistentFlags().StringVar(&g.logFormat, "log-format", "text", "log format: text or json")
	root.AddCommand(newServeCmd(g), newAgentsCmd(g), newPolicyCmd(g), newDelegateCmd(), newTasksCmd(),
		newSteerCmd(steering.Steer), newSteerCmd(steering.Interrupt), newVersionCmd(), newConfigCmd(g), newHealthcheckCmd())
	root.AddCommand(newDemoCmd(g), newMCPCmd(g))
	root.SetHelpCommand(helpCmd(root))
	sentences(root)
	return root
}
