package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/registry"
)

func newAgentsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "Register, list and inspect A2A agents",
		Long: `Register agents with a running orchd, list them, show one, refresh its card,
contain or release it, or remove it (--server, default http://127.0.0.1:8080; the bearer token in
$ORCHD_TOKEN when the daemon authenticates its callers). 'agents inspect'
reads a card directly, without a daemon.`,
		Example: `  orchd agents add http://127.0.0.1:9001 --id reporter
  orchd agents list
  orchd agents inspect http://127.0.0.1:9001`,
	}
	cmd.AddCommand(newAgentsAddCmd(), newAgentsListCmd(), newAgentsGetCmd(), newAgentsRefreshCmd(), newAgentsRemoveCmd(),
		newAgentsContainCmd(), newAgentsReleaseCmd(), newInspectCmd(g))
	return cmd
}

func newAgentsAddCmd() *cobra.Command {
	var server, id string
	var output outputFormat
	cmd := &cobra.Command{
		Use:   "add URL [--id ID]",
		Short: "Register an agent with a running orchd",
		Long: `Ask the daemon to fetch the Agent Card at URL and register the agent, under
--id or an id made from the card's name. Nothing is registered unless the
card was fetched, read and kept. Prints the agent's profile.`,
		Example: `  orchd agents add http://127.0.0.1:9001
  orchd agents add https://research.example.com --id research -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := registry.NormalizeURL(args[0]); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			var a registry.Agent
			if err := newAPIClient(server).do(cmd.Context(), "POST", "/v1/agents", registry.Spec{ID: id, URL: args[0]}, &a); err != nil {
				return err
			}
			return printAgent(cmd, output, &a)
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVar(&id, "id", "", "the agent's id (default: made from the card's name)")
	outputFlag(cmd, &output)
	return cmd
}

func newAgentsListCmd() *cobra.Command {
	var server string
	var output outputFormat
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the agents of a running orchd",
		Long: `List the registered agents, sorted by id, with their health and steering
modes, then the configured agents whose cards could not be read yet.`,
		Example: `  orchd agents list
  orchd agents list -o json --server https://orchd.example.com`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var l httpapi.AgentList
			if err := newAPIClient(server).do(cmd.Context(), "GET", "/v1/agents", nil, &l); err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), l)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tNAME\tHEALTH\tSTEERING\tURL")
			for _, a := range l.Agents {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", a.ID, a.Name, health(a), steeringModes(a), a.URL)
			}
			for _, p := range l.Pending {
				fmt.Fprintf(tw, "%s\t\tpending: %d failed fetches, next %s\t\t%s\n", orNone(p.ID), p.Failures, p.NextAttempt.Format(time.RFC3339), p.URL)
			}
			return tw.Flush()
		},
	}
	serverFlag(cmd, &server)
	outputFlag(cmd, &output)
	return cmd
}

// health says in a word or two how an agent is doing.
func health(a *registry.Agent) string {
	switch {
	case a.Contained:
		return "contained"
	case a.Breaker.State == registry.BreakerOpen || a.Breaker.State == registry.BreakerHalfOpen:
		return "breaker " + string(a.Breaker.State)
	case !a.Healthy:
		return "unhealthy"
	}
	return "healthy"
}

// steeringModes lists the steering modes an agent declares.
func steeringModes(a *registry.Agent) string {
	var modes []string
	if a.Steering.Steerable {
		modes = append(modes, "steerable")
	}
	if a.Steering.Interruptible {
		modes = append(modes, "interruptible")
	}
	return orNone(strings.Join(modes, ", "))
}

func newAgentsGetCmd() *cobra.Command {
	var server string
	var output outputFormat
	cmd := &cobra.Command{
		Use:     "get ID",
		Short:   "Show one agent of a running orchd",
		Long:    `Print the profile of the agent registered as ID, as the daemon holds it.`,
		Example: `  orchd agents get reporter`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var a registry.Agent
			if err := newAPIClient(server).do(cmd.Context(), "GET", "/v1/agents/"+url.PathEscape(args[0]), nil, &a); err != nil {
				return err
			}
			return printAgent(cmd, output, &a)
		},
	}
	serverFlag(cmd, &server)
	outputFlag(cmd, &output)
	return cmd
}

func newAgentsRefreshCmd() *cobra.Command {
	var server string
	var output outputFormat
	cmd := &cobra.Command{
		Use:   "refresh ID",
		Short: "Fetch an agent's card again now",
		Long: `Ask the daemon to revalidate the card of the agent registered as ID now
(conditionally when its server sent validators) and print the profile. On
failure the agent keeps its last good card and its failure count rises.`,
		Example: `  orchd agents refresh reporter`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var a registry.Agent
			if err := newAPIClient(server).do(cmd.Context(), "POST", "/v1/agents/"+url.PathEscape(args[0])+":refresh", nil, &a); err != nil {
				return err
			}
			return printAgent(cmd, output, &a)
		},
	}
	serverFlag(cmd, &server)
	outputFlag(cmd, &output)
	return cmd
}

func newAgentsRemoveCmd() *cobra.Command {
	var server string
	cmd := &cobra.Command{
		Use:     "remove ID",
		Short:   "Unregister an agent from a running orchd",
		Long:    `Unregister the agent registered as ID, or forget a configured agent still pending under that id.`,
		Example: `  orchd agents remove reporter`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := newAPIClient(server).do(cmd.Context(), "DELETE", "/v1/agents/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", args[0])
			return nil
		},
	}
	serverFlag(cmd, &server)
	return cmd
}

