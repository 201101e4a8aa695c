package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/orchd/orchd/orchestrator"
)

func newConfigCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "config",
		Short:   "Check orchd's configuration file",
		Example: `  orchd config validate /etc/orchd/orchd.yaml`,
	}
	cmd.AddCommand(newConfigValidateCmd(g))
	return cmd
}

func newConfigValidateCmd(g *globals) *cobra.Command {
	var insecureNoAuth bool
	cmd := &cobra.Command{
		Use:   "validate FILE",
		Short: "Load and check a config file and everything it names, without serving",
		Long: `Load FILE on top of the embedded defaults, as 'orchd serve --config FILE'
does, and build every part of the daemon from it without serving: the config
is decoded and validated, the policy files compiled, the authentication set
up (tokens files and key files read), the card signing key, the HTTPS
certificate and key and the external store's credential files read, and the
advertised address and the rule against serving beyond loopback without
authentication checked.

Nothing is written or started: the state directory is neither created nor
locked (a running daemon may hold it), the store is not opened (store.url is
not dialed, the embedded NATS server not started), no agent card is fetched
and no JWKS URL read; those are first used when the daemon starts.

Prints one line when the file is sound and exits 0; otherwise prints every
problem found, with its file, line and column where known, and exits 1.`,
		Example: `  orchd config validate orchd.yaml
  orchd config validate --insecure-no-auth /etc/orchd/orchd.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := g.logger(); err != nil {
				return err
			}
			s, err := orchestrator.CheckConfig(args[0], orchestrator.CheckOptions{InsecureNoAuth: insecureNoAuth})
			if err != nil {
				return fmt.Errorf("%s is not valid:\n%w", args[0], err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "ok: %s: %s\n", args[0], summary(s))
			return nil
		},
	}
	cmd.Flags().BoolVar(&insecureNoAuth, "insecure-no-auth", false, "check as serve --insecure-no-auth would run it")
	return cmd
}

// summary says in one line what a sound configuration sets up.
func summary(s orchestrator.ConfigSummary) string {
	store := "store " + s.Store
	if s.StateDir != "" {
		store += " in " + s.StateDir
	}
	auth := "no authentication"
	if s.Auth {
		auth = "authentication on"
	}
	parts := []string{
		"listen " + s.Listen, store, count(s.Agents, "agent", "agents"),
		fmt.Sprintf("%s (%s)", count(s.Policies, "policy", "policies"), count(s.Rules, "rule", "rules")),
		count(s.AuthorizationPolicies, "authorization policy", "authorization policies"), auth,
	}
	if s.TLS {
		parts = append(parts, "HTTPS")
	}
	return strings.Join(parts, ", ")
}
