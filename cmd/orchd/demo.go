package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchd/orchd/examples/agents/fleet"
	"github.com/orchd/orchd/mcpserver"
	"github.com/orchd/orchd/orchestrator"
	"github.com/orchd/orchd/registry"
)

// defaultServer is the daemon the client commands talk to without
// --server, the one orchd demo runs by default.
const defaultServer = "http://127.0.0.1:8080"

func newDemoCmd(g *globals) *cobra.Command {
	var listen, stateDir string
	var agentsPort int
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run orchd with a fleet of demo agents, to try delegating and steering",
		Long: `Run an orchd on the embedded defaults together with the demo fleet of A2A
agents (examples/agents/fleet), registered in its configuration, and print
commands to try from another terminal: a report that streams, long work to
steer and interrupt, an agent that asks for input, an A2A 0.3 agent and one
that declares no steering; the web console at /ui/ shows it all live. The
agents listen on 127.0.0.1 from --agents-port on (report, steerable, asker,
legacy, plain) and log what they do on stderr; docs/demo.md describes them.

Without --state-dir the state is kept in a temporary directory, removed
when the demo stops; Ctrl-C (SIGINT) or SIGTERM stops orchd and the agents.`,
		Example: `  orchd demo
  orchd demo --listen 127.0.0.1:8090 --agents-port 9101`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agentsPort == 0 && stateDir != "" {
				// The agents kept in the state directory from an earlier
				// run are at other ports then, under the same ids.
				return usageError("--agents-port 0 cannot go with --state-dir: the agents kept from an earlier run would keep their old ports; give a port; %s", seeHelp(cmd))
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			cfg, err := orchestrator.LoadConfig("")
			if err != nil {
				return err
			}
			cfg.Listen = listen
			temporary := stateDir == ""
			if temporary {
				dir, err := os.MkdirTemp("", "orchd-demo-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(dir)
				stateDir = dir
			}
			cfg.StateDir = stateDir
			agents, err := fleet.Start(cmd.Context(), fleet.Config{BasePort: agentsPort, Log: log.With("component", "fleet")})
			if err != nil {
				return fmt.Errorf("start the demo agents: %w (--agents-port picks other ports)", err)
			}
			defer agents.Close() // after the daemon: its work on them ends first
			for _, a := range agents.Agents() {
				cfg.Agents = append(cfg.Agents, registry.Spec{ID: a.ID, URL: a.URL})
			}
			d, err := orchestrator.New(cfg, log)
			if err != nil {
				return err
			}
			ctx, stop := context.WithCancel(cmd.Context())
			var announcer sync.WaitGroup
			defer func() { stop(); announcer.Wait() }()
			announcer.Go(func() {
				if waitRegistered(ctx, d, len(cfg.Agents)) {
					printDemo(cmd.OutOrStdout(), "http://"+d.Addr().String(), agents.Agents(), stateDir, temporary)
				}
			})
			return serveDaemon(ctx, d, log)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "orchd's listen address")
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "keep orchd's state here, and leave it when the demo stops (default a temporary directory, removed)")
	cmd.Flags().IntVar(&agentsPort, "agents-port", 9001, "the first demo agent's port; the others take the next ones (0: free ports, without --state-dir)")
	return cmd
}

// waitRegistered waits until d listens and has taken up n configured
// agents (registered, or retrying one it could not reach yet); it reports
// false when ctx ends first.
func waitRegistered(ctx context.Context, d *orchestrator.Daemon, n int) bool {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for d.Addr() == nil || d.Registry().Len()+len(d.Registry().Pending()) < n {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
	return true
}

// demoSteps are the commands printDemo suggests: the command, its
// arguments, and what it shows.
var demoSteps = [][3]string{
	{"delegate", `--skill report "the state of agent protocols"`, "streams a report"},
	{"delegate", `--skill research --detach "agent steering"`, "long work; prints its ID"},
	{"steer", `ID "only papers from 2025"`, "the receipt names every hop"},
	{"tasks get", "ID", "the progress says which steer it took"},
	{"interrupt", "ID", "the work stops and waits for input"},
	{"tasks send", `ID "go on, briefly"`, "and resumes where it stopped"},
	{"agents contain", `steerable --reason "misbehaves"`, "its work stops; new work for it is refused"},
	{"agents release", "steerable", "work may reach it again"},
	{"delegate", `--skill summary "the A2A spec"`, "asks which year"},
	{"tasks send", "ID 2025", "the answer; it finishes"},
	{"delegate", `--skill legacy "hello from A2A 1.0"`, "an A2A 0.3 agent"},
	{"delegate", `--skill draft --detach "release notes"`, "long work, no steering"},
	{"steer", `ID "shorter"`, "refused: plain declares no steering"},
	{"tasks list", "", "every delegation"},
}

// printDemo says what runs and what to try.
func printDemo(w io.Writer, base string, agents []fleet.Agent, stateDir string, temporary bool) {
	fmt.Fprintf(w, "orchd demo: orchd serves at %s with %d demo agents:\n\n", base, len(agents))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, a := range agents {
		fmt.Fprintf(tw, "  %s\tskill %s\t%s\t%s\n", a.ID, a.Skill, a.URL, a.Description)
	}
	_ = tw.Flush()
	fmt.Fprintln(w, "\nTry, in another terminal (from a clone, \"go run ./cmd/orchd\" in place of \"orchd\"):")
	fmt.Fprintln(w)
	server := ""
	if base != defaultServer {
		server = " --server " + base
	}
	for _, s := range demoSteps {
		fmt.Fprintf(tw, "  %s\t# %s\n", strings.TrimSpace("orchd "+s[0]+server+" "+s[1]), s[2])
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nThe console shows the agents and each delegation's tree, live: %s/ui/\n", base)
	fmt.Fprintf(w, "MCP clients delegate through %s%s (docs/mcp.md), e.g.: claude mcp add --transport http orchd %s%s\n",
		base, mcpserver.Path, base, mcpserver.Path)
	where := "in " + stateDir + ", removed when the demo stops"
	if !temporary {
		where = "kept in " + stateDir
	}
	fmt.Fprintf(w, "\nThe agents log what they do below. orchd's state is %s; Ctrl-C stops the demo.\n", where)
}
