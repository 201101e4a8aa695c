package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os/signal"
	"strings"
	"syscall"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/orchd/orchd/internal/staleconn"
	"github.com/orchd/orchd/mcpserver"
)

// newMCPCmd returns `orchd mcp`: an MCP server on stdio for hosts that
// only launch local servers, forwarding everything to a daemon's /mcp.
func newMCPCmd(g *globals) *cobra.Command {
	var server string
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve a daemon's MCP endpoint on stdio, for hosts that launch local servers",
		Long: `Serve MCP on stdin and stdout (newline-delimited JSON-RPC) for hosts that only
launch local MCP servers, relaying every message to the MCP endpoint of the
daemon at --server (` + mcpserver.Path + `) and every message of the daemon's back: the
tools, their answers, progress, and the daemon's questions to the user
(elicitation). It keeps no state of its own; the daemon does the work, with
the caller $ORCHD_TOKEN authenticates.

Only JSON-RPC messages are written to stdout; errors and logs go to stderr.
A call the daemon cannot be reached for is answered with an error and the
bridge goes on. It stops when stdin ends (once the calls it relayed are
answered), on SIGINT or SIGTERM (exit 0), or when it cannot go on (exit 1):
the daemon refused the token or no longer has the session, or stdin held
something other than JSON-RPC.`,
		Example: `  orchd mcp
  ORCHD_TOKEN=… orchd mcp --server https://orchd.example.com`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := g.logger()
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return serveMCPStdio(ctx, server, cmd.InOrStdin(), cmd.OutOrStdout(), log)
		},
	}
	server = defaultServer
	cmd.Flags().Var((*serverURL)(&server), "server", "orchd daemon to talk to")
	return cmd
}

// serveMCPStdio relays MCP between a host on in and out and the daemon at
// server until in ends, ctx ends or the relay cannot go on.
func serveMCPStdio(ctx context.Context, server string, in io.Reader, out io.Writer, log *slog.Logger) error {
	endpoint := strings.TrimRight(server, "/") + mcpserver.Path
	// The daemon closes a connection idle for its http.idleTimeout; a
	// message sent on it as it closes is sent again, rather than the
	// host's call failing.
	daemon := &daemonTransport{api: newAPIClient(server), base: staleconn.Resend(http.DefaultTransport.(*http.Transport).Clone()), log: log}
	rc, ok := in.(io.ReadCloser)
	if !ok {
		rc = io.NopCloser(in)
	}
	local, err := (&mcp.IOTransport{Reader: rc, Writer: nopWriteCloser{out}}).Connect(ctx)
	if err != nil {
		return err
	}
	remote, err := (&mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: &http.Client{Transport: daemon}}).Connect(ctx)
	if err != nil {
		_ = local.Close()
		return err
	}
	b := &bridge{endpoint: endpoint, local: local, remote: remote, daemon: daemon, log: log}
	return b.run(ctx)
}

// nopWriteCloser is a writer whose Close leaves it open: the bridge's end
// does not close the process's stdout.
type nopWriteCloser struct{ io.Writer }

// Close does nothing.
func (nopWriteCloser) Close() error { return nil }
