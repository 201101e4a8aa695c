package main

import (
	"fmt"
	"io"
	"net/url"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/orchd/orchd/delegation"
	"github.com/orchd/orchd/httpapi"
)

func newTasksCmd() *cobra.Command {
	var server string
	output := outputFormat("text")
	client := func() *apiClient { return newAPIClient(server) }
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "List, inspect, follow, answer and cancel delegations of a running orchd",
		Example: `  orchd tasks list --state working
  orchd tasks follow 4f1c…
  orchd tasks send 4f1c… "1999"
  orchd tasks cancel 4f1c…`,
	}
	server = defaultServer
	cmd.PersistentFlags().Var((*serverURL)(&server), "server", "orchd daemon to talk to")
	cmd.PersistentFlags().VarP(&output, "output", "o", "output format: text or json")

	var state string
	var limit int
	var after int64
	list := &cobra.Command{
		Use:   "list [--state S] [--limit N]",
		Short: "List delegations, newest first",
		Example: `  orchd tasks list
  orchd tasks list --state input_required --limit 20 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 1 {
				return usageError("--limit %d: want a positive number; %s", limit, seeHelp(cmd))
			}
			// The API lists a page at a time: follow the pages up to the
			// limit.
			var l httpapi.DelegationList
			q := url.Values{}
			if state != "" {
				q.Set("state", state)
			}
			for len(l.Delegations) < limit {
				q.Set("pageSize", fmt.Sprint(min(limit-len(l.Delegations), delegation.MaxPageSize)))
				var page httpapi.DelegationList
				if err := client().do(cmd.Context(), "GET", "/v1/delegations?"+q.Encode(), nil, &page); err != nil {
					return err
				}
				l.Delegations = append(l.Delegations, page.Delegations...)
				l.NextPageToken = page.NextPageToken
				if page.NextPageToken == "" {
					break
				}
				q.Set("pageToken", page.NextPageToken)
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), l)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tAGENT\tCREATED")
			for _, r := range l.Delegations {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.ID, shortState(r.State), r.Downstream.Agent, r.CreatedAt.Format("2006-01-02 15:04:05"))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if l.NextPageToken != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "(the %d newest; raise --limit to see more)\n", len(l.Delegations))
			}
			return nil
		},
	}
	list.Flags().StringVar(&state, "state", "", "only delegations in this state (working, input_required, completed, …)")
	list.Flags().IntVar(&limit, "limit", 100, "list at most this many")

	// show calls the API and prints the delegation it answers with.
	show := func(cmd *cobra.Command, method, path string) error {
		var rec delegation.Record
		if err := client().do(cmd.Context(), method, path, nil, &rec); err != nil {
			return err
		}
		if output == "json" {
			return printJSON(cmd.OutOrStdout(), rec)
		}
		printRecord(cmd, rec)
		return nil
	}

	get := &cobra.Command{
		Use:     "get ID",
		Short:   "Show a delegation",
		Example: "  orchd tasks get 4f1c…\n  orchd tasks get -o json 4f1c…",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(cmd, "GET", "/v1/delegations/"+url.PathEscape(args[0]))
		},
	}

	follow := &cobra.Command{
		Use:   "follow ID",
		Short: "Follow a delegation's events until it ends or waits for input",
		Long: `Print a delegation's events, those it had and then those it has live, until
it ends or waits for input, as 'orchd delegate' does: to follow again work
left running by Ctrl-C or --detach. A stream the daemon closes early (it
restarted) is resumed where it stopped. With -o json every event is a line
of JSON. Exits as 'orchd delegate' does.`,
		Example: `  orchd tasks follow 4f1c…
  orchd tasks follow --after 12 4f1c…`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if after < 0 {
				return usageError("--after %d: want an event's sequence number, 0 or more; %s", after, seeHelp(cmd))
			}
			c := client()
			var rec delegation.Record
			if err := c.do(cmd.Context(), "GET", "/v1/delegations/"+url.PathEscape(args[0]), nil, &rec); err != nil {
				return err
			}
			if output != "json" {
				printDecision(cmd.OutOrStdout(), rec)
			}
			// Only its last wait stops it: the earlier ones were
			// answered.
			return followDelegation(cmd, c, rec.ID, &followed{after: after, from: rec.LastEvent, state: rec.State}, output)
		},
	}
	follow.Flags().Int64Var(&after, "after", 0, "print only the events after this sequence number (the [N] before each)")

	send := &cobra.Command{
		Use:     `send ID "text"`,
		Short:   "Answer a delegation waiting for input, and follow it",
		Example: `  orchd tasks send 4f1c… "1999"`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := client()
			path := "/v1/delegations/" + url.PathEscape(args[0])
			var before delegation.Record
			if err := c.do(cmd.Context(), "GET", path, nil, &before); err != nil {
				return err
			}
			var rec delegation.Record
			if err := c.do(cmd.Context(), "POST", path+"/messages", httpapi.InputRequest{Text: args[1]}, &rec); err != nil {
				return err
			}
			return followDelegation(cmd, c, rec.ID, &followed{after: before.LastEvent, from: before.LastEvent + 1, state: rec.State}, output)
		},
	}

	cancel := &cobra.Command{
		Use:     "cancel ID",
		Short:   "Cancel a delegation; the agent's task is canceled too",
		Example: "  orchd tasks cancel 4f1c…",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return show(cmd, "POST", "/v1/delegations/"+url.PathEscape(args[0])+":cancel")
		},
	}
	cmd.AddCommand(list, get, follow, send, cancel)
	return cmd
}

func printRecord(cmd *cobra.Command, r delegation.Record) {
	w := cmd.OutOrStdout()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "id\t%s\n", r.ID)
	fmt.Fprintf(tw, "state\t%s\n", shortState(r.State))
	fmt.Fprintf(tw, "agent\t%s (card %s)\n", r.Downstream.Agent, r.Downstream.CardDigest)
	fmt.Fprintf(tw, "task\t%s\n", orNone(string(r.Downstream.TaskID)))
	fmt.Fprintf(tw, "chain\tdepth %d of %d, path %v\n", r.Chain.Depth, r.Chain.MaxDepth, r.Chain.Path)
	printLineage(tw, r.Lineage)
	if r.Result != nil {
		fmt.Fprintf(tw, "result\t%s\n", partsText(r.Result.Parts))
	}
	for _, a := range r.Artifacts {
		fmt.Fprintf(tw, "artifact\t%s: %s\n", a.ID, partsText(a.Parts))
	}
	if r.Error != "" {
		fmt.Fprintf(tw, "error\t%s\n", r.Error)
	}
	_ = tw.Flush()
}

// printLineage writes the hops below the delegation's agent, as that
// agent (an orchd) reported them, one line each, top first: which orchd
// chose which agent, how it stands, its task and timings. The last line
// is the leaf agent.
func printLineage(w io.Writer, l *delegation.Lineage) {
	if l == nil {
		return
	}
	for _, h := range l.Hops {
		by, agent := h.Orchd, h.Agent
		if h.Name != "" {
			by = h.Name
		}
		if h.AgentName != "" && h.AgentName != h.Agent {
			agent += " (" + h.AgentName + ")"
		}
		line := fmt.Sprintf("below\t%s → %s: %s, task %s", by, agent, shortState(h.State), orNone(string(h.TaskID)))
		if !h.CreatedAt.IsZero() {
			line += fmt.Sprintf(", delegated %s, last change %s later", h.CreatedAt.UTC().Format(time.RFC3339Nano),
				h.UpdatedAt.Sub(h.CreatedAt).Round(time.Millisecond))
		}
		fmt.Fprintln(w, line)
	}
	if l.Truncated {
		fmt.Fprintln(w, "below\t… more hops, past the lineage's bounds")
	}
}
