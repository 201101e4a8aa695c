package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchd/orchd/capability"
	"github.com/orchd/orchd/orchestrator"
	"github.com/orchd/orchd/registry"
)

func newAgentsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "agents", Short: "Work with A2A agents"}
	cmd.AddCommand(newInspectCmd(g))
	return cmd
}

func newInspectCmd(g *globals) *cobra.Command {
	var configPath, output string
	cmd := &cobra.Command{
		Use:   "inspect URL",
		Short: "Fetch one Agent Card and print its capability profile",
		Long: `Fetch the Agent Card of the agent at URL (from URL/.well-known/agent-card.json,
or the 0.2 path /.well-known/agent.json) and print its profile: protocol
versions per binding, whether orchd can talk to it, capability tiers,
extensions, steering modes and warnings. The card is fetched with the same
safety rules as the daemon's (--config, or the embedded defaults).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %q: want text or json", output)
			}
			log, err := g.logger()
			if err != nil {
				return err
			}
			cfg, err := orchestrator.LoadConfig(configPath)
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
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(a)
			}
			return printProfile(cmd.OutOrStdout(), a)
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&configPath, "config", "", "YAML config file whose registry section applies")
	return cmd
}

// printProfile writes an agent's profile for a person to read.
func printProfile(w io.Writer, a *registry.Agent) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	yesNo := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}

	row("name", a.Name)
	row("url", a.URL)
	row("card", fmt.Sprintf("version %s, A2A %s layout, %s", orNone(a.CardVersion), a.CardFormat, a.Digest))
	if a.ClientCompatible {
		row("compatible", "yes")
	} else {
		row("compatible", "no: "+a.IncompatibleReason)
	}
	for i, p := range a.Protocols {
		k := ""
		if i == 0 {
			k = "protocols"
		}
		v := fmt.Sprintf("%s over %s at %s", p.Version, p.Binding, p.URL)
		if p.Tenant != "" {
			v += " (tenant " + p.Tenant + ")"
		}
		row(k, v)
	}
	if a.MinProtocolVersion != "" || a.MaxProtocolVersion != "" {
		row("version range", fmt.Sprintf("%s to %s", orNone(a.MinProtocolVersion), orNone(a.MaxProtocolVersion)))
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
		row(fmt.Sprintf("tier %d %s", tier, tier), orNone(strings.Join(names, ", ")))
	}
	if len(a.Extensions) == 0 {
		row("extensions", "none")
	}
	for i, x := range a.Extensions {
		k := ""
		if i == 0 {
			k = "extensions"
		}
		v := x.URI
		if x.Required {
			v += " (required)"
		}
		if len(x.Params) > 0 {
			b, _ := json.Marshal(x.Params)
			v += " " + string(b)
		}
		row(k, v)
	}
	row("steering", fmt.Sprintf("interruptible %s, steerable %s", yesNo(a.Steering.Interruptible), yesNo(a.Steering.Steerable)))
	if len(a.Skills) == 0 {
		row("skills", "none")
	}
	for i, s := range a.Skills {
		k := ""
		if i == 0 {
			k = "skills"
		}
		v := s.ID
		if s.Name != "" && s.Name != s.ID {
			v += " (" + s.Name + ")"
		}
		if len(s.Tags) > 0 {
			v += ": " + strings.Join(slices.Sorted(slices.Values(s.Tags)), ", ")
		}
		row(k, v)
	}
	if len(a.Warnings) == 0 {
		row("warnings", "none")
	}
	for i, wn := range a.Warnings {
		k := ""
		if i == 0 {
			k = "warnings"
		}
		row(k, wn)
	}
	cache := fmt.Sprintf("fetched %s, fresh until %s", a.FetchedAt.Format(time.RFC3339), a.ExpiresAt.Format(time.RFC3339))
	if a.ETag != "" {
		cache += ", etag " + a.ETag
	}
	row("cache", cache)
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
