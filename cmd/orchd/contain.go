package main

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/orchd/orchd/httpapi"
	"github.com/orchd/orchd/registry"
)

func newAgentsContainCmd() *cobra.Command {
	var server, reason string
	var cancel bool
	var output outputFormat
	cmd := &cobra.Command{
		Use:   "contain ID --reason TEXT [--cancel]",
		Short: "Stop all work going to an agent",
		Long: `Contain the agent registered as ID: from now on the daemon, and every replica
sharing its store, sends it no new work and refuses input for work that
reaches it; the work running on it, and the work whose steer or interrupt
receipts name it below a hop, is interrupted (--cancel: canceled), each
delegation logging who contained the agent, when and why. The reason (1 to
500 bytes) is required. An agent contained already stays as it was.
'orchd agents release ID' ends the containment.`,
		Example: `  orchd agents contain reporter --reason "sends customer data out"
  orchd agents contain reporter --reason "runaway costs" --cancel`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !registry.ValidContainmentReason(reason) {
				return &exitError{code: exitUsage, err: fmt.Errorf("--reason is required: 1 to %d bytes of UTF-8", registry.MaxContainmentReason)}
			}
			var ans httpapi.ContainmentAnswer
			body := httpapi.ContainRequest{Reason: reason, Cancel: cancel}
			if err := newAPIClient(server).do(cmd.Context(), "POST", "/v1/agents/"+url.PathEscape(args[0])+":contain", body, &ans); err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), ans)
			}
			if ans.Containment == nil {
				return errors.New("the daemon answered without the containment")
			}
			if ans.Changed {
				fmt.Fprintf(cmd.OutOrStdout(), "contained %s: %s\n", ans.Agent, ans.Containment.String())
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "%s was already contained, unchanged: %s\n", ans.Agent, ans.Containment.String())
			}
			return nil
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().StringVar(&reason, "reason", "", "why the agent is contained (required, 1 to 500 bytes)")
	cmd.Flags().BoolVar(&cancel, "cancel", false, "cancel the running work rather than interrupt it")
	outputFlag(cmd, &output)
	return cmd
}

func newAgentsReleaseCmd() *cobra.Command {
	var server string
	var output outputFormat
	cmd := &cobra.Command{
		Use:   "release ID",
		Short: "End an agent's containment",
		Long: `Release the agent registered as ID from its containment: new work may go to
it again, and input to the work it holds waiting. Work stopped while it was
contained stays as it is. An agent not contained is no error.`,
		Example: `  orchd agents release reporter`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var ans httpapi.ContainmentAnswer
			if err := newAPIClient(server).do(cmd.Context(), "POST", "/v1/agents/"+url.PathEscape(args[0])+":release", nil, &ans); err != nil {
				return err
			}
			if output == "json" {
				return printJSON(cmd.OutOrStdout(), ans)
			}
			if !ans.Changed || ans.Containment == nil {
				fmt.Fprintf(cmd.OutOrStdout(), "%s was not contained\n", ans.Agent)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "released %s, %s\n", ans.Agent, ans.Containment.String())
			return nil
		},
	}
	serverFlag(cmd, &server)
	outputFlag(cmd, &output)
	return cmd
}
