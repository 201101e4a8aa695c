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
	return tw.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