// printAgent writes an agent's profile as output asks.
func printAgent(cmd *cobra.Command, output outputFormat, a *registry.Agent) error {
	if output == "json" {
		return printJSON(cmd.OutOrStdout(), a)
	}
	return printProfile(cmd.OutOrStdout(), a)
}

func newInspectCmd(g *globals) *cobra.Command {
	var configPath string
	var output outputFormat
	cmd := &cobra.Command{
		Use:   "inspect URL",
		Short: "Fetch one Agent Card and print its capability profile",
		Long: `Fetch the Agent Card of the agent at URL (from URL/.well-known/agent-card.json,
or the 0.2 path /.well-known/agent.json) and print its profile: protocol
versions per binding, whether orchd can talk to it, capability tiers,
extensions, steering modes and warnings. The card is fetched with the same
safety rules as the daemon's (--config, or the embedded defaults).`,
		Example: `  orchd agents inspect http://127.0.0.1:9001
  orchd agents inspect https://research.example.com -o json --config orchd.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, err := registry.NormalizeURL(args[0]); err != nil {
				return &exitError{code: exitUsage, err: err}
			}
			log, cfg, err := g.setup(configPath)
			if err != nil {
				return err
			}
			reg, err := registry.New(cfg.RegistryConfig(), log)
			if err != nil {
				return err
			}
			defer reg.Close()
			a, err := reg.Inspect(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return printAgent(cmd, output, a)
		},
	}
	outputFlag(cmd, &output)
	cmd.Flags().StringVar(&configPath, "config", "", "YAML config file whose registry section applies")
	return cmd
}

// printProfile writes an agent's profile for a person to read.
func printProfile(w io.Writer, a *registry.Agent) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// rows prints values under one key, the key on the first row only, and
	// "none" for no values.
	rows := func(key string, values ...string) {
		if len(values) == 0 {
			values = []string{"none"}
		}
		for _, v := range values {
			fmt.Fprintf(tw, "%s\t%s\n", key, v)
			key = ""
		}
	}
	yesNo := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}

	if a.ID != "" {
		rows("id", a.ID)
	}
	rows("name", a.Name)
	rows("url", a.URL)
	rows("card", fmt.Sprintf("version %s, A2A %s layout, %s", orNone(a.CardVersion), a.CardFormat, a.Digest))
	if a.ClientCompatible {
		rows("compatible", "yes")
	} else {
		rows("compatible", "no: "+a.IncompatibleReason)
	}
	var protocols []string
	for _, p := range a.Protocols {
		v := fmt.Sprintf("%s over %s at %s", p.Version, p.Binding, p.URL)
		if p.Tenant != "" {
			v += " (tenant " + p.Tenant + ")"
		}
		protocols = append(protocols, v)
	}
	rows("protocols", protocols...)
	if a.MinProtocolVersion != "" || a.MaxProtocolVersion != "" {
		rows("version range", fmt.Sprintf("%s to %s", orNone(a.MinProtocolVersion), orNone(a.MaxProtocolVersion)))
	}
	for _, tier := range []capability.Tier{capability.TierImplicit, capability.TierDeclared, capability.TierDeprecated} {
		var names []string
		for name, c := range a.Capabilities {
			if c.Tier != tier {
				continue
			}
			if tier == capability.TierDeclared && !c.Declared {
				name += " (implied)"
			}
			names = append(names, name)
		}
		sort.Strings(names)
		rows(fmt.Sprintf("tier %d %s", tier, tier), orNone(strings.Join(names, ", ")))
	}
	var exts []string
	for _, x := range a.Extensions {
		v := x.URI
		if x.Required {
			v += " (required)"
		}
		if len(x.Params) > 0 {
			b, _ := json.Marshal(x.Params)
			v += " " + string(b)
		}
		exts = append(exts, v)
	}
	rows("extensions", exts...)
	rows("steering", fmt.Sprintf("interruptible %s, steerable %s", yesNo(a.Steering.Interruptible), yesNo(a.Steering.Steerable)))
	var skills []string
	for _, s := range a.Skills {
		v := s.ID
		if s.Name != "" && s.Name != s.ID {
			v += " (" + s.Name + ")"
		}
		if len(s.Tags) > 0 {
			v += ": " + strings.Join(slices.Sorted(slices.Values(s.Tags)), ", ")
		}
		skills = append(skills, v)
	}
	rows("skills", skills...)
	rows("warnings", a.Warnings...)
	cache := fmt.Sprintf("fetched %s, fresh until %s", a.FetchedAt.Format(time.RFC3339), a.ExpiresAt.Format(time.RFC3339))
	if a.ETag != "" {
		cache += ", etag " + a.ETag
	}
	if !a.Healthy && a.Failures > 0 {
		cache += fmt.Sprintf("; %d failed fetches, last: %s", a.Failures, a.LastError)
	}
	rows("cache", cache)
	if b := a.Breaker; b.State == registry.BreakerOpen || b.State == registry.BreakerHalfOpen {
		rows("breaker", fmt.Sprintf("%s: %d calls failed in a row, last: %s; retry at %s", b.State, b.Failures, b.LastError, b.RetryAt.Format(time.RFC3339)))
	}
	if a.Contained && a.Containment != nil {
		rows("contained", a.Containment.String())
	}
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
