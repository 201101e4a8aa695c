package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/orchd/orchd/orchestrator"
	"github.com/orchd/orchd/telemetry"
)

func newServeCmd(g *globals) *cobra.Command {
	var configPath, listen, stateDir string
	var insecureNoAuth bool
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon",
		Long: `Run the orchd daemon: register the configured agents, keep their cards
fresh and serve the HTTP JSON API. Without --config the embedded defaults
apply (listen on 127.0.0.1:8080, card fetches may reach loopback, no
policies). SIGHUP reloads the policy files and auth.tokensFile (they are
also reloaded when they change); SIGINT and SIGTERM shut the daemon down gracefully.`,
		Example: `  orchd serve
  orchd serve --config /etc/orchd/orchd.yaml
  orchd serve --listen 127.0.0.1:9090 --state-dir /tmp/orchd-dev --log-format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, cfg, err := g.setup(configPath)
			if err != nil {
				return err
			}
			if listen != "" {
				cfg.Listen = listen
			}
			if stateDir != "" {
				cfg.StateDir = stateDir
			}
			cfg.InsecureNoAuth = insecureNoAuth
			setMemoryLimit(log)
			d, err := orchestrator.New(cfg, log)
			if err != nil {
				return err
			}
			return serveDaemon(cmd.Context(), d, log)
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "YAML config file, read on top of the embedded defaults")
	cmd.Flags().StringVar(&listen, "listen", "", "listen address, overriding the config (default 127.0.0.1:8080)")
	cmd.Flags().StringVar(&stateDir, "state-dir", "", "state directory (identity, locked while serving), overriding the config (default one per listen address under the user's state directory)")
	cmd.Flags().BoolVar(&insecureNoAuth, "insecure-no-auth", false, "serve beyond loopback with no authentication configured (behind an authenticating proxy or on a private network only)")
	return cmd
}

// serveDaemon runs d until ctx is done or SIGINT or SIGTERM arrives;
// SIGHUP reloads the policy files and the tokens file meanwhile.
func serveDaemon(ctx context.Context, d *orchestrator.Daemon, log *slog.Logger) error {
	telemetry.RouteProcessLogs(log) // process-wide: before Run starts any gRPC
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	var reloader sync.WaitGroup
	reloader.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				log.Info("SIGHUP: reloading policies and the tokens file")
				_ = d.ReloadPolicies() // the engine logs a failed reload
				if err := d.ReloadTokens(); err != nil {
					log.Error("tokens file not reloaded; the previous tokens stay in force", "error", err)
				}
			}
		}
	})
	defer func() { signal.Stop(hup); stop(); reloader.Wait() }()
	return d.Run(ctx)
}
