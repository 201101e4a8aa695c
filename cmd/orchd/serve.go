package main

import (
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/orchd/orchd/orchestrator"
)

func newServeCmd(g *globals) *cobra.Command {
	var configPath, listen string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon",
		Long: `Run the orchd daemon: register the configured agents, keep their cards
fresh and serve the HTTP JSON API. Without --config the embedded defaults
apply (listen on 127.0.0.1:8080, card fetches may reach loopback).
SIGINT and SIGTERM shut it down gracefully.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, cfg, err := g.setup(configPath)
			if err != nil {
				return err
			}
			if listen != "" {
				cfg.Listen = listen
			}
			d, err := orchestrator.New(cfg, log)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
			defer stop()
			return d.Run(ctx)
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "YAML config file, read on top of the embedded defaults")
	cmd.Flags().StringVar(&listen, "listen", "", "listen address, overriding the config (default 127.0.0.1:8080)")
	return cmd
}
